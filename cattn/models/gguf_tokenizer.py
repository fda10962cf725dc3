"""cattn.models.gguf_tokenizer — the tokenizer stored in a GGUF file
(`tokenizer.ggml.*` metadata), built on the optional `tokenizers` package.

What this file is: the map from llama.cpp's tokenizer metadata to a
`tokenizers.Tokenizer`, and encode / decode over it:
- `tokenizer.ggml.model` "gpt2": byte-level BPE (the file's tokens and
  merges) after the pre-tokenizer `tokenizer.ggml.pre` names: "gpt-2"
  (GPT-2's regex), "llama-bpe" (Llama 3: digits in runs of up to 3, merges
  ignored for whole-vocabulary words, as llama.cpp does), "qwen2" (digits
  one by one);
- "llama": SentencePiece-style BPE (Llama 2, TinyLlama, Mistral, Phi-3):
  spaces become U+2581 with one in front, pieces merge by the merged
  token's score (tokenizer.ggml.scores), unknown characters fall back to
  the <0xXX> byte tokens.
Control tokens (token_type 3) and user-defined ones (4) are added tokens:
user-defined ones are matched in the text, control ones only when the
text is encoded with parse_special=True (llama.cpp's rule). What it is
not: a tokenizer implementation (tokenizers' Rust code is), or the GGUF
parser (gguf.py).
"""
import threading

import numpy as np

from .gguf_metadata import GGUFStrings
from .heap import trim_heap
from .tokenizer import TOKENIZERS_HINT

__all__ = ["GGUFTokenizer", "GGUF_PRE_TOKENIZERS"]

# tokenizer.ggml.pre -> the split regex (as in the models' tokenizer.json / llama.cpp)
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GGUF_PRE_TOKENIZERS = {"gpt-2": None, "llama-bpe": _LLAMA3, "qwen2": _QWEN2}

_NORMAL, _UNKNOWN, _CONTROL, _USER, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6


def _field(meta, key, path, kind=list):
    v = meta.get(key)
    if not isinstance(v, kind):
        raise ValueError(f"GGUF file {path}: tokenizer metadata {key!r} is "
                         f"{'missing' if v is None else type(v).__name__}; expected {kind.__name__}")
    return v


