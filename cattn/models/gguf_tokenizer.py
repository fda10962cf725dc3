"""cattn.models.gguf_tokenizer — the tokenizer stored in a GGUF file
(`tokenizer.ggml.*` metadata), built on the optional `tokenizers` package.

What this file is: the map from llama.cpp's tokenizer metadata to a
`tokenizers.Tokenizer`, and encode / decode over it, as llama.cpp's
src/llama-vocab.cpp applies them. `tokenizer.ggml.model`:
- "gpt2": byte-level BPE (the file's tokens and merges) after the
  pre-tokenizer `tokenizer.ggml.pre` names (a row of
  gguf_pretokenizers.GGUF_PRE_TOKENIZERS: its split expressions, whether
  whole-vocabulary words skip the merges, its BOS default);
- "gemma4": BPE over raw UTF-8 pieces (spaces written as U+2581, <0xXX>
  byte tokens for the rest), split at newlines only;
- "llama": SentencePiece-style BPE (Llama 2, TinyLlama, Mistral, Phi-3,
  Gemma 1-3): spaces become U+2581 with one in front, pieces merge by the
  merged token's score (tokenizer.ggml.scores), unknown characters fall
  back to the <0xXX> byte tokens;
- "bert": WordPiece (BERT, BGE, nomic and other embedding files): the text
  lower-cased and its accents stripped as tokenizer.ggml.normalizer.*
  say (both by default), split at whitespace, punctuation and CJK
  characters, each word matched longest piece first; add_special puts
  CLS first and SEP last.
Special ids, add_bos / add_eos and their defaults when the file is silent
follow llama.cpp per model and pre-tokenizer. Control tokens (token_type
3) and unknown ones (2) are matched in the text only when it is encoded
with parse_special=True, user-defined ones (4) always (llama.cpp's rule).
What it is not: a tokenizer implementation (tokenizers' Rust code is),
the pre-tokenizer table (gguf_pretokenizers.py), or the GGUF parser
(gguf.py).
"""
import threading
import unicodedata

import numpy as np

from .gguf_metadata import GGUFStrings
from .gguf_pretokenizers import GGUF_PRE_TOKENIZERS, pre_tokenizer
from .heap import trim_heap
from .tokenizer import TOKENIZERS_HINT

__all__ = ["GGUFTokenizer", "GGUF_PRE_TOKENIZERS", "GGUF_TOKENIZER_MODELS"]

_NORMAL, _UNKNOWN, _CONTROL, _USER, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_SPACE = "\u2581"

# tokenizer.ggml.model -> llama.cpp's defaults when the file is silent: the
# special ids (BOS, EOS, UNK, SEP) and whether add_special puts BOS first
# (for "gpt2", the pre-tokenizer's row decides)
GGUF_TOKENIZER_MODELS = {
    "gpt2": dict(bos=11, eos=11, unk=None, sep=None, add_bos=None),
    "gemma4": dict(bos=None, eos=None, unk=None, sep=None, add_bos=True),
    "llama": dict(bos=1, eos=2, unk=0, sep=None, add_bos=True),
    "bert": dict(bos=101, eos=None, unk=100, sep=102, add_bos=True),
}
# tokens llama.cpp takes as ends of generation by their text, and as control
# tokens whatever their type
_EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~["})
# ...and tokens it always matches in the text (gpt-oss)
_USER_TEXTS = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})


def _special(vocab, types):
    """llama.cpp's token attributes by id (vocab: each token string -> its
    first id): (control, user, eog) sets: control and unknown tokens
    (matched in the text with parse_special only; the ends of generation
    named by text are control tokens whatever their type), user-defined
    ones (always matched), the ends of generation."""
    kinds = {i: ty for i, ty in enumerate(types) if ty != _NORMAL}
    texts = {t: vocab[t] for t in _EOG_TEXTS if t in vocab}
    eog = set(texts.values())
    control = {i for i, ty in kinds.items() if ty in (_CONTROL, _UNKNOWN)} | eog
    user = {i for i, ty in kinds.items() if ty == _USER} - control
    normal = set()
    if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
        normal.add(texts["</s>"])           # a normal token in gemma4 / plamo files
    elif "<|end|>" in texts and ({"<|return|>", "<|call|>"} <= texts.keys()
                                 or {"<|calls|>", "<|flush|>"} <= texts.keys()):
        user.add(texts["<|end|>"])          # o200k_harmony, solar-open: user-defined
    user |= {vocab[t] for t in _USER_TEXTS if t in vocab}
    return control - user - normal, user - normal, eog - user - normal


