"""cattn.models.gguf_pretokenizers — the table of llama.cpp's BPE
pre-tokenizers, one row per `tokenizer.ggml.pre` name.

What this file is: data. Each row says how llama.cpp (src/llama-vocab.cpp)
splits a text into words before the BPE merges of a `tokenizer.ggml.model`
"gpt2" (or "gemma4") vocabulary:
- `split`: the regular expressions, applied in order; each one splits every
  piece the previous ones left into its matches and the text between them
  (tokenizers' Split with behavior "isolated", as llama.cpp's
  unicode_regex_split). The expressions are llama.cpp's own where its
  regex engine reads them as written, and an equivalent expression where
  llama.cpp runs a hand-written splitter instead (kimi-k2, the digit groups
  of afmoe / tiny_aya, superbpe's zero-width split);
- `byte_level`: True for GPT-2's byte-to-character encoding of each word;
  False for a vocabulary of raw UTF-8 pieces with spaces written as U+2581
  and <0xXX> byte tokens for the rest (gemma4, sarvam-moe);
- `ignore_merges`: a word that is itself a token is that token, whatever
  the merges would make of it;
- `add_bos`: whether encode(add_special=True) puts BOS first when the file
  has no `tokenizer.ggml.add_bos_token` (llama.cpp's default for the name);
- `bos`: False where llama.cpp has no BOS token for the name unless the
  file names one (chatglm-bpe, glm4, glm5).
Adding a pre-tokenizer is one row here. What this file is not: the
tokenizer (gguf_tokenizer.py builds a `tokenizers.Tokenizer` from a row).
"""
from dataclasses import dataclass

__all__ = ["PreTokenizer", "GGUF_PRE_TOKENIZERS", "pre_tokenizer"]


@dataclass(frozen=True)
class PreTokenizer:
    split: tuple
    byte_level: bool = True
    ignore_merges: bool = False
    add_bos: bool = False
    bos: bool = True


# contractions as llama.cpp writes them (ASCII case only)
_S = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
# GPT-2's expression
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_TAIL = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_LLAMA3 = _S + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}" + _TAIL
_QWEN2 = _S + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}" + _TAIL
_QWEN35 = (_S + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_JAIS2 = (_S + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)"
          r"|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}")
