"""The row-kernel tests (vexp, softmax, norms, activations) once more, on the
portable C kernels: one subprocess with CATTN_FORCE_PORTABLE=1 runs the four
modules (the kernel table is chosen once per process)."""
import os

import pytest

from _rowtools import HERE, run_portable

MODULES = ["test_vexp.py", "test_softmax.py", "test_norm.py", "test_activations.py"]


@pytest.mark.skipif(os.environ.get("CATTN_FORCE_PORTABLE") == "1",
                    reason="already running on the portable path")
def test_row_kernels_on_portable_path():
    out = run_portable([os.path.join(HERE, m) for m in MODULES])
    assert " passed" in out
