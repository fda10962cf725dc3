"""llama.cpp's tokenizer test cases, read for the tests and for
tools/llama_cpp_tokens.py: its vocabulary-only GGUF files with input texts
(.inp, cases separated by a line "__ggml_vocab_test__", as llama.cpp's
tests/test-tokenizer-0 reads them) and the token ids llama.cpp gives
(.out, one line per case), and the multilingual lines of
data/multilingual.txt (one case a line; \\n, \\r, \\t and \\uXXXX written as
escapes). tools/fetch_ggml_vocab.sh puts the vocabularies where this module
looks ($CATTN_GGML_VOCAB or ~/.cache/cattn-test/ggml-vocab).
"""
import os
import re

VOCAB = os.environ.get("CATTN_GGML_VOCAB", os.path.expanduser("~/.cache/cattn-test/ggml-vocab"))
NAMES = ["bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
         "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]
SEP = "\n__ggml_vocab_test__\n"
_HERE = os.path.dirname(os.path.abspath(__file__))


def vocab_path(name):
    return os.path.join(VOCAB, f"ggml-vocab-{name}.gguf")


def inp_cases(name):
    """[(text, llama.cpp's ids with add_special=False)] of one vocabulary."""
    path = vocab_path(name)
    with open(path + ".inp", encoding="utf-8") as f:
        texts = f.read().split(SEP)
    with open(path + ".out", encoding="utf-8") as f:
        lines = f.read().split("\n")
    if texts and texts[-1] == "":           # the file ends with a separator
        texts.pop()
    if lines and lines[-1] == "":
        lines.pop()
    if len(texts) != len(lines):
        raise ValueError(f"{path}: {len(texts)} cases in .inp, {len(lines)} in .out")
    return [(t, [int(v) for v in line.split()]) for t, line in zip(texts, lines)]


def multilingual():
    """The lines of data/multilingual.txt, escapes read."""
    esc = {"n": "\n", "r": "\r", "t": "\t"}
    with open(os.path.join(_HERE, "data", "multilingual.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    return [re.sub(r"\\(u[0-9a-fA-F]{4}|[nrt])",
                   lambda m: esc.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), s)
            for s in lines]
