# _gemm.pxi — GEMM entry points (csrc/gemm.c). Included by _ext.pyx; called by cattn/ops/gemm.py.
#   C[M,N] = A[M,K] · B[K,N]  (+ bias[N], act: an _ext.ACT_CODES value); C is only written
# Strides are in elements; batched calls take int64 offset arrays.

cdef extern from "cattn.h" nogil:
    int cattn_gemm_f32(float *C, int64_t rsc, int64_t csc,
                       const float *A, int64_t rsa, int64_t csa,
                       const float *B, int64_t rsb, int64_t csb,
                       int64_t M, int64_t N, int64_t K,
                       const float *bias, int act,
                       int n_threads)
    int cattn_gemm_f64(double *C, int64_t rsc, int64_t csc,
                       const double *A, int64_t rsa, int64_t csa,
                       const double *B, int64_t rsb, int64_t csb,
                       int64_t M, int64_t N, int64_t K,
                       const double *bias, int act,
                       int n_threads)
    int cattn_gemm_batched_f32(float *C, const int64_t *offc, int64_t rsc, int64_t csc,
                               const float *A, const int64_t *offa, int64_t rsa, int64_t csa,
                               const float *B, const int64_t *offb, int64_t rsb, int64_t csb,
                               int64_t nb, int64_t M, int64_t N, int64_t K,
                               const float *bias, int act,
                               int n_threads)
    int cattn_gemm_batched_f64(double *C, const int64_t *offc, int64_t rsc, int64_t csc,
                               const double *A, const int64_t *offa, int64_t rsa, int64_t csa,
                               const double *B, const int64_t *offb, int64_t rsb, int64_t csb,
                               int64_t nb, int64_t M, int64_t N, int64_t K,
                               const double *bias, int act,
                               int n_threads)


def gemm(cnp.ndarray C, int64_t rsc, int64_t csc,
         cnp.ndarray A, int64_t rsa, int64_t csa,
         cnp.ndarray B, int64_t rsb, int64_t csb,
         int64_t M, int64_t N, int64_t K,
         object bias, int act, int n_threads):
    """C (OUT, base pointer of the (M,N) view) = A·B (+bias, act).
    A, B, C: arrays whose data pointer is element (0,0); bias: contiguous or None."""
    cdef void *pc = cnp.PyArray_DATA(C)
    cdef void *pa = cnp.PyArray_DATA(A)
    cdef void *pb = cnp.PyArray_DATA(B)
    cdef void *pbias = NULL
    cdef int st
    if bias is not None:
        pbias = cnp.PyArray_DATA(<cnp.ndarray>bias)
    if C.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_gemm_f32(<float *>pc, rsc, csc, <const float *>pa, rsa, csa,
                                <const float *>pb, rsb, csb, M, N, K,
                                <const float *>pbias, act, n_threads)
    else:
        with nogil:
            st = cattn_gemm_f64(<double *>pc, rsc, csc, <const double *>pa, rsa, csa,
                                <const double *>pb, rsb, csb, M, N, K,
                                <const double *>pbias, act, n_threads)
    _check(st)


def gemm_batched(cnp.ndarray C, const int64_t[::1] offc, int64_t rsc, int64_t csc,
                 cnp.ndarray A, const int64_t[::1] offa, int64_t rsa, int64_t csa,
                 cnp.ndarray B, const int64_t[::1] offb, int64_t rsb, int64_t csb,
                 int64_t M, int64_t N, int64_t K,
                 object bias, int act, int n_threads):
    """Batched GEMM; offsets (in elements) locate item b of each operand."""
    cdef void *pc = cnp.PyArray_DATA(C)
    cdef void *pa = cnp.PyArray_DATA(A)
    cdef void *pb = cnp.PyArray_DATA(B)
    cdef void *pbias = NULL
    cdef int64_t nb = offc.shape[0]
    cdef int st
    if bias is not None:
        pbias = cnp.PyArray_DATA(<cnp.ndarray>bias)
    if nb == 0:
        return
    if C.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_gemm_batched_f32(<float *>pc, &offc[0], rsc, csc,
                                        <const float *>pa, &offa[0], rsa, csa,
                                        <const float *>pb, &offb[0], rsb, csb,
                                        nb, M, N, K,
                                        <const float *>pbias, act, n_threads)
    else:
        with nogil:
            st = cattn_gemm_batched_f64(<double *>pc, &offc[0], rsc, csc,
                                        <const double *>pa, &offa[0], rsa, csa,
                                        <const double *>pb, &offb[0], rsb, csb,
                                        nb, M, N, K,
                                        <const double *>pbias, act, n_threads)
    _check(st)


