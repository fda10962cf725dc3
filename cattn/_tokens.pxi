# _tokens.pxi — a sentence model's token rows out (csrc/tokens.c): the
# mean pooling. Included by _ext.pyx. Callers
# (cattn/models) pass C-contiguous float32 arrays of the stated shapes and
# int64 ids / lengths; the checks here keep a wrong call from reading
# outside an array.

cdef extern from "cattn.h" nogil:
    int cattn_mean_pool_f32(float *out, const float *x, const int64_t *lengths, int64_t B,
                            int64_t E, int normalize)


cdef _need(cnp.ndarray a, int typenum, int ndim, str what):
    if a.dtype.num != typenum or a.ndim != ndim or not cnp.PyArray_IS_C_CONTIGUOUS(a) \
            or not cnp.PyArray_ISALIGNED(a):
        raise ValueError(f"{what}: expected an aligned C-contiguous {ndim}-D array of "
                         f"{cnp.PyArray_DescrFromType(typenum)}, got {a.dtype} {a.ndim}-D")


def mean_pool_f32(cnp.ndarray out, cnp.ndarray x, cnp.ndarray lengths, bint normalize):
    """out (OUT, (B, E)) = mean of each sequence's rows of x (T, E) (in double,
    rows in order), divided by max(its L2 norm, 1e-12) when normalize;
    lengths (B,) int64, non-negative, summing to T."""
    _need(out, cnp.NPY_FLOAT32, 2, "mean_pool_f32: out")
    _need(x, cnp.NPY_FLOAT32, 2, "mean_pool_f32: x")
    _need(lengths, cnp.NPY_INT64, 1, "mean_pool_f32: lengths")
    cdef int64_t B = out.shape[0], E = out.shape[1], i, total = 0
    cdef const int64_t *n = <const int64_t *>cnp.PyArray_DATA(lengths)
    if lengths.shape[0] != B or x.shape[1] != E:
        raise ValueError(f"mean_pool_f32: shapes out {(<object>out).shape}, x "
                         f"{(<object>x).shape}, lengths {(<object>lengths).shape} do not fit")
    for i in range(B):
        if n[i] < 0:
            raise ValueError("mean_pool_f32: negative length")
        total += n[i]
    if total != x.shape[0]:
        raise ValueError(f"mean_pool_f32: lengths sum to {total}, x has {x.shape[0]} rows")
    cdef int st
    with nogil:
        st = cattn_mean_pool_f32(<float *>cnp.PyArray_DATA(out), <const float *>cnp.PyArray_DATA(x),
                                 n, B, E, normalize)
    _check(st)
