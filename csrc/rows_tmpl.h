/* rows_tmpl.h — the threaded drivers of the row-wise ops, written once;
 * included by rows.c for T = float / double with SFX, COLS defined.
 * Each driver splits rows (or fixed chunks, or column blocks) over threads
 * and calls the dispatch table's kernel per row: which thread computes a
 * value never changes it. Contracts in cattn.h.
 */
#define KT(name) cattn_kt.CATTN_CAT2(name, SFX)

/* softmax along the middle axis of an (outer, n, inner) view. Unit inner
 * strides take the column kernel (blocks of COLS columns, inner vectorized,
 * no transpose); otherwise rows, gathered into per-thread scratch
 * (allocated once per call) when their element stride is not 1. */
int FN(cattn_softmax)(T *y, int64_t yso, int64_t ysn, int64_t ysi,
                      const T *x, int64_t xso, int64_t xsn, int64_t xsi,
                      int64_t outer, int64_t n, int64_t inner, int logsm, int n_threads)
{
    cattn_init();
    if (outer <= 0 || n <= 0 || inner <= 0) return CATTN_OK;
    const int nt = cattn_rows_threads(outer * n * inner, n_threads);
    (void)nt;                                   /* unused without OpenMP */
    if (inner > 1 && xsi == 1 && ysi == 1) {
        /* columns: units of (outer index, block of COLS columns) */
        const int64_t nblk = cattn_cdiv(inner, COLS), units = outer * nblk;
        CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1))
        for (int64_t u = 0; u < units; u++) {
            const int64_t o = u / nblk, j0 = (u % nblk) * COLS;
            KT(softmax_cols)(y + o * yso + j0, ysn, x + o * xso + j0, xsn, n,
                             cattn_min64(COLS, inner - j0), logsm);
        }
        return CATTN_OK;
    }
    /* rows: row (o, j) starts at x + o*xso + j*xsi, elements xsn apart */
    const int gather = xsn != 1, scatter = ysn != 1;
    const int64_t ld = cattn_round_up(n, 16);
    T *buf = NULL;
    if (gather || scatter) {
        buf = cattn_aligned_alloc(sizeof(T) * (size_t)ld * (size_t)nt);
        if (!buf) return CATTN_ENOMEM;
    }
    const int64_t rows = outer * inner, rc = cattn_rows_chunk(n);
    (void)rc;
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, rc) if (nt > 1))
    for (int64_t r = 0; r < rows; r++) {
        T *tmp = buf ? buf + ld * CATTN_TID() : NULL;
        const int64_t o = r / inner, j = r % inner;
        const T *xr = x + o * xso + j * xsi;
        T *yr = y + o * yso + j * ysi;
        if (gather) for (int64_t i = 0; i < n; i++) tmp[i] = xr[i * xsn];
        KT(softmax_row)(scatter ? tmp : yr, gather ? tmp : xr, n, logsm);
        if (scatter) for (int64_t i = 0; i < n; i++) yr[i * ysn] = tmp[i];
    }
    cattn_aligned_free(buf);
    return CATTN_OK;
}

/* layer norm (rms = 0) or RMS norm (rms = 1, bias unused), rows handed
 * out in chunks of cattn_rows_chunk(n) */
static int FN(norm_rows)(T *y, int64_t ys, const T *x, int64_t xs, const T *weight,
                         const T *bias, int64_t rows, int64_t n, double eps, int rms,
                         int n_threads)
{
    cattn_init();
    if (rows <= 0 || n <= 0) return CATTN_OK;
    const int nt = cattn_rows_threads(rows * n, n_threads);
    const int64_t rc = cattn_rows_chunk(n);
    (void)nt; (void)rc;
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, rc) if (nt > 1))
    for (int64_t r = 0; r < rows; r++) {
        if (rms) KT(rms_norm_row)(y + r * ys, x + r * xs, weight, n, eps);
        else KT(layer_norm_row)(y + r * ys, x + r * xs, weight, bias, n, eps);
    }
    return CATTN_OK;
}

int FN(cattn_layer_norm)(T *y, int64_t ys, const T *x, int64_t xs, const T *weight,
                         const T *bias, int64_t rows, int64_t n, double eps, int n_threads)
{
    return FN(norm_rows)(y, ys, x, xs, weight, bias, rows, n, eps, 0, n_threads);
}

int FN(cattn_rms_norm)(T *y, int64_t ys, const T *x, int64_t xs, const T *weight,
                       int64_t rows, int64_t n, double eps, int n_threads)
{
    return FN(norm_rows)(y, ys, x, xs, weight, NULL, rows, n, eps, 1, n_threads);
}

/* activations: units of (row, chunk of CATTN_ACT_CHUNK elements), dynamic */
int FN(cattn_act)(T *y, int64_t ys, const T *x, int64_t xs, int64_t rows, int64_t n,
                  int act, int n_threads)
{
    cattn_init();
    if (rows <= 0 || n <= 0) return CATTN_OK;
    const int64_t nch = cattn_cdiv(n, CATTN_ACT_CHUNK), units = rows * nch;
    const int nt = cattn_rows_threads_min(rows * n, CATTN_ACT_MIN_PER_THREAD, n_threads);
    (void)nt;
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1))
    for (int64_t u = 0; u < units; u++) {
        const int64_t r = u / nch, c = (u % nch) * CATTN_ACT_CHUNK;
        KT(act)(y + r * ys + c, x + r * xs + c, cattn_min64(CATTN_ACT_CHUNK, n - c), act);
    }
    return CATTN_OK;
}

/* y[i] = exp(x[i]) on the selected path (a test hook) */
int FN(cattn_vexp)(T *y, const T *x, int64_t n, int nonpos)
{
    cattn_init();
    if (n > 0) KT(exp)(y, x, n, nonpos);
    return CATTN_OK;
}

#undef KT
/* the includer's parameters */
#undef T
#undef SFX
#undef COLS
