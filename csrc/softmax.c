/* softmax.c — numerically stable softmax and log-softmax along any axis:
 * the threaded driver over an (outer, n, inner) view, and the portable C
 * row / column kernels (the AVX2 ones are in rows_avx2.c).
 * Not here: attention's online softmax (attention.c keeps its own running
 * max and sum per tile).
 *
 * Shape legend: a softmax "row" is the n values along the reduced axis;
 * outer and inner are the products of the dims before and after it.
 *
 * Numerics, shared by every kernel:
 *   m = max(row), NaN ignored; m = 0 when the row has no value above -inf
 *   s = sum exp(x - m) (with the vector exp, 0 below the underflow point)
 *   softmax: y = exp(x - m) * (1/s), and y = 0 when s == 0 (row of -inf)
 *   log:     y = (x - m) - log(s),  and log(s) := 0 when s == 0, so y = -inf
 * A NaN anywhere in a row gives s = NaN, so the whole row (and only it) is
 * NaN; +inf gives inf - inf = NaN likewise. x - m is exact when x is close
 * to m (Sterbenz), so rows like 1e4 + noise keep full precision.
 * Sums are kept in double (AVX2 float32: blocks summed in float lanes, then
 * added in double), so a row of any length keeps float rounding level.
 */
#include <math.h>
#include "kernels.h"
#include "vexp.h"

/* ---- portable kernels ---- */

#define SMX_ROW_REF(SFX, T, ACC, EXP, LOG)                                       \
void cattn_softmax_row_ref_##SFX(T *y, const T *x, int64_t n, int logsm)         \
{                                                                                \
    T m = (T)-INFINITY;                                                          \
    for (int64_t i = 0; i < n; i++) if (x[i] > m) m = x[i];                      \
    if (m == (T)-INFINITY) m = (T)0;                                             \
    ACC s[4] = {0, 0, 0, 0};                                                     \
    int64_t i = 0;                                                               \
    if (!logsm) {                                                                \
        for (; i + 4 <= n; i += 4)                                               \
            for (int k = 0; k < 4; k++) { T e = EXP(x[i + k] - m); y[i + k] = e; s[k] += e; } \
        for (; i < n; i++) { T e = EXP(x[i] - m); y[i] = e; s[0] += e; }         \
        const ACC tot = (s[0] + s[1]) + (s[2] + s[3]);                           \
        const T inv = tot == 0 ? (T)0 : (T)((ACC)1 / tot);                       \
        for (i = 0; i < n; i++) y[i] *= inv;                                     \
    } else {                                                                     \
        for (; i + 4 <= n; i += 4)                                               \
            for (int k = 0; k < 4; k++) s[k] += EXP(x[i + k] - m);               \
        for (; i < n; i++) s[0] += EXP(x[i] - m);                                \
        const ACC tot = (s[0] + s[1]) + (s[2] + s[3]);                           \
        const T lse = tot == 0 ? (T)0 : (T)LOG(tot);                             \
        for (i = 0; i < n; i++) y[i] = (x[i] - m) - lse;                         \
    }                                                                            \
}

SMX_ROW_REF(f32, float, double, cattn_exp_f32, log)
SMX_ROW_REF(f64, double, double, cattn_exp_f64, log)

/* w <= COLS adjacent columns of n rows: element (i, j) at x[i*xs + j] */
#define SMX_COLS_REF(SFX, T, ACC, COLS, EXP, LOG)                                \
void cattn_softmax_cols_ref_##SFX(T *y, int64_t ys, const T *x, int64_t xs,      \
                                  int64_t n, int64_t w, int logsm)               \
{                                                                                \
    T m[COLS];                                                                   \
    ACC s[COLS];                                                                 \
    for (int64_t j = 0; j < w; j++) { m[j] = (T)-INFINITY; s[j] = 0; }           \
    for (int64_t i = 0; i < n; i++)                                              \
        for (int64_t j = 0; j < w; j++) if (x[i * xs + j] > m[j]) m[j] = x[i * xs + j]; \
    for (int64_t j = 0; j < w; j++) if (m[j] == (T)-INFINITY) m[j] = (T)0;       \
    for (int64_t i = 0; i < n; i++)                                              \
        for (int64_t j = 0; j < w; j++) {                                        \
            T e = EXP(x[i * xs + j] - m[j]);                                     \
            if (!logsm) y[i * ys + j] = e;                                       \
            s[j] += e;                                                           \
        }                                                                        \
    T f[COLS];                                                                   \
    for (int64_t j = 0; j < w; j++)                                              \
        f[j] = s[j] == 0 ? (T)0 : logsm ? (T)LOG(s[j]) : (T)((ACC)1 / s[j]);     \
    for (int64_t i = 0; i < n; i++)                                              \
        for (int64_t j = 0; j < w; j++) {                                        \
            if (logsm) y[i * ys + j] = (x[i * xs + j] - m[j]) - f[j];            \
            else y[i * ys + j] *= f[j];                                          \
        }                                                                        \
}

