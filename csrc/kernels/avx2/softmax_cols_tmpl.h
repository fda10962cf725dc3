/* kernels/avx2/softmax_cols_tmpl.h — softmax / log-softmax of a block of
 * w <= 4 VL adjacent columns along n rows, element (i, j) at x[i*xs + j],
 * written once; included by kernels/avx2/rows.c with T, V (the vector
 * type), VL (lanes), VS (the intrinsics' suffix: ps / pd) and SFX defined.
 * Full blocks use plain loads; an edge block (w < 4 VL) masks the lanes
 * past w (maskload reads 0 there, maskstore leaves memory alone).
 * Numerics as the row kernels: column max (NaN ignored), sums of
 * exp(x - m) in blocks of 64 rows in T, then added in double. */
#define VOP__(op, s) _mm256_##op##_##s
#define VOP_(op, s) VOP__(op, s)
#define VOP(op) VOP_(op, VS)
#define VEXP_(s) cattn_expneg256_##s
#define VEXP(s) VEXP_(s)
#define LD(p, v) (masked ? VOP(maskload)((p), mask[v]) : VOP(loadu)(p))
#define ST(p, v, val) do { if (masked) VOP(maskstore)((p), mask[v], (val)); \
                            else VOP(storeu)((p), (val)); } while (0)

/* masked is a constant at each call: the branches fold away */
static inline __attribute__((always_inline))
void FN(smx_cols_body)(T *y, int64_t ys, const T *x, int64_t xs, int64_t n,
                              int64_t w, int logsm, const int masked)
{
    enum { NV = 4 };
    __m256i mask[NV];
    for (int v = 0; v < NV; v++) {
        int32_t lanes[8];                   /* 32-bit halves of a T lane share its bit */
        for (int e = 0; e < 8; e++) lanes[e] = v * VL + e * VL / 8 < w ? -1 : 0;
        mask[v] = _mm256_loadu_si256((const __m256i *)lanes);
    }
    const V ninf = VOP(set1)((T)-INFINITY);
    V m[NV], s[NV], f[NV];
    double sd[NV * VL];
    for (int k = 0; k < NV * VL; k++) sd[k] = 0;
    for (int v = 0; v < NV; v++) m[v] = ninf;
    for (int64_t i = 0; i < n; i++)                                  /* max */
        for (int v = 0; v < NV; v++) m[v] = VOP(max)(LD(x + i * xs + v * VL, v), m[v]);
    for (int v = 0; v < NV; v++)            /* no finite value: base 0 */
        m[v] = VOP(blendv)(m[v], VOP(setzero)(), VOP(cmp)(m[v], ninf, _CMP_EQ_OQ));
    for (int64_t i0 = 0; i0 < n; i0 += 64) {                         /* sums */
        const int64_t i1 = i0 + 64 < n ? i0 + 64 : n;
        for (int v = 0; v < NV; v++) s[v] = VOP(setzero)();
        for (int64_t i = i0; i < i1; i++)
            for (int v = 0; v < NV; v++) {
                V e = VEXP(VS)(VOP(sub)(LD(x + i * xs + v * VL, v), m[v]));
                if (!logsm) ST(y + i * ys + v * VL, v, e);
                s[v] = VOP(add)(s[v], e);
            }
        for (int v = 0; v < NV; v++) {
            T t[VL] __attribute__((aligned(32)));
            VOP(store)(t, s[v]);
            for (int k = 0; k < VL; k++) sd[v * VL + k] += (double)t[k];
        }
    }
    for (int v = 0; v < NV; v++) {          /* 1/s or log(s); a zero sum gives 0 */
        T t[VL] __attribute__((aligned(32)));
        for (int k = 0; k < VL; k++) {
            const double sk = sd[v * VL + k];
            t[k] = sk == 0 ? (T)0 : (T)(logsm ? log(sk) : 1.0 / sk);
        }
        f[v] = VOP(load)(t);
    }
    for (int64_t i = 0; i < n; i++)
        for (int v = 0; v < NV; v++) {
            if (logsm)
                ST(y + i * ys + v * VL, v, VOP(sub)(VOP(sub)(LD(x + i * xs + v * VL, v), m[v]), f[v]));
            else
                ST(y + i * ys + v * VL, v, VOP(mul)(LD(y + i * ys + v * VL, v), f[v]));
        }
}

void FN(cattn_softmax_cols_avx2)(T *y, int64_t ys, const T *x, int64_t xs,
                                        int64_t n, int64_t w, int logsm)
{
    if (w == 4 * VL) FN(smx_cols_body)(y, ys, x, xs, n, w, logsm, 0);
    else FN(smx_cols_body)(y, ys, x, xs, n, w, logsm, 1);
}

#undef ST
#undef LD
#undef VEXP
#undef VEXP_
#undef VOP
#undef VOP_
#undef VOP__
/* the includer's parameters */
#undef T
#undef V
#undef VL
#undef VS
#undef SFX
