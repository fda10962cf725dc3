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
    """C (OUT, (M, N)) = A (M, K) · W^T (+ bias, act) from W's packed panels P."""
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
