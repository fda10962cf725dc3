# _attention.pxi — fused attention entry (csrc/attention.c). Included by _ext.pyx.
#   O = softmax(Q K^T * scale + mask) V  per (unit, group head); or the
#   probabilities W when W is given. Offsets/strides in elements.

cdef extern from "cattn.h" nogil:
    ctypedef struct cattn_attn_args:
        void *O
        const int64_t *offo
        int64_t rso
        const void *Q
        const int64_t *offq
        int64_t rsq
        const void *K
        const int64_t *offk
        int64_t rsk
        const void *V
        const int64_t *offv
        int64_t rsv
        const void *mask
        int mkind
        const int64_t *offm
        int64_t rsm, csm
        void *W
        const int64_t *offw
        int64_t rsw
        int64_t nkv, group, L, S, E, Ev
        double scale
        int causal
        int64_t shift
    int cattn_attention_f32(cattn_attn_args *args, int n_threads)
    int cattn_attention_f64(cattn_attn_args *args, int n_threads)


def attention(cnp.ndarray O, const int64_t[::1] offo, int64_t rso,
              cnp.ndarray Q, const int64_t[::1] offq, int64_t rsq,
              cnp.ndarray K, const int64_t[::1] offk, int64_t rsk,
              cnp.ndarray V, const int64_t[::1] offv, int64_t rsv,
              object mask, int mkind, const int64_t[::1] offm, int64_t rsm, int64_t csm,
              object W, const int64_t[::1] offw, int64_t rsw,
              int64_t nkv, int64_t group, int64_t L, int64_t S, int64_t E, int64_t Ev,
              double scale, int causal, int64_t shift, int n_threads):
    """Fused attention (OUT: O, or W when W is not None). nkv units of
    `group` query heads; offsets locate each unit's (sub)matrices."""
    cdef cattn_attn_args a
    cdef int st
    if nkv * group == 0:
        return
    a.O = cnp.PyArray_DATA(O) if W is None else NULL
    a.offo = &offo[0]
    a.rso = rso
    a.Q = cnp.PyArray_DATA(Q)
    a.offq = &offq[0]
    a.rsq = rsq
    a.K = cnp.PyArray_DATA(K)
    a.offk = &offk[0]
    a.rsk = rsk
    a.V = cnp.PyArray_DATA(V)
    a.offv = &offv[0]
    a.rsv = rsv
    a.mask = NULL if mask is None else cnp.PyArray_DATA(<cnp.ndarray>mask)
    a.mkind = mkind if mask is not None else 0
    a.offm = &offm[0]
    a.rsm = rsm
    a.csm = csm
    a.W = NULL if W is None else cnp.PyArray_DATA(<cnp.ndarray>W)
    a.offw = &offw[0]
    a.rsw = rsw
    a.nkv = nkv
    a.group = group
    a.L = L
    a.S = S
    a.E = E
    a.Ev = Ev
    a.scale = scale
    a.causal = causal
    a.shift = shift
    if Q.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_attention_f32(&a, n_threads)
    else:
        with nogil:
            st = cattn_attention_f64(&a, n_threads)
    _check(st)
