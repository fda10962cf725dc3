# _decoder.pxi — a decoder stack's forward step in one call: every layer on
# the step's new token rows, each sequence's KV cache appended in place
# (prefill: L prompt tokens; decode: L = 1). Included by _ext.pyx after
# _encoder.pxi (`_lin`, `_add`; the weights as _gemm.pxi's `_weight` fills them). cattn/nn/program.py
# builds the description once from the modules and checks every argument;
# this file trusts them.
#
# The same kernel calls, with the same arguments, in the same order, as the
# modules' forward (nn.decoder.DecoderBlock on a KVCache): the linear
# layers, the norms, the fused attention over the cache; the row operations
# NumPy did between them are csrc/decoder.c's loops (rotary, KV append,
# gated product), rounded as NumPy rounds. So the bits are the modules'.
# float32 only.
# Legend: B sequences, L new tokens each, T = B*L rows (sequence-major), E
# model width, H query heads, Hk kv heads (GQA: H = Hk * group), D head
# dim, W = (H + 2 Hk) D the fused q|k|v row, F the MLP's hidden width,
# S0 cached positions before the step, S = S0 + L.
#
# Per layer (pre-norm):  h   = norm1(x)                         (T, E)
#                        qkv = h Wqkv^T + b                      (T, W)
#   Qwen3 (qk_norm):     q, k = rms_norm of each head (weights qn, kn (D,))  (in place)
#                        q, k = rope(q, k) at each row's position   (in place)
#                        cache[:, :, S0:S] = k, v               (B, Hk, ., D)
#                        ctx = softmax(q K^T / sqrt(D) + mask) V (T, H D)  over the cache
#                        x   = x + ctx Wo^T + bo
#                        h   = norm2(x)
#   gated (SwiGLU):      x   = x + (act(h Wg^T) * (h Wu^T)) Wd^T   (gate|up one GEMM)
#   plain (GPT-2):       x   = x + act(h W1^T + b1) W2^T + b2

cdef extern from "cattn.h" nogil:
    void cattn_rope_f32(float *x, int64_t rows, int64_t rs, int64_t heads, int64_t D,
                        const int64_t *pos, const float *cos, const float *sin)
    void cattn_kv_append_f32(float *cache, int64_t B, int64_t Hk, int64_t max_len, int64_t D,
                             int64_t start, const float *src, int64_t L, int64_t rs)
    int64_t cattn_kv_append_f32_h(uint16_t *cache, int64_t B, int64_t Hk, int64_t max_len,
                                  int64_t D, int64_t start, const float *src, int64_t L,
                                  int64_t rs)
    void cattn_gate_pack_f32(float *x, int64_t rows, int64_t n)

cdef struct dec_layer:
    cattn_weight lin[4]         # qkv, o, up (gate|up, or fc1), down (or fc2)
    const float *nw[2]          # norm1, norm2: weight (None: 1), bias (LayerNorm; None: 0)
    const float *nb[2]
    double eps[2]
    const float *qn             # Qwen3's q / k head norms (D,), or NULL
    const float *kn
    double qk_eps


cdef int _dec_norm(bint rms, const dec_layer *ly, int i, float *y, const float *x, int64_t T,
                   int64_t E, int nt) noexcept nogil:
    if rms:
        return cattn_rms_norm_f32(y, E, x, E, ly.nw[i], T, E, ly.eps[i], nt)
    return cattn_layer_norm_f32(y, E, x, E, ly.nw[i], ly.nb[i], T, E, ly.eps[i], nt)


