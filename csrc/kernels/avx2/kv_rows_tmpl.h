/* kernels/avx2/kv_rows_tmpl.h — the attention decode's two row loops over
 * K / V rows of one element type, written once (included with a float32
 * and a float16 element: a float16 KV cache gives the bits of its values
 * widened to float32, the loops doing the same operations in the same
 * order). The includer defines:
 *   KV_T          the element type of K and V (float, or uint16_t: float16)
 *   KV_LOAD8(p)   8 elements at p as a __m256 (exact)
 *   KV_LOAD1(x)   one element as a float (exact)
 *   KV_DOTN, KV_PV  the two functions' names (each optional: defined, it is made)
 * KV_DOTN(out, q, K, rsk, n, E):  out[s] = q[0:E] · K[s*rsk : +E] for s < n
 *   (8 keys a pass in 8 FMA chains, E's tail by scalar FMAs);
 * KV_PV(o, p, V, rsv, n, Ev):  o[j] = sum over s with p[s] != 0 of p[s] V[s*rsv + j]
 *   (64 columns in 8 ymm a pass over the keys, then 8, then scalar FMAs).
 * q, p, out, o float32; q: (E,) contiguous; K: (n, E), V: (n, Ev) rows. */

#ifdef KV_DOTN
static void KV_DOTN(float *out, const float *q, const KV_T *K, int64_t rsk, int64_t n,
                    int64_t E)
{
    const int64_t E8 = E & ~(int64_t)7;
    int64_t s = 0;
    for (; s + 8 <= n; s += 8) {                        /* 8 keys: 8 FMA chains */
        const KV_T *k0 = K + s * rsk;
        __m256 a[8];
        for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
        for (int64_t e = 0; e < E8; e += 8) {
            const __m256 qv = _mm256_loadu_ps(q + e);
            for (int r = 0; r < 8; r++)
                a[r] = _mm256_fmadd_ps(qv, KV_LOAD8(k0 + r * rsk + e), a[r]);
        }
        __m256 sums = hsum8_ps(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        if (E8 < E) {                                                    /* tail */
            float t[8];
            _mm256_storeu_ps(t, sums);
            for (int r = 0; r < 8; r++)
                for (int64_t e = E8; e < E; e++)
                    t[r] = __builtin_fmaf(q[e], KV_LOAD1(k0[r * rsk + e]), t[r]);
            sums = _mm256_loadu_ps(t);
        }
        _mm256_storeu_ps(out + s, sums);
    }
    for (; s < n; s++) {
        const KV_T *k0 = K + s * rsk;
        __m256 a0 = _mm256_setzero_ps();
        for (int64_t e = 0; e < E8; e += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), KV_LOAD8(k0 + e), a0);
        float r0 = hsum_ps(a0);
        for (int64_t e = E8; e < E; e++) r0 = __builtin_fmaf(q[e], KV_LOAD1(k0[e]), r0);
        out[s] = r0;
    }
}
#endif

#ifdef KV_PV
static void KV_PV(float *o, const float *p, const KV_T *V, int64_t rsv, int64_t n, int64_t Ev)
{
    int64_t j = 0;
    for (; j + 64 <= Ev; j += 64) {
        __m256 a[8];
        for (int t = 0; t < 8; t++) a[t] = _mm256_setzero_ps();
        for (int64_t s = 0; s < n; s++) {
            const KV_T *vs = V + s * rsv + j;
            if (p[s] == 0.0f) continue;
            const __m256 ps = _mm256_broadcast_ss(p + s);
            for (int t = 0; t < 8; t++) a[t] = _mm256_fmadd_ps(ps, KV_LOAD8(vs + 8 * t), a[t]);
        }
        for (int t = 0; t < 8; t++) _mm256_storeu_ps(o + j + 8 * t, a[t]);
    }
    for (; j + 8 <= Ev; j += 8) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t s = 0; s < n; s++)
            if (p[s] != 0.0f) a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + s), KV_LOAD8(V + s * rsv + j), a);
        _mm256_storeu_ps(o + j, a);
    }
    for (; j < Ev; j++) {                                               /* tail */
        float a = 0;
        for (int64_t s = 0; s < n; s++)
            if (p[s] != 0.0f) a = __builtin_fmaf(p[s], KV_LOAD1(V[s * rsv + j]), a);
        o[j] = a;
    }
}
#endif

#undef KV_T
#undef KV_LOAD8
#undef KV_LOAD1
#undef KV_DOTN
#undef KV_PV
