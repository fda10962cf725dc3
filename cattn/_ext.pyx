# cython: language_level=3
"""cattn._ext — the one compiled module: NumPy arrays in, pointers to C,
the GIL released while C runs, C status codes turned into exceptions.

Callers (cattn/ops/: gemm.py, attention.py, rows.py) have already validated
dtypes, shapes and strides; every function here takes arrays whose data is
aligned and whose element strides are passed explicitly (in elements).
One file per concern is included at the end (_cpu.pxi, _gemm.pxi,
_attention.pxi, _rows.pxi, _encoder.pxi, _decoder.pxi, _tokens.pxi). The C constants Python needs are exported once from here:
ACT_CODES (activations) and MASK_KINDS (attention masks).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t, int8_t, uint8_t, uint16_t

cnp.import_array()

cdef extern from "cattn.h" nogil:
    int CATTN_OK
    int CATTN_ENOMEM
    int CATTN_EARGS
    void cattn_init()
    const char *cattn_kernel_path()
    const char *cattn_int8_kernel()
    const char *cattn_int4_kernel()
    const char *cattn_bf16dot_kernel()
    int cattn_cpu_has_avx2_fma()
    int cattn_have_openmp()
    int cattn_omp_max_threads()
    int cattn_contended()
    void cattn_set_contended(double seconds)
    int cattn_set_contention_detection(int on)
    double cattn_note_late_start()
    const char *cattn_compiler()
    int CATTN_ACT_NONE, CATTN_ACT_RELU, CATTN_ACT_GELU, CATTN_ACT_GELU_TANH, CATTN_ACT_SILU

cdef extern from "config.h":
    int CATTN_MR_F32, CATTN_NR_F32, CATTN_MR_F64, CATTN_NR_F64
    int CATTN_DECODE_MAX_ROWS

cattn_init()

# The activations of the GEMM epilogue and of cattn_act_* (csrc/cattn.h
# CATTN_ACT_*), by the names the Python API takes; ordered by code.
# the most query rows per kv head a decode step (and a ragged one) takes
DECODE_MAX_ROWS = CATTN_DECODE_MAX_ROWS

ACT_CODES = {"none": CATTN_ACT_NONE, "relu": CATTN_ACT_RELU, "gelu": CATTN_ACT_GELU,
             "gelu_tanh": CATTN_ACT_GELU_TANH, "silu": CATTN_ACT_SILU}


def block_sizes():
    """GEMM block sizes in use (derived from this CPU's caches), as text."""
    out = {}
    for t, b in gemm_blocks().items():
        out[f"{t} MRxNR"] = f"{b['MR']}x{b['NR']}"
        out[f"{t} MC,KC,NC"] = f"{b['MC']},{b['KC']},{b['NC']}"
    return out


cdef inline int _check(int status) except -1:
    if status == CATTN_OK:
        return 0
    if status == CATTN_ENOMEM:
        raise MemoryError("cattn: out of memory for kernel scratch")
    if status == CATTN_EARGS:
        raise ValueError("cattn: a ragged decode step needs at most "
                         "CATTN_DECODE_MAX_ROWS query rows per kv head")
    raise RuntimeError(f"cattn: kernel failed with status {status}")


def int8_kernel():
    """The int8 micro-kernel in use (its path and instruction)."""
    return cattn_int8_kernel().decode()


def int4_kernel():
    """Which int4 micro-kernel the selected path runs."""
    return cattn_int4_kernel().decode()


def bf16dot_kernel():
    """Which bfloat16dot tile the selected path runs ("avx512_bf16
    (vdpbf16ps)", or the portable emulation)."""
    return cattn_bf16dot_kernel().decode()


def native_bf16dot():
    """True when the bfloat16dot format runs on vdpbf16ps here (the format
    loaders prefer for bfloat16 values)."""
    return cattn_bf16dot_kernel().decode().startswith("avx512_bf16")


def kernel_path():
    """'avx512', 'avx2' or 'portable': the micro-kernels selected at import."""
    return cattn_kernel_path().decode()


def cpu_has_avx2_fma():
    return bool(cattn_cpu_has_avx2_fma())


def openmp_version():
    """The _OPENMP date macro (e.g. 201511) or 0 when built without OpenMP."""
    return cattn_have_openmp()


def omp_max_threads():
    return cattn_omp_max_threads()


def contended():
    """True while short parallel regions run on one thread (a worker thread
    started late recently: the CPU is shared; csrc/contention.c)."""
    return bool(cattn_contended())


def set_contended(double seconds):
    """Mark the CPU contended for `seconds` (0: clear). A test hook."""
    cattn_set_contended(seconds)


def set_contention_detection(bint on):
    """Whether a worker's late start marks the CPU contended (True, the
    default: short regions then run on one thread for a while); returns the
    previous setting. Results never depend on it (thread counts only)."""
    return bool(cattn_set_contention_detection(on))


def note_late_start():
    """Record a worker's late start as a parallel region does; returns the
    contended window (s) it chose (csrc/contention.c: backs off). A test hook."""
    return cattn_note_late_start()


def compiler():
    return cattn_compiler().decode()


include "_cpu.pxi"
include "_gemm.pxi"
include "_attention.pxi"
include "_rows.pxi"
include "_encoder.pxi"
include "_decoder.pxi"
include "_tokens.pxi"
