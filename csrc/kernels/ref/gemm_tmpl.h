/* kernels/ref/gemm_tmpl.h — portable C kernels of the GEMM family, written
 * once; included by kernels/ref/gemm.c with T, SFX, MR, NR defined.
 * Accumulation in increasing p, so the portable and SIMD paths differ only
 * by FMA rounding. Contracts in dispatch.h.
 */

/* c[MR,NR] (=|+=) sum_p a[p*lak + i*lai] * b[p*ldb + j] */
void FN(cattn_ukr_ref)(int64_t k, const T *a, int64_t lak, int64_t lai,
                       const T *b, int64_t ldb, T *c, int64_t ldc, int acc)
{
    T t[MR][NR] = {{0}};
    for (int64_t p = 0; p < k; p++)
        for (int i = 0; i < MR; i++) {
            const T ai = a[p * lak + i * lai];
            for (int j = 0; j < NR; j++) t[i][j] += ai * b[p * ldb + j];
        }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];
}

/* out[s] = q · K[s*rsk : +E] for s < n */
void FN(cattn_dotn_ref)(T *out, const T *q, const T *K, int64_t rsk, int64_t n, int64_t E)
{
    for (int64_t s = 0; s < n; s++) {
        T acc = 0;
        for (int64_t e = 0; e < E; e++) acc += q[e] * K[s * rsk + e];
        out[s] = acc;
    }
}

/* the includer's parameters */
#undef T
#undef SFX
#undef MR
#undef NR