cdef extern from "cattn.h" nogil:
    size_t cattn_packed_size_f32(int64_t N, int64_t K)
    size_t cattn_packed_size_f64(int64_t N, int64_t K)
    int64_t cattn_packed_kc_f32()
    int64_t cattn_packed_kc_f64()
    void cattn_pack_weight_f32(float *P, const float *W, int64_t rsw, int64_t csw,
                               int64_t N, int64_t K)
    void cattn_pack_weight_f64(double *P, const double *W, int64_t rsw, int64_t csw,
                               int64_t N, int64_t K)
    int cattn_linear_packed_f32(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                                int64_t csa, const float *P, int64_t M, int64_t N, int64_t K,
                                const float *bias, int act, int n_threads)
    int cattn_linear_packed_f64(double *C, int64_t rsc, int64_t csc, const double *A,
                                int64_t rsa, int64_t csa, const double *P, int64_t M,
                                int64_t N, int64_t K, const double *bias, int act, int n_threads)
    int cattn_linear_packed_bf16(float *C, int64_t rsc, int64_t csc, const float *A,
                                 int64_t rsa, int64_t csa, const uint16_t *P16, int64_t M,
                                 int64_t N, int64_t K, const float *bias, int act, int n_threads)
    size_t cattn_qpacked_size(int64_t N, int64_t K)
    int cattn_qweight_ok(const int32_t *abs_rowsum, int64_t N)
    int cattn_linear_int8(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                          int64_t csa, const int8_t *P, const float *sw, const int32_t *colsum,
                          int64_t M, int64_t N, int64_t K, const float *bias, int act,
                          int n_threads)
    void cattn_quantize_rows(uint8_t *q, float *sa, int32_t *za, uint8_t *bad, const float *X,
                             int64_t rsx, int64_t csx, int64_t M, int64_t K)
    int cattn_qgemm_i32(int32_t *acc, const uint8_t *qa, const int8_t *P, int64_t M, int64_t N,
                        int64_t K, int n_threads)
    size_t cattn_q4_packed_bytes(int64_t N, int64_t K)
    uint64_t cattn_read_probe(const void *p, size_t nbytes, int nt) nogil
    ctypedef struct cattn_q4k_scales:
        const uint8_t *sc
        const uint8_t *m
        const uint16_t *D
        const uint16_t *Dmin
    int cattn_linear_int4(float *C, const float *A, const uint8_t *P, const void *d,
                          const void *mn, const cattn_q4k_scales *k, int h16, int z, int64_t M, int64_t N, int64_t K,
                          const float *bias, int act, int n_threads)
    void cattn_quantize_q8_blocks(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                                  uint8_t *bad, const float *X, int64_t M, int64_t K)
    size_t cattn_q8g_packed_bytes(int64_t N, int64_t K)
    size_t cattn_q6g_packed_bytes(int64_t N, int64_t K)
    size_t cattn_q5g_packed_bytes(int64_t N, int64_t K)
    int CATTN_W_F32, CATTN_W_BF16, CATTN_W_INT8, CATTN_W_PLAIN, CATTN_W_INT4, CATTN_W_INT8G
    int CATTN_W_INT6G, CATTN_W_INT5G, CATTN_W_STACK, CATTN_W_BF16DOT
    void cattn_round_bf16_daz(uint16_t *dst, const float *x, int64_t n)
    ctypedef struct cattn_weight:
        int kind
        const void *P
        const float *sw
        const int32_t *colsum
        const float *bias
        int64_t N, K
        int64_t rsw, csw
        const void *mn
        int h16
        const int8_t *sub
        cattn_q4k_scales k
        int z
        int ubits
        const void *parts
        int64_t nparts
    int cattn_linear_weight(const cattn_weight *w, float *y, const float *x, int64_t M, int act,
                            int n_threads)

