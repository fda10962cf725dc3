# _attention.pxi — the fused attention entry (csrc/attention.c). Included by _ext.pyx.
#   O = softmax(Q K^T * scale + mask) V per (unit, group head), or the
#   probabilities W = softmax(Q K^T * scale + mask) when plan.weights.
# Legend: B batch, Hq query heads, H kv heads, L queries, S keys, E is the
# head dim (of Q and K), Ev the value dim; a "unit" is one (batch, kv head).
# cattn/ops/attention.py validates everything and describes the call in an
# AttentionPlan (offsets and strides in elements); this file copies the plan
# into csrc/cattn.h's cattn_attn_args and runs the kernel without the GIL.

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
        const int64_t *slen
    int cattn_attention_f32(cattn_attn_args *args, int n_threads)
    int cattn_attention_f64(cattn_attn_args *args, int n_threads)
    int cattn_attention_f32_kvh(cattn_attn_args *args, int n_threads)

cdef extern from "cattn.h":
    int CATTN_MASK_NONE, CATTN_MASK_BOOL, CATTN_MASK_ADD

# cattn_attn_args.mkind (csrc/cattn.h CATTN_MASK_*): no mask, bool bytes
# (nonzero = attend), additive (same dtype as Q).
MASK_KINDS = {"none": CATTN_MASK_NONE, "bool": CATTN_MASK_BOOL, "additive": CATTN_MASK_ADD}


cdef int _attn_args(cattn_attn_args *a, object plan, cnp.ndarray O, cnp.ndarray Q,
                    cnp.ndarray K, cnp.ndarray V, object mask) except -1:
    """Fill *a from plan and the arrays; returns 0, or 1 when there is
    nothing to compute. a's offset pointers point into plan's arrays: plan
    must outlive every use of *a."""
    cdef const int64_t[::1] offo = plan.offo
    cdef const int64_t[::1] offq = plan.offq
    cdef const int64_t[::1] offk = plan.offk
    cdef const int64_t[::1] offv = plan.offv
    cdef const int64_t[::1] offm = plan.offm
    a.nkv = plan.nkv
    a.group = plan.group
    if a.nkv * a.group == 0:
        return 1
    if plan.weights:
        a.O = NULL
        a.W = cnp.PyArray_DATA(O)
    else:
        a.O = cnp.PyArray_DATA(O)
        a.W = NULL
    a.offo = a.offw = &offo[0]
    a.rso = a.rsw = plan.rso
    a.Q = cnp.PyArray_DATA(Q)
    a.offq = &offq[0]
    a.rsq = plan.rsq
    a.K = cnp.PyArray_DATA(K)
    a.offk = &offk[0]
    a.rsk = plan.rsk
    a.V = cnp.PyArray_DATA(V)
    a.offv = &offv[0]
    a.rsv = plan.rsv
    if mask is None:
        a.mask = NULL
        a.mkind = CATTN_MASK_NONE
    else:
        a.mask = cnp.PyArray_DATA(<cnp.ndarray>mask)
        a.mkind = plan.mask_kind
    a.offm = &offm[0]
    a.rsm = plan.rsm
    a.csm = plan.csm
    a.L = plan.L
    a.S = plan.S
    a.E = plan.E
    a.Ev = plan.Ev
    a.scale = plan.scale
    a.causal = 1 if plan.causal else 0
    a.shift = plan.shift
    a.slen = NULL
    return 0


def attention(object plan, cnp.ndarray O, cnp.ndarray Q, cnp.ndarray K, cnp.ndarray V,
              object mask, int n_threads):
    """Fused attention described by `plan` (an AttentionPlan: offsets,
    strides, sizes, scale, causal, shift, mask kind).
    O (OUT): (..., Hq, L, Ev) outputs, or (..., Hq, L, S) probabilities when
    plan.weights; Q (..., Hq, L, E), K (..., H, S, E), V (..., H, S, Ev)
    (IN; V is ignored with plan.weights; K and V float16 with a float32 Q:
    a float16 KV cache); mask (IN): None or the (..., Hq,
    L, S) view (uint8 bytes for bool masks). Each array's data pointer is
    element (0, ..., 0); plan.off* locate each unit's (sub)matrices."""
    cdef cattn_attn_args a
    cdef int st
    if _attn_args(&a, plan, O, Q, K, V, mask):
        return
    if Q.dtype.num == cnp.NPY_FLOAT32 and K.dtype.num == cnp.NPY_FLOAT16:
        with nogil:                             # a float16 KV cache
            st = cattn_attention_f32_kvh(&a, n_threads)
    elif Q.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_attention_f32(&a, n_threads)
    else:
        with nogil:
            st = cattn_attention_f64(&a, n_threads)
    _check(st)
