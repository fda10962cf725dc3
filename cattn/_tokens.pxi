# _tokens.pxi — a sentence model's token rows in and out (csrc/tokens.c):
# the embedding sum and the mean pooling. Included by _ext.pyx. Callers
# (cattn/models) pass C-contiguous float32 arrays of the stated shapes and
# int64 ids / lengths; the checks here keep a wrong call from reading
# outside an array.

cdef extern from "cattn.h" nogil:
    int64_t cattn_embed_sum_f32(float *x, const int64_t *ids, int64_t T, const float *word,
                                int64_t V, const float *add0, const float *pos, int64_t E)
    int cattn_mean_pool_f32(float *out, const float *x, const int64_t *lengths, int64_t B,
                            int64_t E, int normalize)


cdef _need(cnp.ndarray a, int typenum, int ndim, str what):
    if a.dtype.num != typenum or a.ndim != ndim or not cnp.PyArray_IS_C_CONTIGUOUS(a) \
            or not cnp.PyArray_ISALIGNED(a):
        raise ValueError(f"{what}: expected an aligned C-contiguous {ndim}-D array of "
                         f"{cnp.PyArray_DescrFromType(typenum)}, got {a.dtype} {a.ndim}-D")


def embed_sum_f32(cnp.ndarray x, cnp.ndarray ids, cnp.ndarray word, cnp.ndarray add0,
                  cnp.ndarray pos):
    """x (OUT, (T, E)) = word[ids] + add0 + pos[:T] (float32 adds, left to
    right); ids (T,) int64, word (V, E), add0 (E,), pos (>= T, E). Returns -1,
    or the index of the first id outside [0, V) (x then partly written)."""
    _need(x, cnp.NPY_FLOAT32, 2, "embed_sum_f32: x")
    _need(ids, cnp.NPY_INT64, 1, "embed_sum_f32: ids")
    _need(word, cnp.NPY_FLOAT32, 2, "embed_sum_f32: word")
    _need(add0, cnp.NPY_FLOAT32, 1, "embed_sum_f32: add0")
    _need(pos, cnp.NPY_FLOAT32, 2, "embed_sum_f32: pos")
    cdef int64_t T = x.shape[0], E = x.shape[1], V = word.shape[0], bad
    if ids.shape[0] != T or word.shape[1] != E or add0.shape[0] != E or pos.shape[1] != E \
            or pos.shape[0] < T:
        raise ValueError(f"embed_sum_f32: shapes x {(<object>x).shape}, ids "
                         f"{(<object>ids).shape}, word {(<object>word).shape}, add0 "
                         f"{(<object>add0).shape}, pos {(<object>pos).shape} do not fit")
    with nogil:
        bad = cattn_embed_sum_f32(<float *>cnp.PyArray_DATA(x),
                                  <const int64_t *>cnp.PyArray_DATA(ids), T,
                                  <const float *>cnp.PyArray_DATA(word), V,
                                  <const float *>cnp.PyArray_DATA(add0),
                                  <const float *>cnp.PyArray_DATA(pos), E)
    return bad - 1


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