# The weight kinds of cattn_linear_weight (csrc/cattn.h CATTN_W_*), by the
# format names of cattn/ops/formats.py ("plain": a float32 array, unpacked).
WEIGHT_KINDS = {"float32": CATTN_W_F32, "bfloat16": CATTN_W_BF16, "int8": CATTN_W_INT8,
                "int4": CATTN_W_INT4, "int8g": CATTN_W_INT8G, "int6g": CATTN_W_INT6G,
                "int5g": CATTN_W_INT5G, "stack": CATTN_W_STACK, "plain": CATTN_W_PLAIN,
                "bfloat16dot": CATTN_W_BF16DOT}


cdef const void *_ptr(object a):
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


cdef int _weight(cattn_weight *w, tuple entry) except -1:
    """Fill *w from entry = (kind, data, scale, colsum, bias, N, K, rsw, csw[,
    k[, ubits]]) (None for what the kind lacks; int4, int8g, int6g, int5g: colsum
    is the mins, rsw the zero point, csw the sub-scales or None, k int4's
    two-level scales (sc, m, D, Dmin) or None, ubits int8g's bound: every u
    < 2^ubits, default 8); w points into entry's arrays. A stack (kind
    CATTN_W_STACK): data a uint8 array of weight_struct_bytes() per part
    (filled here), scale the parts' entries (no stack among them)."""
    kind, data, sw, colsum, bias, N, K, rsw, csw = entry[:9]
    cdef cattn_weight *pw
    cdef Py_ssize_t i
    w.parts = NULL
    w.nparts = 0
    if kind == CATTN_W_STACK:
        if (<cnp.ndarray>data).nbytes < len(sw) * sizeof(cattn_weight):
            raise ValueError("a stacked weight's struct buffer is too small")
        pw = <cattn_weight *>cnp.PyArray_DATA(data)
        for i in range(len(sw)):
            if sw[i][0] == CATTN_W_STACK:
                raise ValueError("a stacked weight's part is a stack")
            _weight(&pw[i], sw[i])
        w.parts = pw
        w.nparts = len(sw)
        sw = None
    k = entry[9] if len(entry) > 9 else None
    w.ubits = entry[10] if len(entry) > 10 else 8
    w.k.sc = w.k.m = NULL
    w.k.D = w.k.Dmin = NULL
    if k is not None:
        w.k.sc = <const uint8_t *>_ptr(k[0])
        w.k.m = <const uint8_t *>_ptr(k[1])
        w.k.D = <const uint16_t *>_ptr(k[2])
        w.k.Dmin = <const uint16_t *>_ptr(k[3])
    w.kind = kind
    w.P = _ptr(data)
    w.sw = <const float *>_ptr(sw)
    w.mn = NULL
    w.h16 = 0
    w.z = 0
    w.sub = NULL
    if (kind == CATTN_W_INT4 or kind == CATTN_W_INT8G or kind == CATTN_W_INT6G
            or kind == CATTN_W_INT5G):
        w.mn = _ptr(colsum)
        w.h16 = sw is not None and (<cnp.ndarray>sw).dtype.itemsize == 2
        w.colsum = NULL
        w.z = rsw
        w.sub = <const int8_t *>_ptr(csw)
        rsw = csw = 0
    else:
        w.colsum = <const int32_t *>_ptr(colsum)
    w.bias = <const float *>_ptr(bias)
    w.N = N
    w.K = K
    w.rsw = rsw
    w.csw = csw
    return 0


def linear_weight(tuple entry, cnp.ndarray y, cnp.ndarray x, int64_t M, int act, int n_threads):
    """y (OUT, float32 (M, N) contiguous) = act(x (float32 (M, K) contiguous)
    · W^T + bias) for the weight `entry` (as _weight takes it), by its kind's
    kernel (cattn_linear_weight)."""
    cdef cattn_weight w
    cdef int st
    _weight(&w, entry)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef const float *px = <const float *>cnp.PyArray_DATA(x)
    with nogil:
        st = cattn_linear_weight(&w, py, px, M, act, n_threads)
    _check(st)


def packed_layout(bint f32, int64_t N, int64_t K):
    """(elements, KC) of a packed (N, K) float32 (f32) or float64 weight on this build."""
    if f32:
        return cattn_packed_size_f32(N, K), cattn_packed_kc_f32()
    return cattn_packed_size_f64(N, K), cattn_packed_kc_f64()


