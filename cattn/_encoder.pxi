# _encoder.pxi — a stack of encoder layers on token rows in one call
# (cattn/nn/fastpath.py builds the arguments once). Included by _ext.pyx.
#
# The same kernel calls, with the same arguments and in the same order, as
# nn.fastpath's Python loop (and so as the layer-by-layer path): the linear
# layers (cattn_linear_weight: the kernel of each weight's kind), the fused
# attention per run of equal-length sequences, the residual sums (one
# float32 add per element, as np.add) and the layer norms; only the Python
# between them is gone. float32, prepacked weights only.
# Legend: T token rows, E model width, F feed-forward width.
#
# Per layer, post-LN:  a = LN1(x + (attn(x W_in^T + b_in)) W_o^T + b_o)
#                      y = LN2(a + act(a W_1^T + b_1) W_2^T + b_2)
# pre-LN:              a = x + attn(LN1(x) W_in^T + b_in) W_o^T + b_o
#                      y = a + act(LN2(a) W_1^T + b_1) W_2^T + b_2

from libc.stdlib cimport malloc, free

cdef struct enc_layer:
    cattn_weight lin[4]         # in_proj, out_proj, linear1, linear2
    const float *ln_w[2]
    const float *ln_b[2]
    double eps[2]
    int act, pre


cdef inline int _lin(const cattn_weight *w, float *y, const float *x, int64_t M, int act,
                     int nt) noexcept nogil:
    return cattn_linear_weight(w, y, x, M, act, nt)


cdef void _add(float *y, const float *a, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        y[i] = y[i] + a[i]


def encoder_f32(list layers, cnp.ndarray x, cnp.ndarray qkv, cnp.ndarray ctx, cnp.ndarray A,
                cnp.ndarray Y, object H, cnp.ndarray f, list attn, int act_none, int nt):
    """Run `layers` on x (T, E) (IN, not written) -> Y (OUT, (T, E)).
    layers: per layer (in_proj, out_proj, linear1, linear2, ln1_w, ln1_b, eps1,
    ln2_w, ln2_b, eps2, act, pre), each linear (kind, data, scale, colsum,
    bias, N, K, rsw, csw) with None for what its kind lacks (_weight); qkv (T, 3E), ctx (T, E),
    A (T, E), f (T, F) and H (T, E; pre-LN only, else None) scratch; attn:
    (plan, row0, rows) per run, plans for the views q, k, v of qkv and o of
    ctx starting at row0. All float32, C-contiguous."""
    cdef int64_t T = x.shape[0], E = x.shape[1], n_layers = len(layers)
    cdef int64_t nrun = len(attn), i, j, r0
    cdef enc_layer *L = <enc_layer *>malloc(sizeof(enc_layer) * max(n_layers, 1))
    cdef cattn_attn_args *R = <cattn_attn_args *>malloc(sizeof(cattn_attn_args) * max(nrun, 1))
    cdef int st = 0
    cdef float *px = <float *>cnp.PyArray_DATA(x)
    cdef float *pqkv = <float *>cnp.PyArray_DATA(qkv)
    cdef float *pctx = <float *>cnp.PyArray_DATA(ctx)
    cdef float *pa = <float *>cnp.PyArray_DATA(A)
    cdef float *py = <float *>cnp.PyArray_DATA(Y)
    cdef float *pf = <float *>cnp.PyArray_DATA(f)
    cdef float *ph = NULL if H is None else <float *>cnp.PyArray_DATA(<cnp.ndarray>H)
    cdef const float *cur
    cdef const float *hin
    cdef enc_layer *ly
    cdef int *skip = <int *>malloc(sizeof(int) * max(nrun, 1))
    if L == NULL or R == NULL or skip == NULL:
        free(L); free(R); free(skip)
        raise MemoryError("encoder_f32: no memory for the layer table")
    try:
        for i in range(n_layers):
            item = layers[i]
            for j in range(4):
                _weight(&L[i].lin[j], item[j])
            L[i].ln_w[0] = <const float *>_ptr(item[4])
            L[i].ln_b[0] = <const float *>_ptr(item[5])
            L[i].eps[0] = item[6]
            L[i].ln_w[1] = <const float *>_ptr(item[7])
            L[i].ln_b[1] = <const float *>_ptr(item[8])
            L[i].eps[1] = item[9]
            L[i].act = item[10]
            L[i].pre = item[11]
        for i in range(nrun):
            plan, r0, rows = attn[i]
            q = qkv[rows]
            skip[i] = _attn_args(&R[i], plan, ctx[rows], q, q[:, E:], q[:, 2 * E:], None)
        with nogil:
            cur = px
            for i in range(n_layers):
                ly = &L[i]
                hin = cur
                if ly.pre:
                    st = cattn_layer_norm_f32(ph, E, cur, E, ly.ln_w[0], ly.ln_b[0], T, E,
                                              ly.eps[0], nt)
                    if st: break
                    hin = ph
                st = _lin(&ly.lin[0], pqkv, hin, T, act_none, nt)
                if st: break
                for j in range(nrun):
                    if not skip[j]:
                        st = cattn_attention_f32(&R[j], nt)
                        if st: break
                if st: break
                st = _lin(&ly.lin[1], pa, pctx, T, act_none, nt)
                if st: break
                _add(pa, cur, T * E)                          # a = SA + x
                if ly.pre:
                    st = cattn_layer_norm_f32(ph, E, pa, E, ly.ln_w[1], ly.ln_b[1], T, E,
                                              ly.eps[1], nt)
                    hin = ph
                else:
                    st = cattn_layer_norm_f32(pa, E, pa, E, ly.ln_w[0], ly.ln_b[0], T, E,
                                              ly.eps[0], nt)
                    hin = pa
                if st: break
                st = _lin(&ly.lin[2], pf, hin, T, ly.act, nt)
                if st: break
                st = _lin(&ly.lin[3], py, pf, T, act_none, nt)
                if st: break
                _add(py, pa, T * E)                           # y = FF + a
                if not ly.pre:
                    st = cattn_layer_norm_f32(py, E, py, E, ly.ln_w[1], ly.ln_b[1], T, E,
                                              ly.eps[1], nt)
                    if st: break
                cur = py
    finally:
        free(L)
        free(R)
        free(skip)
    _check(st)
