"""show_config(): how this cattn was built and what it will run."""
import sys

import numpy as np

from . import _ext
from ._threads import get_num_threads


def _kib(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


def _caches(cpu):
    """'L1d 32 KiB 8-way, L2 512 KiB 8-way, L3 32 MiB 16-way (shared by 16)'"""
    parts = []
    for name in ("l1d", "l2", "l3"):
        c = cpu[name]
        if c["bytes"]:
            shared = f" (shared by {c['shared_by']})" if c["shared_by"] > 1 else ""
            parts.append(f"{name.upper()} {_kib(c['bytes'])} {c['ways']}-way{shared}")
    return ", ".join(parts) + f"; from {cpu['cache_source']}"


def config():
    from . import __version__
    cpu = _ext.cpu_info()
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "compiler": _ext.compiler(),
        "openmp": _ext.openmp_version() or "not available (single-threaded build)",
        "cpu": f"{cpu['brand'] or cpu['vendor']} (family {cpu['family']}, model {cpu['model']})",
        "cpu_isa": " ".join(k for k, v in cpu["isa"].items() if v) or "baseline x86-64",
        "cpu_caches": _caches(cpu),
        "cpu_avx2_fma": _ext.cpu_has_avx2_fma(),
        "kernel_paths": f"built {', '.join(_ext.built_paths())}; "
                        f"this CPU runs {', '.join(_ext.available_paths())}",
        "kernel_path": _ext.kernel_path(),
        "int8_kernel": _ext.int8_kernel(),
        "int4_kernel": _ext.int4_kernel(),
        "bf16dot_kernel": _ext.bf16dot_kernel(),
        "block_sizes": _ext.block_sizes(),
        "threads": get_num_threads(),
    }


def show_config(file=None):
    """Print version, compiler, OpenMP, the CPU (ISA, caches), the kernel
    paths, the selected one (CATTN_ISA picks another), the block sizes
    derived from the caches, and threads."""
    file = file or sys.stdout
    for k, v in config().items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in v.items())
        print(f"{k:>14}: {v}", file=file)