def pack_weight(cnp.ndarray P, cnp.ndarray W, int64_t rsw, int64_t csw, int64_t N, int64_t K):
    """P (OUT, packed_layout elements) <- the panels of W (N, K), element (j, p) at
    W[j*rsw + p*csw] (W's data pointer is element (0, 0))."""
    cdef void *pp = cnp.PyArray_DATA(P)
    cdef void *pw = cnp.PyArray_DATA(W)
    if P.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            cattn_pack_weight_f32(<float *>pp, <const float *>pw, rsw, csw, N, K)
    else:
        with nogil:
            cattn_pack_weight_f64(<double *>pp, <const double *>pw, rsw, csw, N, K)


def linear_packed(cnp.ndarray C, int64_t rsc, int64_t csc, cnp.ndarray A, int64_t rsa,
                  int64_t csa, cnp.ndarray P, int64_t M, int64_t N, int64_t K,
                  object bias, int act, int n_threads):
    """C (OUT, (M, N)) = A (M, K) · W^T (+ bias, act) from W's packed float32
    or float64 panels P (strided C and A; bfloat16 and int8: linear_weight)."""
    cdef void *pc = cnp.PyArray_DATA(C)
    cdef void *pa = cnp.PyArray_DATA(A)
    cdef void *pp = cnp.PyArray_DATA(P)
    cdef void *pbias = NULL
    cdef int st
    if bias is not None:
        pbias = cnp.PyArray_DATA(<cnp.ndarray>bias)
    if C.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_linear_packed_f32(<float *>pc, rsc, csc, <const float *>pa, rsa, csa,
                                         <const float *>pp, M, N, K, <const float *>pbias,
                                         act, n_threads)
    else:
        with nogil:
            st = cattn_linear_packed_f64(<double *>pc, rsc, csc, <const double *>pa, rsa, csa,
                                         <const double *>pp, M, N, K, <const double *>pbias,
                                         act, n_threads)
    _check(st)


def read_probe(cnp.ndarray a, int n_threads):
    """The xor of the 64-bit words of a's bytes (a C-contiguous, nbytes a
    multiple of 8), read once by n_threads threads: the benchmarks' read
    bandwidth probe (time it)."""
    if not a.flags.c_contiguous or a.nbytes % 8:
        raise ValueError("read_probe: a must be C-contiguous with a multiple of 8 bytes")
    cdef const void *p = cnp.PyArray_DATA(a)
    cdef size_t n = a.nbytes
    cdef uint64_t r
    with nogil:
        r = cattn_read_probe(p, n, n_threads)
    return r


def q4_packed_bytes(int64_t N, int64_t K):
    """Bytes of an int4 weight's panels (cattn_q4_packed_bytes)."""
    return cattn_q4_packed_bytes(N, K)


def quantize_q8_blocks(cnp.ndarray x):
    """(qx int8 (M, 32 G), sx float32 (M, G), xs int32 (M, G), sxs float32
    (M, G), bad uint8 (M,)) of x (float32 (M, K) contiguous): the int4
    linear's activation quantization (cattn_quantize_q8_blocks)."""
    cdef int64_t M = x.shape[0], K = x.shape[1], G = (K + 31) // 32
    qx = np.empty((M, 32 * G), np.int8)
    sx = np.empty((M, G), np.float32)
    xs = np.empty((M, G), np.int32)
    xs16 = np.empty((M, 2 * G), np.int32)
    sxs = np.empty((M, G), np.float32)
    bad = np.empty(M, np.uint8)
    cattn_quantize_q8_blocks(<int8_t *>cnp.PyArray_DATA(qx), <float *>cnp.PyArray_DATA(sx),
                             <int32_t *>cnp.PyArray_DATA(xs), <int32_t *>cnp.PyArray_DATA(xs16),
                             <float *>cnp.PyArray_DATA(sxs),
                             <uint8_t *>cnp.PyArray_DATA(bad), <const float *>cnp.PyArray_DATA(x),
                             M, K)
    return qx, sx, xs, sxs, bad, xs16


def q8g_packed_bytes(int64_t N, int64_t K):
    """Bytes of an int8g weight's panels (cattn_q8g_packed_bytes)."""
    return cattn_q8g_packed_bytes(N, K)


def q6g_packed_bytes(int64_t N, int64_t K):
    """Bytes of an int6g weight's panels (cattn_q6g_packed_bytes)."""
    return cattn_q6g_packed_bytes(N, K)


