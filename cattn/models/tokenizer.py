"""cattn.models.tokenizer — text <-> token ids for the LLMs, a thin wrapper
around the optional `tokenizers` package (imported only when text is used;
token ids work without it).

What this file is: encode / decode / incremental decoding for streaming.
What it is not: a tokenizer implementation (that is `tokenizers`' Rust code
reading the checkpoint's tokenizer.json).
"""
import os

__all__ = ["TextTokenizer", "TOKENIZERS_HINT"]

TOKENIZERS_HINT = ("text in or out needs the 'tokenizers' package: pip install tokenizers "
                   "(or pip install 'cattn[models]'); token ids work without it")


class TextTokenizer:
    """tokenizer.json of a checkpoint folder: encode(text) -> ids (with the
    tokenizer's special tokens, e.g. Llama's BOS, as Hugging Face's
    tokenizer(text) adds them), decode(ids) -> text (special tokens dropped)."""

    def __init__(self, path):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no tokenizer: {path} does not exist; pass token ids "
                                    "instead of text")
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ImportError(TOKENIZERS_HINT) from None
        self.path = path
        self._tok = Tokenizer.from_file(path)
        self._tok.no_padding()
        self._tok.no_truncation()

    def encode(self, text, add_special=True, parse_special=True):
        """text -> ids; add_special: the tokenizer's BOS etc. (as Hugging
        Face's tokenizer(text)); special tokens written in the text are
        always matched (tokenizers' added tokens; parse_special is GGUFTokenizer's)."""
        if not isinstance(text, str):
            raise TypeError(f"TextTokenizer.encode: expected a str, got {type(text).__name__}")
        return list(self._tok.encode(text, add_special_tokens=bool(add_special)).ids)

    def decode(self, ids):
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def token_id(self, token):
        """The id of a token string (e.g. "<|endoftext|>"), or None."""
        return self._tok.token_to_id(token)


class StreamDecoder:
    """Text pieces of a growing token sequence: push(id) -> the new text (''
    while a multi-byte character is incomplete), as transformers'
    TextStreamer prints it; flush() at the end. The pieces join to
    decode(ids)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.ids, self.text = tokenizer, [], ""

    def push(self, token):
        self.ids.append(int(token))
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):             # an incomplete UTF-8 sequence: wait
            return ""
        piece, self.text = text[len(self.text):], text
        return piece

    def flush(self):
        """The text held back at the end (an incomplete character, as
        decode() renders it), or ''."""
        text = self.tokenizer.decode(self.ids)
        piece, self.text = text[len(self.text):], text
        return piece
