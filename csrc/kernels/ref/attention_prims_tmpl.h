/* kernels/ref/attention_prims_tmpl.h — portable primitives of the attention
 * tiles, written once; included by kernels/ref/attention.c with T, SFX and
 * EXP (the scalar exp of vexp.h) defined. Contracts as in
 * kernels/attention_tiles_tmpl.h. */

/* x[i] = exp(x[i] - m[i]); l[i] += x[i] */
static inline void FN(expsub_ref)(T *x, const T *m, T *l, int64_t n)
{
    for (int64_t i = 0; i < n; i++) { x[i] = EXP(x[i] - m[i]); l[i] += x[i]; }
}

/* x[s] = exp(x[s] - m); returns the sum, in order */
static inline T FN(expsum_ref)(T *x, T m, int64_t n)
{
    T sum = 0;
    for (int64_t s = 0; s < n; s++) { x[s] = EXP(x[s] - m); sum += x[s]; }
    return sum;
}

/* o[j] = sum over s with p[s] != 0 of p[s] V[s*rsv + j] */
static inline void FN(pv_rows_ref)(T *o, const T *p, const T *V, int64_t rsv, int64_t n, int64_t Ev)
{
    for (int64_t j = 0; j < Ev; j++) o[j] = 0;
    for (int64_t s = 0; s < n; s++) {
        if (p[s] == (T)0) continue;
        for (int64_t j = 0; j < Ev; j++) o[j] += p[s] * V[s * rsv + j];
    }
}

/* the includer's parameters */
#undef T
#undef SFX
#undef EXP