class GGUFTokenizer:
    """The tokenizer of a GGUF file's metadata: encode(text, add_special=True,
    parse_special=False) -> token ids (BOS / EOS as the file's
    add_bos_token / add_eos_token say), decode(ids, skip_special=True) ->
    text. Attributes: model ("gpt2" or "llama"), pre, bos_token_id,
    eos_token_id, vocab_size, and eot_ids (the ids that end a turn: EOS,
    EOT and the control tokens named like <|im_end|>, <|eot_id|>, <|end|>)."""

    def __init__(self, meta, path="<metadata>"):
        self._build(meta, path)
        trim_heap()             # the build's temporaries: the metadata's lists, the merges

    def _build(self, meta, path):
        try:
            import tokenizers
        except ImportError:
            raise ImportError(TOKENIZERS_HINT) from None
        self.path = path
        model = meta.get("tokenizer.ggml.model")
        tokens = _field(meta, "tokenizer.ggml.tokens", path)
        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.tokens must be a non-empty list "
                             "of strings")
        types = meta.get("tokenizer.ggml.token_type", [_NORMAL] * len(tokens))
        if not isinstance(types, list) or len(types) != len(tokens):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.token_type has "
                             f"{len(types) if isinstance(types, list) else 'no'} entries for "
                             f"{len(tokens)} tokens")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in types):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.token_type must hold integers")
        self.model, self.vocab_size = model, len(tokens)
        self.pre = meta.get("tokenizer.ggml.pre", "default")
        if model == "gpt2":
            tok = self._bpe(tokenizers, meta, tokens, path)
        elif model == "llama":
            tok = self._spm(tokenizers, meta, tokens, types, path)
        else:
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.model {model!r} is not "
                             "supported (supported: 'gpt2', 'llama')")
        added = []
        for i, (t, ty) in enumerate(zip(tokens, types)):
            if ty in (_CONTROL, _USER):
                added.append(tokenizers.AddedToken(t, special=ty == _CONTROL, normalized=False))
        self._control = {i for i, ty in enumerate(types) if ty == _CONTROL}
        # one tokenizer: control tokens are its special tokens, matched in the
        # text only while encode_special_tokens is False (parse_special; the
        # flag is the tokenizer's, so set and used under a lock). A second
        # copy would cost as much again as the first (~50-110 MiB for a
        # 151936-token vocabulary).
        tok.add_special_tokens([a for a in added if a.special])
        tok.add_tokens([a for a in added if not a.special])
        tok.no_padding()
        tok.no_truncation()
        self._tok, self._lock = tok, threading.Lock()

        def tid(key):
            v = meta.get(key)
            return v if isinstance(v, int) and 0 <= v < len(tokens) else None
        self.bos_token_id = tid("tokenizer.ggml.bos_token_id")
        self.eos_token_id = tid("tokenizer.ggml.eos_token_id")
        default_bos = model == "llama"
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", default_bos))
        self.add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
        ends = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>", "<|end_of_text|>",
                "</s>", "<end_of_turn>", "<|eom_id|>"}
        self.eot_ids = sorted({i for i in self._control if tokens[i] in ends}
                              | {x for x in (self.eos_token_id, tid("tokenizer.ggml.eot_token_id"))
                                 if x is not None})
        # token(i)'s strings: the tokenizer's own vocabulary (not a second copy
        # of 151936 strings beside it), and the few it does not map back to
        # their id (a string the vocabulary repeats) kept here
        self._odd = {i: t for i, t in enumerate(tokens) if tok.id_to_token(i) != t}

    # -- the two models

    def _bpe(self, tk, meta, tokens, path):
        if self.pre not in GGUF_PRE_TOKENIZERS:
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.pre {self.pre!r} is not "
                             f"supported (supported: {', '.join(GGUF_PRE_TOKENIZERS)})")
        # the merges read one at a time from the metadata's compact array where
        # it has one, their halves the vocabulary's own strings where they are
        # tokens (a 151387-merge list costs ~26 MiB less while building)
        strings = getattr(meta, "strings", None)
        merges = strings("tokenizer.ggml.merges") if strings and "tokenizer.ggml.merges" in meta \
            else None
        if not isinstance(merges, GGUFStrings):
            merges = _field(meta, "tokenizer.ggml.merges", path)
        vocab = {t: i for i, t in reversed(list(enumerate(tokens)))}
        pairs = []
        for m in merges:
            a, sep, b = m.partition(" ") if isinstance(m, str) else ("", "", "")
            if not sep:
                raise ValueError(f"GGUF file {path}: tokenizer.ggml.merges entry {m!r} is not "
                                 "two tokens separated by a space")
            ia, ib = vocab.get(a), vocab.get(b)
            pairs.append((a if ia is None else tokens[ia], b if ib is None else tokens[ib]))
        try:
            bpe = tk.models.BPE(vocab, pairs, ignore_merges=self.pre == "llama-bpe")
        except Exception as e:              # tokenizers' own error (a merge of unknown tokens)
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.merges do not fit "
                             f"tokenizer.ggml.tokens: {e}") from None
        tok = tk.Tokenizer(bpe)
        regex = GGUF_PRE_TOKENIZERS[self.pre]
        if regex is None:
            tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        else:
            tok.pre_tokenizer = tk.pre_tokenizers.Sequence([
                tk.pre_tokenizers.Split(tk.Regex(regex), behavior="isolated", invert=False),
                tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if self.pre == "qwen2":
            tok.normalizer = tk.normalizers.NFC()
        tok.decoder = tk.decoders.ByteLevel()
        return tok

    def _spm(self, tk, meta, tokens, types, path):
        scores = _field(meta, "tokenizer.ggml.scores", path)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.scores must hold numbers")
        if len(scores) != len(tokens):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.scores has {len(scores)} "
                             f"entries for {len(tokens)} tokens")
        vocab = {}
        for i, t in enumerate(tokens):
            vocab.setdefault(t, i)
        # merges as sentencepiece's BPE applies them: a pair whose merged piece
        # is in the vocabulary, by that piece's score (higher first), then id
        normal = {t: i for t, i in vocab.items() if types[i] in (_NORMAL, _USER, _UNUSED)}
        merges = []
        for piece, i in normal.items():
            for k in range(1, len(piece)):
                a, b = piece[:k], piece[k:]
                if a in normal and b in normal:
                    merges.append((-float(scores[i]), i, normal[a], normal[b], a, b))
        merges.sort()
        unk = meta.get("tokenizer.ggml.unknown_token_id", 0)
        unk_tok = tokens[unk] if isinstance(unk, int) and 0 <= unk < len(tokens) else None
        try:
            bpe = tk.models.BPE(vocab, [(m[4], m[5]) for m in merges], unk_token=unk_tok,
                                fuse_unk=True, byte_fallback=True)
        except Exception as e:
            raise ValueError(f"GGUF file {path}: the tokenizer of tokenizer.ggml.tokens / "
                             f"scores does not build: {e}") from None
        tok = tk.Tokenizer(bpe)
        prefix = meta.get("tokenizer.ggml.add_space_prefix", True)
        steps = ([tk.normalizers.Prepend("\u2581")] if prefix else []) + [
            tk.normalizers.Replace(" ", "\u2581")]
        tok.normalizer = tk.normalizers.Sequence(steps)
        dec = [tk.decoders.Replace("\u2581", " "), tk.decoders.ByteFallback(), tk.decoders.Fuse()]
        if prefix:
            dec.append(tk.decoders.Strip(" ", 1, 0))
        tok.decoder = tk.decoders.Sequence(dec)
        return tok

    # -- use

    def encode(self, text, add_special=True, parse_special=False):
        """text -> token ids; add_special: BOS / EOS as the file says;
        parse_special: control tokens written in the text (e.g.
        "<|im_start|>") become their ids (a chat prompt's), else plain text."""
        if not isinstance(text, str):
            raise TypeError(f"GGUFTokenizer.encode: expected a str, got {type(text).__name__}")
        ids = []
        if text:
            with self._lock:
                self._tok.encode_special_tokens = not parse_special
                ids = list(self._tok.encode(text, add_special_tokens=False).ids)
        if add_special and self.add_bos and self.bos_token_id is not None:
            ids = [self.bos_token_id] + ids
        if add_special and self.add_eos and self.eos_token_id is not None:
            ids = ids + [self.eos_token_id]
        return ids

    def decode(self, ids, skip_special=True):
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"GGUFTokenizer.decode: ids must lie in [0, {self.vocab_size}), "
                             f"got {bad[0]}")
        if skip_special:
            ids = [i for i in ids if i not in self._control]
        return self._tok.decode(ids, skip_special_tokens=False)

    def token(self, i):
        """The token string of id i (an int in [0, vocab_size))."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) \
                or not 0 <= i < self.vocab_size:
            raise IndexError(f"GGUFTokenizer.token: i must be an int in [0, {self.vocab_size}), "
                             f"got {i!r}")
        i = int(i)
        return self._odd[i] if i in self._odd else self._tok.id_to_token(i)

    def token_id(self, token):
        """The id of a token string (e.g. "<|im_end|>"), or None."""
        return self._tok.token_to_id(token)