cdef class DecoderStack:
    """The weights of a decoder stack as C structs (built once), run by
    step(). layers: per layer (qkv, o, up, down, norm1 weight, norm1 bias,
    eps1, norm2 weight, norm2 bias, eps2, q-norm weight, k-norm weight,
    their eps: None, None, 0 without qk_norm), each linear (kind, data, scale,
    colsum, bias, N, K, rsw, csw) with None for what its kind lacks (_weight); every
    array float32 (the panels in their stored dtype), aligned, and kept
    alive by this object."""
    cdef dec_layer *L
    cdef readonly int64_t n_layers, E, H, Hk, D, F
    cdef readonly bint rms, gated, rope, qk_norm
    cdef readonly int act, act_none
    cdef readonly double scale
    cdef object keep

    def __cinit__(self, list layers, int64_t E, int64_t H, int64_t Hk, int64_t D, int64_t F,
                  bint rms, bint gated, int act, int act_none, bint rope, double scale,
                  bint qk_norm=False):
        cdef int64_t i, j
        self.n_layers, self.E, self.H, self.Hk, self.D, self.F = len(layers), E, H, Hk, D, F
        self.rms, self.gated, self.act, self.act_none = rms, gated, act, act_none
        self.rope, self.scale, self.qk_norm = rope, scale, qk_norm
        self.keep = layers
        self.L = <dec_layer *>malloc(sizeof(dec_layer) * max(self.n_layers, 1))
        if self.L == NULL:
            raise MemoryError("DecoderStack: no memory for the layer table")
        for i in range(self.n_layers):
            item = layers[i]
            for j in range(4):
                _weight(&self.L[i].lin[j], item[j])
            for j in range(2):
                self.L[i].nw[j] = <const float *>_ptr(item[4 + 3 * j])
                self.L[i].nb[j] = <const float *>_ptr(item[5 + 3 * j])
                self.L[i].eps[j] = item[6 + 3 * j]
            self.L[i].qn = <const float *>_ptr(item[10])
            self.L[i].kn = <const float *>_ptr(item[11])
            self.L[i].qk_eps = item[12]

    def __dealloc__(self):
        free(self.L)

    def step(self, cnp.ndarray x, int64_t B, int64_t L, list kcache, list vcache,
             int64_t start, int64_t max_len, object pos, object cos, object sin, object mask,
             int64_t msb, int64_t rsm, int64_t csm, int nt, object lens=None):
        """Run every layer on x (T, E) (IN/OUT: the residual stream, updated
        in place), the rows of B sequences of L new tokens each.
        kcache, vcache: per layer the (B, Hk, max_len, D) key and value
        arrays, holding `start` positions; rows start..start+L-1 are written.
        pos: (T,) int64 rotary positions into the (n, D/2) cos / sin tables
        (None without rotary). mask: None (causal) or the bool bytes with
        element (b, i, s) at b*msb + i*rsm + s*csm (True = attend).
        lens: None, or a ragged decode step (L = 1, mask None): (B,) int64,
        sequence b holds lens[b] positions (start = max(lens)), its row is
        written at lens[b] and attends to its first lens[b] + 1 keys; each
        sequence gets the bits it gets alone (its own start).
        The caches are float32, or float16 (every layer's alike): the new
        keys and values rounded to float16 (ValueError after the step when
        a finite one overflowed: the caller then does not count the step's
        positions as filled), attended as their widened values."""
        cdef int64_t E = self.E, H = self.H, Hk = self.Hk, D = self.D, F = self.F
        cdef int64_t T = B * L, Wq = (H + 2 * Hk) * D, HD = H * D, group = H // Hk
        cdef int64_t nkv = B * Hk, nq = nkv * group, b, k, g, i, S = start + L
        cdef int64_t nup = (2 * F if self.gated else F)
        cdef int st = 0
        cdef int act = self.act, act_none = self.act_none
        cdef bint rms = self.rms, gated = self.gated, rope = self.rope, qkn = self.qk_norm
        cdef int64_t t
        cdef dec_layer *ly
        cdef cattn_attn_args a
        cdef float *px = <float *>cnp.PyArray_DATA(x)
        cdef const int64_t *ppos = <const int64_t *>_ptr(pos)
        cdef const float *pcos = <const float *>_ptr(cos)
        cdef const float *psin = <const float *>_ptr(sin)
        cdef size_t nfl = <size_t>(T * (2 * E + Wq + HD + nup))
        cdef float *buf = <float *>malloc(sizeof(float) * max(nfl, 1))
        cdef int64_t *off = <int64_t *>malloc(sizeof(int64_t) * (3 * nq + 2 * nkv + 1))
        cdef float **kv = <float **>malloc(sizeof(float *) * (2 * self.n_layers + 1))
        cdef bint half = len(kcache) > 0 and (<cnp.ndarray>kcache[0]).dtype.num == cnp.NPY_FLOAT16
        cdef int64_t over = 0
        if buf == NULL or off == NULL or kv == NULL:
            free(buf); free(off); free(kv)
            raise MemoryError(f"DecoderStack.step: no memory for the scratch of {T} rows")
        cdef float *ph = buf
        cdef float *pqkv = ph + T * E
        cdef float *pctx = pqkv + T * Wq
        cdef float *pa = pctx + T * HD
        cdef float *pu = pa + T * E
        cdef int64_t *offq = off
        cdef int64_t *offo = off + nq
        cdef int64_t *offm = off + 2 * nq
        cdef int64_t *offk = off + 3 * nq
        cdef int64_t *slen = off + 3 * nq + nkv           # ragged: each unit's keys
        cdef const int64_t *plen = <const int64_t *>_ptr(lens)
        if plen != NULL:
            S = start + 1
            for b in range(B):
                for k in range(Hk):
                    slen[b * Hk + k] = plen[b] + 1
        try:
            for i in range(self.n_layers):
                kv[2 * i] = <float *>cnp.PyArray_DATA(<cnp.ndarray>kcache[i])
                kv[2 * i + 1] = <float *>cnp.PyArray_DATA(<cnp.ndarray>vcache[i])
            for b in range(B):
                for k in range(Hk):
                    offk[b * Hk + k] = (b * Hk + k) * max_len * D
                    for g in range(group):
                        i = (b * Hk + k) * group + g
                        offq[i] = b * L * Wq + (k * group + g) * D
                        offo[i] = b * L * HD + (k * group + g) * D
                        offm[i] = b * msb
            a.O = pctx
            a.offo = offo
            a.rso = HD
            a.Q = pqkv
            a.offq = offq
            a.rsq = Wq
            a.offk = offk
            a.rsk = D
            a.offv = offk
            a.rsv = D
            a.mask = _ptr(mask)
            a.mkind = CATTN_MASK_NONE if mask is None else CATTN_MASK_BOOL
            a.offm = offm
            a.rsm = rsm
            a.csm = csm
            a.W = NULL
            a.offw = offo
            a.rsw = HD
            a.nkv = nkv
            a.group = group
            a.L = L
            a.S = S
            a.E = D
            a.Ev = D
            a.scale = self.scale
            a.causal = 1 if mask is None else 0
            a.shift = start
            a.slen = slen if plen != NULL else NULL
            with nogil:
                for i in range(self.n_layers):
                    ly = &self.L[i]
                    st = _dec_norm(rms, ly, 0, ph, px, T, E, nt)
                    if st: break
                    st = _lin(&ly.lin[0], pqkv, ph, T, act_none, nt)
                    if st: break
                    if qkn:                         # each token's H q heads, then Hk k heads
                        for t in range(T):
                            st = cattn_rms_norm_f32(pqkv + t * Wq, D, pqkv + t * Wq, D, ly.qn,
                                                    H, D, ly.qk_eps, 1)
                            if st: break
                            st = cattn_rms_norm_f32(pqkv + t * Wq + HD, D, pqkv + t * Wq + HD,
                                                    D, ly.kn, Hk, D, ly.qk_eps, 1)
                            if st: break
                        if st: break
                    if rope:
                        cattn_rope_f32(pqkv, T, Wq, H + Hk, D, ppos, pcos, psin)
                    if half:                        # float16 caches (uint16_t bits)
                        for b in range(1 if plen == NULL else B):
                            over += cattn_kv_append_f32_h(
                                <uint16_t *>kv[2 * i] + b * Hk * max_len * D,
                                B if plen == NULL else 1, Hk, max_len, D,
                                start if plen == NULL else plen[b], pqkv + b * Wq + HD,
                                L if plen == NULL else 1, Wq)
                            over += cattn_kv_append_f32_h(
                                <uint16_t *>kv[2 * i + 1] + b * Hk * max_len * D,
                                B if plen == NULL else 1, Hk, max_len, D,
                                start if plen == NULL else plen[b], pqkv + b * Wq + HD + Hk * D,
                                L if plen == NULL else 1, Wq)
                    elif plen == NULL:
                        cattn_kv_append_f32(kv[2 * i], B, Hk, max_len, D, start, pqkv + HD,
                                            L, Wq)
                        cattn_kv_append_f32(kv[2 * i + 1], B, Hk, max_len, D, start,
                                            pqkv + HD + Hk * D, L, Wq)
                    else:                           # each sequence at its own length
                        for b in range(B):
                            cattn_kv_append_f32(kv[2 * i] + b * Hk * max_len * D, 1, Hk,
                                                max_len, D, plen[b], pqkv + b * Wq + HD, 1, Wq)
                            cattn_kv_append_f32(kv[2 * i + 1] + b * Hk * max_len * D, 1, Hk,
                                                max_len, D, plen[b], pqkv + b * Wq + HD + Hk * D,
                                                1, Wq)
                    a.K = kv[2 * i]
                    a.V = kv[2 * i + 1]
                    if half:
                        st = cattn_attention_f32_kvh(&a, nt)
                    else:
                        st = cattn_attention_f32(&a, nt)
                    if st: break
                    st = _lin(&ly.lin[1], pa, pctx, T, act_none, nt)
                    if st: break
                    _add(px, pa, T * E)                             # x = x + attn
                    st = _dec_norm(rms, ly, 1, ph, px, T, E, nt)
                    if st: break
                    if gated:                       # act(gate) * up in place, packed
                        st = _lin(&ly.lin[2], pu, ph, T, act_none, nt)
                        if st: break
                        st = cattn_act_f32(pu, 2 * F, pu, 2 * F, T, F, act, nt)
                        if st: break
                        cattn_gate_pack_f32(pu, T, F)
                        st = _lin(&ly.lin[3], pa, pu, T, act_none, nt)
                    else:
                        st = _lin(&ly.lin[2], pu, ph, T, act, nt)
                        if st: break
                        st = _lin(&ly.lin[3], pa, pu, T, act_none, nt)
                    if st: break
                    _add(px, pa, T * E)                             # x = x + mlp
        finally:
            free(buf)
            free(off)
            free(kv)
        _check(st)
        if over:
            raise ValueError(f"DecoderStack.step: {over} keys / values overflowed the float16 "
                             "KV cache (|x| >= 65520); use a float32 cache (kv_dtype='float32')")
