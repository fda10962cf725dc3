# _cpu.pxi — the CPU description (csrc/cpuinfo.h), the kernel paths and
# CATTN_ISA, and the block sizes derived from the caches. Included by _ext.pyx.
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport malloc, free

cdef extern from "cpuinfo.h" nogil:
    ctypedef struct cattn_cache:
        int64_t bytes
        int ways, line, shared
    ctypedef struct cattn_cpu:
        char vendor[13]
        char brand[49]
        int family, model
        int avx2, fma, avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_vnni
        cattn_cache l1d, l2, l3
        const char *cache_source
    ctypedef struct cattn_gemm_blocks:
        int64_t mc, kc, nc
    ctypedef void (*cattn_cpuid_fn)(void *ctx, uint32_t leaf, uint32_t sub, uint32_t *out)
    void cattn_cpu_parse(cattn_cpuid_fn cpuid, void *ctx, uint64_t xcr0, cattn_cpu *cpu)
    void cattn_gemm_blocks_for(const cattn_cpu *cpu, int mr, int nr, int elt, cattn_gemm_blocks *b)
    const cattn_cpu *cattn_cpu_this()
    void cattn_paths_for(const cattn_cpu *cpu, char *buf)

cdef extern from "dispatch.h" nogil:
    ctypedef struct cattn_dispatch_t:
        cattn_gemm_blocks gemm_f32, gemm_f64
    cattn_dispatch_t cattn_kt

cdef extern from "cattn.h" nogil:
    const char *cattn_isa_error()
    const char *cattn_built_paths()
    const char *cattn_available_paths()

_ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq",
              "avx512_bf16", "avx512_vnni")


cdef dict _cpu_dict(const cattn_cpu *c):
    cdef char paths[64]
    cattn_paths_for(c, paths)
    def cache(cattn_cache k):
        return {"bytes": k.bytes, "ways": k.ways, "line": k.line, "shared_by": k.shared}
    isa = {"avx2": c.avx2, "fma": c.fma, "avx512f": c.avx512f, "avx512bw": c.avx512bw,
           "avx512vl": c.avx512vl, "avx512dq": c.avx512dq, "avx512_bf16": c.avx512_bf16,
           "avx512_vnni": c.avx512_vnni}
    return {"vendor": c.vendor.decode("latin-1"), "brand": c.brand.decode("latin-1"),
            "family": c.family, "model": c.model,
            "isa": {k: bool(v) for k, v in isa.items()},
            "l1d": cache(c.l1d), "l2": cache(c.l2), "l3": cache(c.l3),
            "cache_source": c.cache_source.decode(),
            "paths": tuple(p for p in paths.decode().split(",") if p)}


cdef dict _blocks_dict(const cattn_cpu *c):
    cdef cattn_gemm_blocks b32, b64
    cattn_gemm_blocks_for(c, CATTN_MR_F32, CATTN_NR_F32, 4, &b32)
    cattn_gemm_blocks_for(c, CATTN_MR_F64, CATTN_NR_F64, 8, &b64)
    return {"f32": {"MR": CATTN_MR_F32, "NR": CATTN_NR_F32, "MC": b32.mc, "KC": b32.kc,
                    "NC": b32.nc},
            "f64": {"MR": CATTN_MR_F64, "NR": CATTN_NR_F64, "MC": b64.mc, "KC": b64.kc,
                    "NC": b64.nc}}


def cpu_info():
    """This CPU as cattn sees it (CPUID): vendor, brand, family, model, the
    usable instruction sets ('isa'), the data caches (bytes, ways, line,
    logical CPUs sharing one), which CPUID leaves gave them, and the kernel
    paths of this build it runs, best first ('paths')."""
    return _cpu_dict(cattn_cpu_this())


def gemm_blocks():
    """The GEMM block sizes in use: {'f32': {MR, NR, MC, KC, NC}, 'f64': ...}."""
    return {"f32": {"MR": CATTN_MR_F32, "NR": CATTN_NR_F32, "MC": cattn_kt.gemm_f32.mc,
                    "KC": cattn_kt.gemm_f32.kc, "NC": cattn_kt.gemm_f32.nc},
            "f64": {"MR": CATTN_MR_F64, "NR": CATTN_NR_F64, "MC": cattn_kt.gemm_f64.mc,
                    "KC": cattn_kt.gemm_f64.kc, "NC": cattn_kt.gemm_f64.nc}}


ctypedef struct _leaf_rec:
    uint32_t leaf, sub
    uint32_t r[4]

ctypedef struct _leaves:
    Py_ssize_t n
    _leaf_rec *recs


cdef void _recorded_cpuid(void *ctx, uint32_t leaf, uint32_t sub, uint32_t *out) noexcept nogil:
    cdef _leaves *t = <_leaves *>ctx
    cdef Py_ssize_t i
    for i in range(t.n):
        if t.recs[i].leaf == leaf and t.recs[i].sub == sub:
            out[0] = t.recs[i].r[0]; out[1] = t.recs[i].r[1]
            out[2] = t.recs[i].r[2]; out[3] = t.recs[i].r[3]
            return


def parse_cpuid(leaves, xcr0):
    """Decode recorded CPUID leaves as cattn decodes this CPU's (for tests):
    leaves {(leaf, subleaf): (eax, ebx, ecx, edx)}, absent leaves read as
    zeros; xcr0 the XGETBV(0) value. Returns (cpu_info dict, gemm blocks)."""
    cdef _leaves t
    cdef cattn_cpu c
    t.n = len(leaves)
    t.recs = <_leaf_rec *>malloc(max(1, t.n) * sizeof(_leaf_rec))
    if t.recs == NULL:
        raise MemoryError()
    try:
        for i, ((l, s), regs) in enumerate(leaves.items()):
            t.recs[i].leaf, t.recs[i].sub = l, s
            for j in range(4):
                t.recs[i].r[j] = regs[j]
        cattn_cpu_parse(_recorded_cpuid, &t, xcr0, &c)
        return _cpu_dict(&c), _blocks_dict(&c)
    finally:
        free(t.recs)


def built_paths():
    """The kernel paths compiled into this build, best first."""
    return tuple(cattn_built_paths().decode().split(","))


def available_paths():
    """The kernel paths of this build that this CPU runs, best first."""
    return tuple(p for p in cattn_available_paths().decode().split(",") if p)


def isa_error():
    """Why CATTN_ISA could not be honoured, or None."""
    cdef const char *e = cattn_isa_error()
    return None if e == NULL else e.decode()