# letters by case as llama.cpp's engine sees them: any letter that is not
# ASCII lower case / upper case (every non-ASCII letter is both)
_UP = r"((?=[\p{L}])([^a-z]))"
_LO = r"((?=[\p{L}])([^A-Z]))"
_GPT4O = (r"[^\r\n\p{L}\p{N}]?" + _UP + "*" + _LO + "+" + _S + r"?|[^\r\n\p{L}\p{N}]?" + _UP
          + "+" + _LO + "*" + _S + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_UPM = r"((?=[\p{L}\p{M}])([^a-z]))"
_LOM = r"((?=[\p{L}\p{M}])([^A-Z]))"
_GRANITE_EMB = (r"[^\r\n\p{L}\p{N}]?" + _UPM + "*" + _LOM + "+" + _S + r"?|[^\r\n\p{L}\p{N}]?"
                + _UPM + "+" + _LOM + "*" + _S
                + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_TEKKEN = (r"[^\r\n\p{L}\p{N}]?" + _UP + "*" + _LO + r"+|[^\r\n\p{L}\p{N}]?" + _UP + "+" + _LO
           + r"*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# llama.cpp reads \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} as \p{L} (any letter)
_LM = r"[\p{L}\p{M}]"
_CASED_TAIL = r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def _cased(number):
    """Letters (any case, as llama.cpp reads them) with an optional contraction,
    `number`, then the usual punctuation and whitespace alternatives."""
    word = r"[^\r\n\p{L}\p{N}]?" + _LM + "*" + _LM + "+" + _S + "?"
    return word + "|" + word.replace("*" + _LM + "+", "+" + _LM + "*", 1) + "|" + number + _CASED_TAIL


_CASED = _cased(r"\p{N}{1,3}")
_YOUTU = _cased(r"\p{N}")
# llama.cpp's splitter for kimi-k2: Han runs, then words of non-Han letters of any case
_KIMI_K2 = (r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{L}&&[^\p{Han}]]+" + _S
            + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# a run of numbers in groups of three from the right (1234567 -> 1 234 567)
_DIGITS3 = r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))"
_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_HAN_KANA = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
_DS3 = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_DEEPSEEK_LLM_LETTERS = (
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
    "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
    "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
    "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59"
    "\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
    "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e"
    "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
    "\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
    "\U000118a0-\U000118df\U0001e900-\U0001e943]+")
_NEWLINES = r"[^\n]+|[\n]+"
_FINNISH = r" ?[^(\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"

P = PreTokenizer
_ROW_LLAMA3 = P((_LLAMA3,), ignore_merges=True, add_bos=True)
_ROW_DBRX = P((_LLAMA3,))
# (llama.cpp matches these expressions with every non-ASCII space written as
# \x0b: U+3000, in its class of punctuation, never matches there)
_ROW_DEEPSEEK_LLM = P(("[\r\n]", _DEEPSEEK_LLM_LETTERS,
                       "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3001-\u3002]+",
                       r"\s+$", _CJK, r"\p{N}+"))
_ROW_DEEPSEEK3 = P((r"\p{N}{1,3}", _HAN_KANA, _DS3))
_ROW_STARCODER = P((r"\p{N}", _GPT2))
_ROW_GPT2 = P((_GPT2,))
_ROW_QWEN2 = P((_QWEN2,))
_ROW_FINNISH = P((_FINNISH,))
_ROW_GPT4O = P((_GPT4O,))
_ROW_TINY_AYA = P((_DIGITS3, _CASED))
_ROW_BAILINGMOE = P((r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+"
                     r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",))
_ROW_GEMMA4 = P((_NEWLINES,), byte_level=False)
_ROW_CHATGLM = P((_LLAMA3,), bos=False)

# tokenizer.ggml.pre -> its row (names that llama.cpp treats alike share one)
GGUF_PRE_TOKENIZERS = {
    "default": P((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]")),
    # Llama 3 and the files converted with its pre-tokenizer
    "llama3": _ROW_LLAMA3, "llama-v3": _ROW_LLAMA3, "llama-bpe": _ROW_LLAMA3,
    "falcon3": _ROW_LLAMA3, "falcon-h1": _ROW_LLAMA3, "pixtral": _ROW_LLAMA3,
    "midm-2.0": _ROW_LLAMA3, "lfm2": _ROW_LLAMA3, "jina-v5-nano": _ROW_LLAMA3,
    "jais-2": P((_JAIS2,)),
    "dbrx": _ROW_DBRX, "smaug-bpe": _ROW_DBRX,
    "deepseek-llm": _ROW_DEEPSEEK_LLM,
    "deepseek-v3": _ROW_DEEPSEEK3, "hunyuan-dense": _ROW_DEEPSEEK3,
    "joyai-llm": _ROW_DEEPSEEK3, "hy_v4": _ROW_DEEPSEEK3,
    "spark2_5": P((r"\p{N}{1,3}", _HAN_KANA,
                   r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
                   r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+",
                   r"\p{N}")),
    "youtu": P(("[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014"
                "\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|" + _HAN_KANA,
                _YOUTU), ignore_merges=True),
    "deepseek-coder": P(("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}")),
    "falcon": P((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
    # GPT-2's expression with each number split into its digits
    "starcoder": _ROW_STARCODER, "refact": _ROW_STARCODER, "command-r": _ROW_STARCODER,
    "smollm": _ROW_STARCODER, "codeshell": _ROW_STARCODER, "exaone": _ROW_STARCODER,
    "minerva-7b": _ROW_STARCODER, "mellum2": _ROW_STARCODER,
    # GPT-2's expression
    "gpt-2": _ROW_GPT2, "phi-2": _ROW_GPT2, "jina-es": _ROW_GPT2, "jina-de": _ROW_GPT2,
    "gigachat": _ROW_GPT2, "jina-v2-es": _ROW_GPT2, "jina-v2-de": _ROW_GPT2,
    "a.x-4.0": _ROW_GPT2, "mellum": _ROW_GPT2, "modern-bert": _ROW_GPT2, "mpt": _ROW_GPT2,
    "olmo": _ROW_GPT2, "jais": _ROW_GPT2, "trillion": _ROW_GPT2, "granite-docling": _ROW_GPT2,
    "exaone4": _ROW_GPT2, "jina-v1-en": _ROW_GPT2, "jina-v2-code": _ROW_GPT2,
    "roberta-bpe": _ROW_GPT2,
    # Qwen2's: Llama 3's with single digits
    "qwen2": _ROW_QWEN2, "deepseek-r1-qwen": _ROW_QWEN2, "kormo": _ROW_QWEN2,
    "f2llmv2": _ROW_QWEN2, "stablelm2": _ROW_QWEN2, "hunyuan": _ROW_QWEN2,
    "solar-open": _ROW_QWEN2, "megrez": _ROW_QWEN2,
    "qwen35": P((_QWEN35,)),
    "poro-chat": _ROW_FINNISH, "bloom": _ROW_FINNISH, "gpt3-finnish": _ROW_FINNISH,
    "chatglm-bpe": _ROW_CHATGLM,
    "glm4": P((_LLAMA3,), ignore_merges=True, bos=False),
    "glm5": P((_LLAMA3,), ignore_merges=True, bos=False),
    "viking": P((_FINNISH, r"\p{N}")),
    "tekken": P((_TEKKEN,), ignore_merges=True, add_bos=True),
    "chameleon": P(("<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                    "([\\t\\n]|    |  )", r"\p{N}", r"[\p{P}!-/:-@\[-`{-~]", _GPT2),
                   add_bos=True),
    "gpt-4o": _ROW_GPT4O, "llama4": _ROW_GPT4O, "kanana2": _ROW_GPT4O,
    "talkie": _ROW_GPT4O, "minimax-m2": _ROW_GPT4O,
    "granite-embed-multi-97m": P((_GRANITE_EMB,), ignore_merges=True),
    "tiny_aya": _ROW_TINY_AYA, "cohere2moe": _ROW_TINY_AYA,
    "kimi-k2": P((_KIMI_K2,)),
    "superbpe": P((r"\p{N}+", "[0-9]{1,3}(?=(?:[0-9]{3})*(?![0-9]))")),
    "bailingmoe": _ROW_BAILINGMOE, "bailingmoe2": _ROW_BAILINGMOE, "llada-moe": _ROW_BAILINGMOE,
    "seed-coder": P((_S + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+",)),
    "ufakzeka": P((_QWEN2[len(_S) + 1:],)),
    "grok-2": P((_QWEN2,)),
    "afmoe": P((_DIGITS3,
                "[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f"
                "\u2f00-\u2fdf\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f"
                "\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+", _DS3)),
    "laguna": P((_NEWLINES, _QWEN2)),
    "exaone-moe": P((_S + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
                     r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",)),
    "minicpm5": P((r"\p{N}{1,3}", _S + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+" + _TAIL),
                  ignore_merges=True),
    # SentencePiece-style vocabularies of raw UTF-8 pieces, split at newlines only
    "gemma4": _ROW_GEMMA4, "granite-embed-multi-311m": _ROW_GEMMA4, "sarvam-moe": _ROW_GEMMA4,
}
del P


def pre_tokenizer(name, path):
    """The row of tokenizer.ggml.pre `name` (None: the file has no
    tokenizer.ggml.pre, read as "default" as llama.cpp does)."""
    row = GGUF_PRE_TOKENIZERS.get("default" if name is None else name)
    if row is None:
        raise ValueError(f"GGUF file {path}: tokenizer.ggml.pre {name!r} is not supported "
                         f"(supported: {', '.join(sorted(GGUF_PRE_TOKENIZERS))})")
    return row