def weight_struct_bytes():
    """Bytes of one cattn_weight (a stacked weight's part)."""
    return sizeof(cattn_weight)


def q5g_packed_bytes(int64_t N, int64_t K):
    """Bytes of an int5g weight's panels (cattn_q5g_packed_bytes)."""
    return cattn_q5g_packed_bytes(N, K)


def qpacked_size(int64_t N, int64_t K):
    """Bytes of a packed int8 (N, K) weight."""
    return cattn_qpacked_size(N, K)


def qweight_ok(cnp.ndarray abs_rowsum):
    """True if 255 * sum_k |qw[j, k]| < 2^31 for every j (int32 (N,) contiguous)."""
    return bool(cattn_qweight_ok(<const int32_t *>cnp.PyArray_DATA(abs_rowsum),
                                 abs_rowsum.shape[0]))


def linear_int8(cnp.ndarray C, int64_t rsc, int64_t csc, cnp.ndarray A, int64_t rsa,
                int64_t csa, cnp.ndarray P, cnp.ndarray sw, cnp.ndarray colsum, int64_t M,
                int64_t N, int64_t K, object bias, int act, int n_threads):
    """C (OUT, float32 (M, N)) = int8 linear of A (float32 (M, K)) on the packed P."""
    cdef void *pc = cnp.PyArray_DATA(C)
    cdef void *pa = cnp.PyArray_DATA(A)
    cdef void *pp = cnp.PyArray_DATA(P)
    cdef void *ps = cnp.PyArray_DATA(sw)
    cdef void *pz = cnp.PyArray_DATA(colsum)
    cdef void *pbias = NULL
    cdef int st
    if bias is not None:
        pbias = cnp.PyArray_DATA(<cnp.ndarray>bias)
    with nogil:
        st = cattn_linear_int8(<float *>pc, rsc, csc, <const float *>pa, rsa, csa,
                               <const int8_t *>pp, <const float *>ps, <const int32_t *>pz,
                               M, N, K, <const float *>pbias, act, n_threads)
    _check(st)


def quantize_rows(cnp.ndarray X):
    """(q uint8 (M, K), sa float32 (M,), za int32 (M,), bad bool (M,)) of a
    C-contiguous float32 (M, K) X: the row quantization of the int8 linear."""
    cdef int64_t M = X.shape[0], K = X.shape[1]
    cdef cnp.ndarray q = np.empty((M, K), np.uint8)
    cdef cnp.ndarray sa = np.empty(M, np.float32)
    cdef cnp.ndarray za = np.empty(M, np.int32)
    cdef cnp.ndarray bad = np.empty(M, np.uint8)
    cattn_quantize_rows(<uint8_t *>cnp.PyArray_DATA(q), <float *>cnp.PyArray_DATA(sa),
                        <int32_t *>cnp.PyArray_DATA(za), <uint8_t *>cnp.PyArray_DATA(bad),
                        <const float *>cnp.PyArray_DATA(X), K, 1, M, K)
    return q, sa, za, bad.astype(bool)


def qgemm_i32(cnp.ndarray qa, cnp.ndarray P, int64_t N):
    """The int32 accumulators (M, N) of u8 qa (M, K, C-contiguous) times the
    packed int8 weight P (a test hook: the kernel's exact integer sums)."""
    cdef int64_t M = qa.shape[0], K = qa.shape[1]
    cdef cnp.ndarray acc = np.zeros((M, N), np.int32)
    _check(cattn_qgemm_i32(<int32_t *>cnp.PyArray_DATA(acc), <const uint8_t *>cnp.PyArray_DATA(qa),
                           <const int8_t *>cnp.PyArray_DATA(P), M, N, K, 1))
    return acc


def round_bf16_daz(cnp.ndarray x):
    """The bfloat16 bits (uint16, x's shape) the "bfloat16dot" format rounds
    activations to (csrc/cattn.h: subnormals as 0, then to nearest even); x
    float32, contiguous (a test hook)."""
    cdef cnp.ndarray out = np.empty((<object>x).shape, np.uint16)
    with nogil:
        cattn_round_bf16_daz(<uint16_t *>cnp.PyArray_DATA(out),
                             <const float *>cnp.PyArray_DATA(x), cnp.PyArray_SIZE(x))
    return out
