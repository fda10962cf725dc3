"""The property tests once more on the portable C kernels: one subprocess with
CATTN_FORCE_PORTABLE=1 (the kernel table is chosen once per process) runs
the property modules with the same hypothesis profile.

Skipped when this process already runs on the portable path, and for
HYPOTHESIS_PROFILE=long (long runs are started once per kernel path:
`CATTN_FORCE_PORTABLE=1 HYPOTHESIS_PROFILE=long pytest tests/test_properties_*.py`).
"""
import os

import pytest

pytest.importorskip("hypothesis", reason="the property tests need hypothesis")

from _rowtools import HERE, path, run_portable  # noqa: E402

MODULES = ["test_properties_gemm.py", "test_properties_rows.py",
           "test_properties_attention.py", "test_properties_api.py"]


@pytest.mark.skipif(os.environ.get("CATTN_FORCE_PORTABLE") == "1",
                    reason="already running on the portable path")
@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE") == "long",
                    reason="long profile: run each kernel path explicitly")
def test_properties_on_portable_path():
    if path() == "portable":
        pytest.skip("this machine has only the portable kernels")
    out = run_portable([os.path.join(HERE, m) for m in MODULES])
    assert " passed" in out