SMX_COLS_REF(f32, float, double, CATTN_SMX_COLS_F32, cattn_exp_f32, log)
SMX_COLS_REF(f64, double, double, CATTN_SMX_COLS_F64, cattn_exp_f64, log)

/* ---- the driver: (outer, n, inner) -> row or column kernels ----
 * cattn_softmax_{f32,f64}: y = softmax(x) (logsm = 0) or log_softmax(x)
 * (logsm = 1) along the middle axis.
 *   y: (outer, n, inner), element (o,i,j) at y[o*yso + i*ysn + j*ysi]
 *   x: (outer, n, inner), element (o,i,j) at x[o*xso + i*xsn + j*xsi]
 * y may equal x exactly (same pointer and strides); no other overlap.
 * Unit inner strides take the column kernel (blocks of COLS columns, inner
 * vectorized, no transpose); otherwise rows, gathered into per-thread
 * scratch (allocated once per call) when their element stride is not 1. */

#define SMX_DRIVER(SFX, T, COLS)                                                 \
int cattn_softmax_##SFX(T *y, int64_t yso, int64_t ysn, int64_t ysi,             \
                        const T *x, int64_t xso, int64_t xsn, int64_t xsi,       \
                        int64_t outer, int64_t n, int64_t inner, int logsm,      \
                        int n_threads)                                           \
{                                                                                \
    cattn_init();                                                                \
    if (outer <= 0 || n <= 0 || inner <= 0) return CATTN_OK;                     \
    const int nt = cattn_rows_threads(outer * n * inner, n_threads);             \
    if (inner > 1 && xsi == 1 && ysi == 1) {                                     \
        /* columns: units of (outer index, block of COLS columns) */             \
        const cattn_smx_cols_##SFX##_t cols = cattn_kt.softmax_cols_##SFX;       \
        const int64_t nblk = cattn_cdiv(inner, COLS), units = outer * nblk;      \
        CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)) \
        for (int64_t u = 0; u < units; u++) {                                    \
            const int64_t o = u / nblk, j0 = (u % nblk) * COLS;                  \
            cols(y + o * yso + j0, ysn, x + o * xso + j0, xsn, n,                \
                 cattn_min64(COLS, inner - j0), logsm);                          \
        }                                                                        \
        return CATTN_OK;                                                         \
    }                                                                            \
    /* rows: row (o, j) starts at x + o*xso + j*xsi, elements xsn apart */       \
    const cattn_smx_row_##SFX##_t row = cattn_kt.softmax_row_##SFX;              \
    const int gather = xsn != 1, scatter = ysn != 1;                             \
    const int64_t ld = cattn_round_up(n, 16);                                    \
    T *buf = NULL;                                                               \
    if (gather || scatter) {                                                     \
        buf = cattn_aligned_alloc(sizeof(T) * (size_t)ld * (size_t)nt);          \
        if (!buf) return CATTN_ENOMEM;                                           \
    }                                                                            \
    const int64_t rows = outer * inner, rc = cattn_rows_chunk(n);                \
    (void)rc;                                   /* unused without OpenMP */      \
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, rc) if (nt > 1)) \
    for (int64_t r = 0; r < rows; r++) {                                         \
        T *tmp = buf ? buf + ld * CATTN_TID() : NULL;                            \
        const int64_t o = r / inner, j = r % inner;                              \
        const T *xr = x + o * xso + j * xsi;                                     \
        T *yr = y + o * yso + j * ysi;                                           \
        if (gather) for (int64_t i = 0; i < n; i++) tmp[i] = xr[i * xsn];        \
        row(scatter ? tmp : yr, gather ? tmp : xr, n, logsm);                    \
        if (scatter) for (int64_t i = 0; i < n; i++) yr[i * ysn] = tmp[i];       \
    }                                                                            \
    cattn_aligned_free(buf);                                                     \
    return CATTN_OK;                                                             \
}

SMX_DRIVER(f32, float, CATTN_SMX_COLS_F32)
SMX_DRIVER(f64, double, CATTN_SMX_COLS_F64)
