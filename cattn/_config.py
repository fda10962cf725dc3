"""show_config(): how this cattn was built and what it will run."""
import sys

import numpy as np

from . import _ext
from ._threads import get_num_threads


def config():
    from . import __version__
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "compiler": _ext.compiler(),
        "openmp": _ext.openmp_version() or "not available (single-threaded build)",
        "cpu_avx2_fma": _ext.cpu_has_avx2_fma(),
        "kernel_path": _ext.kernel_path(),
        "block_sizes": _ext.block_sizes(),
        "threads": get_num_threads(),
    }


def show_config(file=None):
    """Print version, compiler, OpenMP, selected kernel path, block sizes, threads."""
    file = file or sys.stdout
    for k, v in config().items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in v.items())
        print(f"{k:>14}: {v}", file=file)
