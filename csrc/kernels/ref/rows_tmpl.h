/* kernels/ref/rows_tmpl.h — the portable row kernels (softmax rows and
 * column blocks, layer norm and RMS norm rows, activations, exp), written
 * once; included by kernels/ref/rows.c with T, SFX and EXP (the scalar exp
 * of vexp.h) defined. Contracts in dispatch.h; numerics in rows.c.
 * Sums are kept in double, so a row of any length keeps T's rounding level.
 */

/* softmax / log-softmax of one contiguous row */
void FN(cattn_softmax_row_ref)(T *y, const T *x, int64_t n, int logsm)
{
    T m = (T)-INFINITY;
    for (int64_t i = 0; i < n; i++) if (x[i] > m) m = x[i];
    if (m == (T)-INFINITY) m = (T)0;
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    if (!logsm) {
        for (; i + 4 <= n; i += 4)
            for (int k = 0; k < 4; k++) { T e = EXP(x[i + k] - m); y[i + k] = e; s[k] += e; }
        for (; i < n; i++) { T e = EXP(x[i] - m); y[i] = e; s[0] += e; }
        const double tot = (s[0] + s[1]) + (s[2] + s[3]);
        const T inv = tot == 0 ? (T)0 : (T)(1.0 / tot);
        for (i = 0; i < n; i++) y[i] *= inv;
    } else {
        for (; i + 4 <= n; i += 4)
            for (int k = 0; k < 4; k++) s[k] += EXP(x[i + k] - m);
        for (; i < n; i++) s[0] += EXP(x[i] - m);
        const double tot = (s[0] + s[1]) + (s[2] + s[3]);
        const T lse = tot == 0 ? (T)0 : (T)log(tot);
        for (i = 0; i < n; i++) y[i] = (x[i] - m) - lse;
    }
}

/* the same along n rows of w <= COLS adjacent columns: (i, j) at x[i*xs + j] */
void FN(cattn_softmax_cols_ref)(T *y, int64_t ys, const T *x, int64_t xs,
                                int64_t n, int64_t w, int logsm)
{
    T m[COLS];
    double s[COLS];
    for (int64_t j = 0; j < w; j++) { m[j] = (T)-INFINITY; s[j] = 0; }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < w; j++) if (x[i * xs + j] > m[j]) m[j] = x[i * xs + j];
    for (int64_t j = 0; j < w; j++) if (m[j] == (T)-INFINITY) m[j] = (T)0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < w; j++) {
            T e = EXP(x[i * xs + j] - m[j]);
            if (!logsm) y[i * ys + j] = e;
            s[j] += e;
        }
    T f[COLS];
    for (int64_t j = 0; j < w; j++)
        f[j] = s[j] == 0 ? (T)0 : logsm ? (T)log(s[j]) : (T)(1.0 / s[j]);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < w; j++) {
            if (logsm) y[i * ys + j] = (x[i * xs + j] - m[j]) - f[j];
            else y[i * ys + j] *= f[j];
        }
}

/* layer norm of one row: two passes in double (mean, then centered
 * squares with the two-pass correction c = mean of the centered values) */
void FN(cattn_layer_norm_row_ref)(T *y, const T *x, const T *w, const T *b, int64_t n,
                                  double eps)
{
    double s = 0, s1 = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    const double mu = s / (double)n;
    for (int64_t i = 0; i < n; i++) { const double d = x[i] - mu; s1 += d; ss += d * d; }
    const double c = s1 / (double)n;                   /* correction of the mean */
    const double var = (ss - s1 * c) / (double)n;
    const double rstd = 1.0 / sqrt((var > 0 ? var : 0) + eps);
    for (int64_t i = 0; i < n; i++) {
        double t = (((double)x[i] - mu) - c) * rstd;
        if (w) t *= w[i];
        if (b) t += b[i];
        y[i] = (T)t;
    }
}

/* RMS norm of one row: y = x / sqrt(mean(x^2) + eps) * w, in double */
void FN(cattn_rms_norm_row_ref)(T *y, const T *x, const T *w, int64_t n, double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const double rstd = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (T)(w ? x[i] * rstd * w[i] : x[i] * rstd);
}

/* y = act(x) elementwise, in double (act_* of rows.c) */
void FN(cattn_act_ref)(T *y, const T *x, int64_t n, int act)
{
    switch (act) {
    case CATTN_ACT_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < (T)0 ? (T)0 : x[i];
        break;
    case CATTN_ACT_GELU:
        for (int64_t i = 0; i < n; i++) y[i] = (T)act_gelu(x[i]);
        break;
    case CATTN_ACT_GELU_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = (T)act_gelu_tanh(x[i]);
        break;
    case CATTN_ACT_SILU:
        for (int64_t i = 0; i < n; i++) y[i] = (T)act_silu(x[i]);
        break;
    default:
        if (y != x) memmove(y, x, sizeof(T) * (size_t)n);
        break;
    }
}

/* y = exp(x) (vexp.h semantics); nonpos is the SIMD paths' x <= 0 variant */
void FN(cattn_exp_ref)(T *y, const T *x, int64_t n, int nonpos)
{
    (void)nonpos;
    for (int64_t i = 0; i < n; i++) y[i] = EXP(x[i]);
}

/* the includer's parameters */
#undef T
#undef SFX
#undef EXP
#undef COLS