class _FirstOfNFD(dict):
    """str.translate's table of llama.cpp's WordPiece "NFD": each character
    becomes the first character of its canonical decomposition (e -> e for
    an accented e, a Hangul syllable -> its leading consonant), computed on
    first sight and kept."""

    def __missing__(self, cp):
        c = unicodedata.normalize("NFD", chr(cp))[0]
        self[cp] = c
        return c


_FIRST_OF_NFD = _FirstOfNFD()


def _field(meta, key, path, kind=list):
    v = meta.get(key)
    if not isinstance(v, kind):
        raise ValueError(f"GGUF file {path}: tokenizer metadata {key!r} is "
                         f"{'missing' if v is None else type(v).__name__}; expected {kind.__name__}")
    return v


def _flag(meta, key, default, path):
    v = meta.get(key, default)
    if not isinstance(v, (bool, np.bool_)) and v not in (0, 1):
        raise ValueError(f"GGUF file {path}: tokenizer metadata {key!r} is {v!r}; expected a bool")
    return bool(v)


class GGUFTokenizer:
    """The tokenizer of a GGUF file's metadata: encode(text, add_special=True,
    parse_special=False) -> token ids (BOS / EOS as the file's
    add_bos_token / add_eos_token say, or llama.cpp's default for its model
    and pre-tokenizer; CLS / SEP for "bert"), decode(ids, skip_special=True)
    -> text. Attributes: model ("gpt2", "gemma4", "llama" or "bert"), pre,
    bos_token_id, eos_token_id, sep_token_id, add_bos, add_eos, vocab_size,
    and eot_ids (the ids that end a turn: EOS, EOT and the control tokens
    named like <|im_end|>, <|eot_id|>, <|end|>)."""

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
        if model not in GGUF_TOKENIZER_MODELS:
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.model {model!r} is not supported "
                             f"(supported: {', '.join(map(repr, GGUF_TOKENIZER_MODELS))})")
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
        pre = meta.get("tokenizer.ggml.pre")
        if pre is not None and not isinstance(pre, str):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.pre is {type(pre).__name__}; "
                             "expected a string")
        defaults = GGUF_TOKENIZER_MODELS[model]
        add_bos = defaults["add_bos"]
        bos_default = defaults["bos"]
        self.pre = pre if pre is not None else "default"
        vocab = {t: i for i, t in reversed(list(enumerate(tokens)))}      # a string's first id
        control, user, eog = _special(vocab, types)
        if model in ("gpt2", "gemma4"):
            if model == "gemma4":
                self.pre = "gemma4"             # llama.cpp's rule: the model names its pre-tokenizer
            row = pre_tokenizer(self.pre, path)
            add_bos = row.add_bos if add_bos is None else add_bos
            bos_default = bos_default if row.bos else None
            tok = self._bpe(tokenizers, meta, tokens, vocab, row, path)
        elif model == "llama":
            tok = self._spm(tokenizers, meta, tokens, vocab, types, control, path)
        else:
            tok = self._wpm(tokenizers, meta, tokens, types, path, defaults["unk"])
        del vocab                           # (its strings are the tokens'; the dict goes)
        added = [tokenizers.AddedToken(tokens[i], special=i in control, normalized=False)
                 for i in sorted(control | user)]
        self._control = control
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

        def tid(key, default=None):
            v = meta.get(key)
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool) \
                    and 0 <= v < len(tokens):
                return int(v)
            return default if default is not None and 0 <= default < len(tokens) else None
        self.bos_token_id = tid("tokenizer.ggml.bos_token_id", bos_default)
        self.eos_token_id = tid("tokenizer.ggml.eos_token_id", defaults["eos"])
        self.sep_token_id = tid("tokenizer.ggml.seperator_token_id", defaults["sep"])
        self.add_bos = _flag(meta, "tokenizer.ggml.add_bos_token", add_bos, path)
        self.add_eos = _flag(meta, "tokenizer.ggml.add_eos_token", False, path)
        if self.pre == "gemma4":
            self.add_bos = True                 # llama.cpp adds BOS to every Gemma 4 text
        self.eot_ids = sorted(eog | {x for x in (self.eos_token_id,
                                                 tid("tokenizer.ggml.eot_token_id"),
                                                 tid("tokenizer.ggml.eom_token_id"))
                                     if x is not None})
        # token(i)'s strings: the tokenizer's own vocabulary (not a second copy
        # of 151936 strings beside it), and the few it does not map back to
        # their id (a string the vocabulary repeats; WordPiece's renamed
        # pieces) kept here
        self._odd = {i: t for i, t in enumerate(tokens) if tok.id_to_token(i) != t}

    # -- the models

    def _merges(self, meta, tokens, vocab, path, required=True):
        """The merge pairs, each half the vocabulary's own string where it is a
        token (read one at a time from the metadata's compact array where it
        has one: a 151387-merge list costs ~26 MiB less while building)."""
        key = "tokenizer.ggml.merges"
        if key not in meta and not required:
            return []
        strings = getattr(meta, "strings", None)
        merges = strings(key) if strings and key in meta else None
        if not isinstance(merges, GGUFStrings):
            merges = _field(meta, key, path)
        pairs, get = [], vocab.get
        for m in merges:
            a, sep, b = m.partition(" ") if type(m) is str else ("", "", "")
            if not a and sep:       # llama.cpp splits at the first space after the first character
                a, sep, b = m[1:].partition(" ")
                a = " " + a
            if not sep:
                raise ValueError(f"GGUF file {path}: {key} entry {m!r} is not two tokens "
                                 "separated by a space")
            ia, ib = get(a), get(b)
            pairs.append((a if ia is None else tokens[ia], b if ib is None else tokens[ib]))
        return pairs

    def _bpe(self, tk, meta, tokens, vocab, row, path):
        pairs = self._merges(meta, tokens, vocab, path, required=self.pre != "kimi-k2")
        try:
            bpe = tk.models.BPE(vocab, pairs, ignore_merges=row.ignore_merges,
                                byte_fallback=not row.byte_level)
        except Exception as e:              # tokenizers' own error (a merge of unknown tokens)
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.merges do not fit "
                             f"tokenizer.ggml.tokens: {e}") from None
        tok = tk.Tokenizer(bpe)
        steps = [tk.pre_tokenizers.Split(tk.Regex(r), behavior="isolated", invert=False)
                 for r in row.split]
        if row.byte_level:
            steps.append(tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
            tok.decoder = tk.decoders.ByteLevel()
        else:
            tok.normalizer = tk.normalizers.Replace(" ", _SPACE)
            tok.decoder = tk.decoders.Sequence([tk.decoders.Replace(_SPACE, " "),
                                                tk.decoders.ByteFallback(), tk.decoders.Fuse()])
        tok.pre_tokenizer = steps[0] if len(steps) == 1 else tk.pre_tokenizers.Sequence(steps)
        return tok

    def _spm(self, tk, meta, tokens, vocab, types, control, path):
        scores = _field(meta, "tokenizer.ggml.scores", path)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.scores must hold numbers")
        if len(scores) != len(tokens):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.scores has {len(scores)} "
                             f"entries for {len(tokens)} tokens")
        # merges as sentencepiece's BPE applies them: a pair whose merged piece
        # is in the vocabulary, by that piece's score (higher first), then id
        normal = {t: i for t, i in vocab.items()
                  if types[i] in (_NORMAL, _USER, _UNUSED) and i not in control}
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
        prefix = _flag(meta, "tokenizer.ggml.add_space_prefix", True, path)
        steps = ([tk.normalizers.Prepend(_SPACE)] if prefix else []) + [
            tk.normalizers.Replace(" ", _SPACE)]
        tok.normalizer = tk.normalizers.Sequence(steps)
        dec = [tk.decoders.Replace(_SPACE, " "), tk.decoders.ByteFallback(), tk.decoders.Fuse()]
        if prefix:
            dec.append(tk.decoders.Strip(" ", 1, 0))
        tok.decoder = tk.decoders.Sequence(dec)
        return tok

    def _wpm(self, tk, meta, tokens, types, path, unk_default):
        # the file writes a word's first piece with U+2581 in front and the
        # pieces that continue a word bare; WordPiece writes them bare and
        # with "##" in front. Control / unknown / user tokens keep their text.
        vocab = {}
        for i, (t, ty) in enumerate(zip(tokens, types)):
            if ty in (_NORMAL, _UNUSED, _BYTE):
                t = t[1:] if t.startswith(_SPACE) and len(t) > 1 else "##" + t
            vocab.setdefault(t, i)
        unk = meta.get("tokenizer.ggml.unknown_token_id", unk_default)
        if not isinstance(unk, int) or not 0 <= unk < len(tokens):
            raise ValueError(f"GGUF file {path}: tokenizer.ggml.unknown_token_id is {unk!r}; "
                             f"a WordPiece vocabulary needs one in [0, {len(tokens)})")
        unk_tok = next(t for t, i in vocab.items() if i == unk)
        tok = tk.Tokenizer(tk.models.WordPiece(vocab, unk_token=unk_tok,
                                               max_input_chars_per_word=1 << 30))
        lower = _flag(meta, "tokenizer.ggml.normalizer.lowercase", True, path)
        self._strip_accents = _flag(meta, "tokenizer.ggml.normalizer.strip_accents", lower, path)
        # llama.cpp's order: (the first character of each NFD, in encode), drop
        # control characters, CJK characters as words, lower case, drop marks
        # (llama.cpp's whitespace the BertNormalizer would drop as control characters
        # separates words)
        steps = [tk.normalizers.Replace(tk.Regex("[\x0b\x0c\x85\u2028\u2029]"), " "),
                 tk.normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                               strip_accents=False, lowercase=False)]
        steps += [tk.normalizers.Lowercase()] if lower else []
        steps += [tk.normalizers.Replace(tk.Regex(r"\p{M}"), "")] if self._strip_accents else []
        tok.normalizer = tk.normalizers.Sequence(steps)
        tok.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
        tok.decoder = tk.decoders.WordPiece(prefix="##", cleanup=False)
        return tok

    # -- use

    def encode(self, text, add_special=True, parse_special=False):
        """text -> token ids; add_special: BOS / EOS as the file says (CLS and
        SEP for a WordPiece vocabulary); parse_special: control tokens
        written in the text (e.g. "<|im_start|>") become their ids (a chat
        prompt's), else plain text."""
        if not isinstance(text, str):
            raise TypeError(f"GGUFTokenizer.encode: expected a str, got {type(text).__name__}")
        ids = []
        if self.model == "bert" and self._strip_accents:
            text = text.translate(_FIRST_OF_NFD)
        if text:
            with self._lock:
                self._tok.encode_special_tokens = not parse_special
                ids = list(self._tok.encode(text, add_special_tokens=False).ids)
        if not add_special:
            return ids
        if self.model == "bert":            # llama.cpp: CLS and SEP whatever the flags say
            return [x for x in (self.bos_token_id,) if x is not None] + ids + \
                [x for x in (self.sep_token_id,) if x is not None]
        if self.add_bos and self.bos_token_id is not None:
            ids = [self.bos_token_id] + ids
        if self.add_eos and self.eos_token_id is not None:
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
