"""tools/llama_cpp_tokens.py — llama.cpp's token ids for
tests/models/test_gguf_tokenizer.py (tests/models/data/llama_cpp_tokens.json).

What this file is: the generator of the test's oracle data, run by hand
where llama-cpp-python is installed (it builds llama.cpp: minutes, so CI
reads the JSON this writes and never runs llama.cpp):

    pip install llama-cpp-python==0.3.36 && bash tools/fetch_ggml_vocab.sh
    python tools/llama_cpp_tokens.py            # writes the JSON

For each of llama.cpp's vocabularies (models/ggml-vocab-*.gguf, as
fetch_ggml_vocab.sh lays them out) it records llama.cpp's
`tokenize(text, add_bos=True, special=False)` of every .inp case and of
every line of tests/models/data/multilingual.txt, and `add_bos=False` of
the multilingual lines. For every `tokenizer.ggml.pre` name of cattn's
table it records the same for the gpt-2 vocabulary with that name written
into a copy of the file (so every row is checked against llama.cpp on one
byte-level vocabulary; names with the same ids share one entry). What
it is not: a test; it does not import cattn's tokenizer.
"""
import json
import os
import sys
import tempfile

import gguf
import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
from gguf_vocab_cases import VOCAB, NAMES, inp_cases, multilingual  # noqa: E402

OUT = os.path.join(ROOT, "tests", "models", "data", "llama_cpp_tokens.json")


def copy_with(src, dst, **changes):
    """A copy of GGUF file `src` at `dst` with some metadata values changed."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = changes.get(name, f.contents())
        vtype = f.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, value, vtype, sub_type=f.types[-1])
        else:
            w.add_key_value(name, value, vtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def ids(path, texts, add_special):
    llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    out = [llm.tokenize(t.encode("utf-8"), add_bos=add_special, special=False) for t in texts]
    del llm
    return out


def main():
    from cattn.models.gguf_pretokenizers import GGUF_PRE_TOKENIZERS
    lines = multilingual()
    data = {"llama_cpp_python": llama_cpp.__version__, "vocab": {}, "pre": {}}
    for name in NAMES:
        path = os.path.join(VOCAB, f"ggml-vocab-{name}.gguf")
        texts = [t for t, _ in inp_cases(name)]
        data["vocab"][name] = {"inp_special": ids(path, texts, True),
                               "multilingual": ids(path, lines, False),
                               "multilingual_special": ids(path, lines, True)}
    with tempfile.TemporaryDirectory() as tmp:
        for pre, row in sorted(GGUF_PRE_TOKENIZERS.items()):
            if not row.byte_level:
                continue
            path = os.path.join(tmp, f"{pre}.gguf")
            copy_with(os.path.join(VOCAB, "ggml-vocab-gpt-2.gguf"), path,
                      **{"tokenizer.ggml.pre": pre})
            data["pre"][pre] = {"multilingual": ids(path, lines, False),
                                "special": ids(path, ["Hello world"], True)[0]}
    # names whose ids are all alike share one entry of "pre_ids"
    keys = {}
    for pre, d in sorted(data["pre"].items()):
        data["pre"][pre] = keys.setdefault(json.dumps(d), str(len(keys)))
    data["pre_ids"] = {k: json.loads(d) for d, k in keys.items()}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    print(f"{OUT}: {len(data['vocab'])} vocabularies, {len(data['pre'])} pre-tokenizers")


if __name__ == "__main__":
    main()
