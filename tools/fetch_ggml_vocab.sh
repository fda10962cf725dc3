#!/usr/bin/env bash
# tools/fetch_ggml_vocab.sh [DIR] — llama.cpp's tokenizer test vectors for
# tests/models/test_gguf_tokenizer.py: the vocabulary-only GGUF files and their
# .inp / .out cases (models/ggml-vocab-*.gguf*), taken from the
# llama-cpp-python sdist on PyPI (it vendors llama.cpp; MIT). DIR defaults to
# $CATTN_GGML_VOCAB or ~/.cache/cattn-test/ggml-vocab (where the tests look).
set -euo pipefail
DIR="${1:-${CATTN_GGML_VOCAB:-$HOME/.cache/cattn-test/ggml-vocab}}"
VERSION=0.3.36
NAMES="bert-bge command-r deepseek-coder deepseek-llm falcon gemma-4 gpt-2 llama-bpe llama-spm
       mpt phi-3 qwen2 qwen35 refact starcoder"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# the sdist only: its build dependencies (cmake, scikit-build-core) come as wheels
# for pip to read its metadata (":all:" would build cmake from source)
python3 -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$TMP"
want=()
for n in $NAMES; do
    for ext in "" .inp .out; do
        want+=("llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-$n.gguf$ext")
    done
done
tar -xzf "$TMP/llama_cpp_python-$VERSION.tar.gz" -C "$TMP" "${want[@]}"
mkdir -p "$DIR"
cp "$TMP/llama_cpp_python-$VERSION/vendor/llama.cpp/models/"ggml-vocab-* "$DIR/"
echo "ggml-vocab test vectors in $DIR: $(ls "$DIR" | wc -l) files"
