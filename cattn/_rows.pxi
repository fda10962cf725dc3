# _rows.pxi — row-wise kernels (csrc/rows.c). Included by _ext.pyx.
#   softmax / log_softmax over the middle axis of an (outer, n, inner) view,
#   layer_norm / rms_norm over rows, elementwise activations, the exp hook.
# Callers (cattn/ops/rows.py) validated everything: arrays are float32 or
# float64 with the dtype of `y`, aligned, strides in whole elements; the
# pointer passed is each array's data pointer, element (0, ..., 0).

cdef extern from "cattn.h" nogil:
    int cattn_softmax_f32(float *y, int64_t yso, int64_t ysn, int64_t ysi,
                          const float *x, int64_t xso, int64_t xsn, int64_t xsi,
                          int64_t outer, int64_t n, int64_t inner, int logsm, int n_threads)
    int cattn_softmax_f64(double *y, int64_t yso, int64_t ysn, int64_t ysi,
                          const double *x, int64_t xso, int64_t xsn, int64_t xsi,
                          int64_t outer, int64_t n, int64_t inner, int logsm, int n_threads)
    int cattn_layer_norm_f32(float *y, int64_t ys, const float *x, int64_t xs,
                             const float *weight, const float *bias,
                             int64_t rows, int64_t n, double eps, int n_threads)
    int cattn_layer_norm_f64(double *y, int64_t ys, const double *x, int64_t xs,
                             const double *weight, const double *bias,
                             int64_t rows, int64_t n, double eps, int n_threads)
    int cattn_rms_norm_f32(float *y, int64_t ys, const float *x, int64_t xs,
                           const float *weight, int64_t rows, int64_t n, double eps,
                           int n_threads)
    int cattn_rms_norm_f64(double *y, int64_t ys, const double *x, int64_t xs,
                           const double *weight, int64_t rows, int64_t n, double eps,
                           int n_threads)
    int cattn_act_f32(float *y, int64_t ys, const float *x, int64_t xs,
                      int64_t rows, int64_t n, int act, int n_threads)
    int cattn_act_f64(double *y, int64_t ys, const double *x, int64_t xs,
                      int64_t rows, int64_t n, int act, int n_threads)
    int cattn_vexp_f32(float *y, const float *x, int64_t n, int nonpos)
    int cattn_vexp_f64(double *y, const double *x, int64_t n, int nonpos)


cdef inline void *_ptr_or_null(object a):
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


def softmax(cnp.ndarray y, int64_t yso, int64_t ysn, int64_t ysi,
            cnp.ndarray x, int64_t xso, int64_t xsn, int64_t xsi,
            int64_t outer, int64_t n, int64_t inner, bint log, int n_threads):
    """y (OUT) = softmax / log_softmax of x (IN) along n of (outer, n, inner);
    strides in elements; y may be x itself (same pointer and strides)."""
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef int st
    if y.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_softmax_f32(<float *>py, yso, ysn, ysi, <const float *>px, xso, xsn, xsi,
                                   outer, n, inner, log, n_threads)
    else:
        with nogil:
            st = cattn_softmax_f64(<double *>py, yso, ysn, ysi, <const double *>px, xso, xsn, xsi,
                                   outer, n, inner, log, n_threads)
    _check(st)


def layer_norm(cnp.ndarray y, int64_t ys, cnp.ndarray x, int64_t xs, object weight,
               object bias, int64_t rows, int64_t n, double eps, int n_threads):
    """y (OUT, rows x n, unit column stride) = layer norm of x (IN) per row;
    weight / bias (IN): contiguous (n,) or None."""
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pw = _ptr_or_null(weight)
    cdef void *pb = _ptr_or_null(bias)
    cdef int st
    if y.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_layer_norm_f32(<float *>py, ys, <const float *>px, xs, <const float *>pw,
                                      <const float *>pb, rows, n, eps, n_threads)
    else:
        with nogil:
            st = cattn_layer_norm_f64(<double *>py, ys, <const double *>px, xs, <const double *>pw,
                                      <const double *>pb, rows, n, eps, n_threads)
    _check(st)


def rms_norm(cnp.ndarray y, int64_t ys, cnp.ndarray x, int64_t xs, object weight,
             int64_t rows, int64_t n, double eps, int n_threads):
    """y (OUT, rows x n) = RMS norm of x (IN) per row; weight (IN): (n,) or None."""
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pw = _ptr_or_null(weight)
    cdef int st
    if y.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_rms_norm_f32(<float *>py, ys, <const float *>px, xs, <const float *>pw,
                                    rows, n, eps, n_threads)
    else:
        with nogil:
            st = cattn_rms_norm_f64(<double *>py, ys, <const double *>px, xs, <const double *>pw,
                                    rows, n, eps, n_threads)
    _check(st)


def activation(cnp.ndarray y, int64_t ys, cnp.ndarray x, int64_t xs,
               int64_t rows, int64_t n, int act, int n_threads):
    """y (OUT, rows x n, unit column stride) = act(x) (IN); y may be x itself."""
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef int st
    if y.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_act_f32(<float *>py, ys, <const float *>px, xs, rows, n, act, n_threads)
    else:
        with nogil:
            st = cattn_act_f64(<double *>py, ys, <const double *>px, xs, rows, n, act, n_threads)
    _check(st)


def vexp(x, bint nonpositive=False):
    """Test hook: exp of a float32 / float64 array through the selected
    kernel path's vector exp (AVX-512, AVX2 or portable), single-threaded. Returns a
    new C-contiguous array of x's shape and dtype. nonpositive=True: the
    variant for x <= 0 used by softmax and the activations (its results for
    x > 0 are meaningless)."""
    import numpy
    # C-contiguous AND aligned (ascontiguousarray keeps unaligned data as is)
    cdef cnp.ndarray xa = numpy.require(x, None, ["C", "A"])
    if xa.dtype.num != cnp.NPY_FLOAT32 and xa.dtype.num != cnp.NPY_FLOAT64:
        raise TypeError(f"vexp: x has dtype {xa.dtype}; only float32 and float64 are supported")
    cdef cnp.ndarray ya = numpy.empty_like(xa)
    cdef void *py = cnp.PyArray_DATA(ya)
    cdef void *px = cnp.PyArray_DATA(xa)
    cdef int64_t n = xa.size
    cdef int st
    if xa.dtype.num == cnp.NPY_FLOAT32:
        with nogil:
            st = cattn_vexp_f32(<float *>py, <const float *>px, n, nonpositive)
    else:
        with nogil:
            st = cattn_vexp_f64(<double *>py, <const double *>px, n, nonpositive)
    _check(st)
    return ya
