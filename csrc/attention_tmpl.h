/* attention_tmpl.h — fused multi-head attention, written once; included by
 * attention.c (portable C) and attention_avx2.c (AVX2/FMA) for float and
 * double. The includer defines:
 *   T, SFX, MR, NR, BR, BC     types and tile sizes
 *   ukr(k, a, lak, lai, b, ldb, c, ldc, acc)
 *       c[MR,NR] (=|+=) sum_p a[p*lak + i*lai] * b[p*ldb + j]
 *   expsub(x, m, l, n)   x[i] = exp(x[i] - m[i]); l[i] += x[i]   (n % NR == 0)
 *   dot_rows(out, q, K, rsk, n, E)  out[s] = q · K[s*rsk : +E]  for s < n
 *   expsum(x, m, n)      x[s] = exp(x[s] - m), returns the sum (fixed order)
 *   pv_rows(o, p, V, rsv, n, Ev)  o[j] = sum over s with p[s] != 0 of p[s] V[s][j]
 *   expf1(x)             scalar exp with vexp.h semantics
 *
 * Shapes (legend: L queries, S keys, E head dim, Ev value dim; a "unit" is
 * one (batch, kv head) with `group` query heads):
 *   Q: unit u, group g: Q + offq[u*group+g], row i at + i*rsq, (L, E)
 *   K: K + offk[u] (S, E) rows rsk;  V: V + offv[u] (S, Ev) rows rsv
 *   O: like Q with offo/rso, (L, Ev);  W (weights): offw/rsw, (L, S)
 *   mask (optional, broadcast by strides): + offm[u*group+g], (L, S) with
 *     strides rsm, csm; kind 1 = bool (uint8, 1 = attend), 2 = additive T.
 * Prefill (flash): per task (unit, g, q-block of BR rows) the scores are
 * built transposed, St[s][i] = K[s] · Q[i] * scale, so the online softmax
 * runs down columns with SIMD across queries and St doubles as the packed
 * A operand of O += P · V. No (L, S) buffer exists.
 */
#include <float.h>
#include <math.h>

#define CAT3_(a, b, c) a##_##b##_##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define FN(name) CAT3(name, PATH, SFX)

/* rows of Q^T panels (NR queries each) scaled: qp[jp][e][j] = Q[i0+jp*NR+j][e]*scale
 * (the includer may provide a faster pack_qt with the same contract) */
#ifndef pack_qt
#define pack_qt FN(attn_pack_qt)
static void FN(attn_pack_qt)(T *qp, const T *Q, int64_t rsq, int64_t br, int64_t brp,
                             int64_t E, T scale)
{
    for (int64_t jp = 0; jp < brp / NR; jp++, qp += NR * E)
        for (int64_t j = 0; j < NR; j++) {
            const int64_t i = jp * NR + j;
            if (i < br)
                for (int64_t e = 0; e < E; e++) qp[e * NR + j] = Q[i * rsq + e] * scale;
            else
                for (int64_t e = 0; e < E; e++) qp[e * NR + j] = (T)0;
        }
}
#endif

/* St[s][i] for s < bc, i < br: causal and explicit masks. Excluded entries
 * become exactly -inf (replacing, so a NaN score there cannot leak). */
static void FN(attn_mask_tile)(const cattn_attn_args *g, T *St, int64_t ldp, const void *mask,
                               int64_t i0, int64_t br, int64_t s0, int64_t bc)
{
    const T ninf = -(T)INFINITY;
    if (g->causal && s0 + bc - 1 > i0 + g->shift) {
        for (int64_t s = 0; s < bc; s++) {
            const int64_t first = s0 + s - g->shift - i0;   /* rows i < first excluded */
            T *row = St + s * ldp;
            for (int64_t i = 0; i < cattn_min64(first, br); i++) row[i] = ninf;
        }
    }
    if (!mask) return;
    const int64_t rsm = g->rsm, csm = g->csm;
    if (g->mkind == 1) {
        const uint8_t *m = (const uint8_t *)mask + i0 * rsm + s0 * csm;
        for (int64_t s = 0; s < bc; s++) {
            T *row = St + s * ldp;
            const uint8_t *ms = m + s * csm;
            if (rsm == 0) { if (!ms[0]) for (int64_t i = 0; i < br; i++) row[i] = ninf; }
            else for (int64_t i = 0; i < br; i++) if (!ms[i * rsm]) row[i] = ninf;
        }
    } else {
        const T *m = (const T *)mask + i0 * rsm + s0 * csm;
        for (int64_t s = 0; s < bc; s++) {
            T *row = St + s * ldp;
            const T *ms = m + s * csm;
            for (int64_t i = 0; i < br; i++) {
                const T v = ms[i * rsm];
                row[i] = v == ninf ? ninf : row[i] + v;
            }
        }
    }
}

/* Scratch for one flash task, in elements of T (the double accumulators
 * ld and Oa take sizeof(double) / sizeof(T) elements each). */
static size_t FN(attn_task_scratch)(const cattn_attn_args *g)
{
    const int64_t ldp = cattn_round_up(cattn_round_up(BR, MR), NR);
    const int64_t evp = cattn_round_up(g->Ev, NR);
    const size_t dbl = sizeof(double) / sizeof(T);
    return (size_t)(BR * g->E)                          /* Q^T panels */
         + (size_t)(cattn_round_up(BC, MR) * ldp)       /* St / Pt */
         + (size_t)(ldp * evp)                          /* Ot: this block's P V */
         + (size_t)(4 * ldp)                            /* m, ts, corr, mu */
         + (size_t)(MR * g->E)                          /* K tail rows */
         + (size_t)(BC * NR)                            /* V tail panel */
         + dbl * (size_t)(ldp + BR * g->Ev)             /* ld, Oa (double) */
         + 8 * 16;                                      /* alignment slack */
}

/* St[s][i] = K[s0+s] · Q[i] * scale for s < bc, i < brp (qp holds Q^T * scale) */
static void FN(attn_scores)(const cattn_attn_args *g, T *St, int64_t ldp, const T *K,
                            const T *qp, int64_t s0, int64_t bc, int64_t brp, T *ktail)
{
    const int64_t E = g->E;
    for (int64_t ir = 0; ir < bc; ir += MR) {
        const T *a = K + (s0 + ir) * g->rsk;
        int64_t lai = g->rsk;
        if (ir + MR > bc) {                               /* tail rows: zero copy */
            for (int64_t r = 0; r < MR; r++)
                for (int64_t e = 0; e < E; e++)
                    ktail[r * E + e] = ir + r < bc ? a[r * g->rsk + e] : (T)0;
            a = ktail;
            lai = E;
        }
        for (int64_t jp = 0; jp < brp / NR; jp++)
            ukr(E, a, 1, lai, qp + jp * NR * E, NR, St + ir * ldp + jp * NR, ldp, 0);
    }
}

/* One step of the online softmax over a block of bc scores per row
 * (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018;
 * Dao et al., "FlashAttention", 2022, Algorithm 1): with the running max m,
 *   m' = max(m, max_s St[s][i]),  corr = exp(m - m'),  P = exp(St - m'),
 *   ts = sum_s P[s][i]            (this block's sum, <= BC terms).
 * A row with no finite score yet keeps m = -inf and uses 0 as its base, so
 * P = 0 there and nothing is -inf - -inf. A NaN or +inf score makes ts NaN. */
static void FN(attn_online_step)(T *St, int64_t ldp, int64_t bc, int64_t brp,
                                 T *m, T *corr, T *mu, T *ts)
{
    const T ninf = -(T)INFINITY;
    for (int64_t i = 0; i < brp; i++) mu[i] = m[i];
    for (int64_t s = 0; s < bc; s++)
        for (int64_t i = 0; i < brp; i++) {
            const T v = St[s * ldp + i];
            mu[i] = v > mu[i] ? v : mu[i];
        }
    for (int64_t i = 0; i < brp; i++) {
        const T base = mu[i] == ninf ? (T)0 : mu[i];
        corr[i] = expf1(m[i] - base);
        m[i] = mu[i];
        mu[i] = base;
        ts[i] = 0;
    }
    for (int64_t s = 0; s < bc; s++) expsub(St + s * ldp, mu, ts, brp);
}

/* Ot[i][:] = sum_s Pt[s][i] V[s0+s][:] for i < brm (rows br..brm of Pt are 0).
 * careful: V holds NaN/inf in this block, so only keys with P > 0 are read. */
static void FN(attn_pv)(const cattn_attn_args *g, T *Ot, int64_t evp, const T *St, int64_t ldp,
                        const T *V, int64_t s0, int64_t bc, int64_t br, int64_t brm,
                        int careful, T *vtail)
{
    const int64_t Ev = g->Ev;
    const T *Vb = V + s0 * g->rsv;
    if (careful) {
        for (int64_t i = 0; i < br; i++) {
            T *o = Ot + i * evp;
            for (int64_t j = 0; j < Ev; j++) o[j] = 0;
            for (int64_t s = 0; s < bc; s++) {
                const T p = St[s * ldp + i];
                if (p == (T)0) continue;
                const T *vs = Vb + s * g->rsv;
                for (int64_t j = 0; j < Ev; j++) o[j] += p * vs[j];
            }
        }
        return;
    }
    for (int64_t jv = 0; jv < evp; jv += NR) {
        const T *b = Vb + jv;
        int64_t ldb = g->rsv;
        if (jv + NR > Ev) {                                  /* tail columns */
            for (int64_t s = 0; s < bc; s++)
                for (int64_t j = 0; j < NR; j++)
                    vtail[s * NR + j] = jv + j < Ev ? Vb[s * g->rsv + jv + j] : (T)0;
            b = vtail;
            ldb = NR;
        }
        for (int64_t ir = 0; ir < brm; ir += MR)
            ukr(bc, St + ir, ldp, 1, b, ldb, Ot + ir * evp + jv, evp, 0);
    }
}

/* One flash task: query rows [i0, i0+br) of (unit u, head g).
 * Output mode (W == NULL): O = softmax(S) V with the output kept normalized
 * (FlashAttention's Algorithm 1, line 12), in double across blocks:
 *   l' = l * corr + ts,   Oa = (l * corr / l') Oa + (1 / l') P V
 * so the row sum and the output are never accumulated key by key in T
 * (exact to T's rounding for any S), and Oa is a convex combination of V
 * rows (no overflow whatever |V|: for blocks with huge values, flagged by
 * attn_scan_v, P is divided by ts before P V and Oa gets ts / l' instead).
 * Weights mode (attention_weights): pass 0 finds m and l, pass 1 writes
 * W = exp(s - m) / l; a row whose l is NaN (a NaN or +inf score) is NaN at
 * every position it attends to (whatever its score, -inf included) and 0
 * where masked, as softmax([inf, 1]) = [nan, nan]. */
static void FN(attn_flash_task)(const cattn_attn_args *g, int64_t uq, int64_t qb, T *work)
{
    const int64_t u = uq / g->group, E = g->E, Ev = g->Ev, S = g->S;
    const int64_t i0 = qb * BR, br = cattn_min64(BR, g->L - i0);
    const int64_t brp = cattn_round_up(br, NR), brm = cattn_round_up(br, MR);
    const int64_t ldp = cattn_round_up(cattn_round_up(BR, MR), NR);
    const int64_t evp = cattn_round_up(Ev, NR);
    const T *Q = (const T *)g->Q + g->offq[uq] + i0 * g->rsq;
    const T *K = (const T *)g->K + g->offk[u];
    const T *V = (const T *)g->V + g->offv[u];
    const void *mask = NULL;
    if (g->mkind == 1) mask = (const uint8_t *)g->mask + g->offm[uq];
    else if (g->mkind == 2) mask = (const T *)g->mask + g->offm[uq];
    T *qp = work;
    T *St = qp + cattn_round_up(BR * E, 16);
    T *Ot = St + cattn_round_up(cattn_round_up(BC, MR) * ldp, 16);
    T *m = Ot + cattn_round_up(ldp * evp, 16), *ts = m + ldp, *corr = ts + ldp, *mu = corr + ldp;
    T *ktail = mu + ldp;
    T *vtail = ktail + cattn_round_up(MR * E, 16);
    double *ld = (double *)(vtail + cattn_round_up(BC * NR, 16));
    double *Oa = ld + cattn_round_up(ldp, 8);
    const T ninf = -(T)INFINITY;

    int64_t s_end = S;
    if (g->causal) s_end = cattn_max64(0, cattn_min64(S, i0 + br + g->shift));
    pack_qt(qp, Q, g->rsq, br, brp, E, (T)g->scale);
    for (int64_t i = 0; i < ldp; i++) { m[i] = ninf; ld[i] = 0; }

    if (g->W) {
        T *W = (T *)g->W + g->offw[uq] + i0 * g->rsw;
        for (int64_t s0 = 0; s0 < s_end; s0 += BC) {          /* pass 0: m and l */
            const int64_t bc = cattn_min64(BC, s_end - s0);
            FN(attn_scores)(g, St, ldp, K, qp, s0, bc, brp, ktail);
            FN(attn_mask_tile)(g, St, ldp, mask, i0, br, s0, bc);
            FN(attn_online_step)(St, ldp, bc, brp, m, corr, mu, ts);
            for (int64_t i = 0; i < br; i++) ld[i] = ld[i] * (double)corr[i] + (double)ts[i];
        }
        for (int64_t i = 0; i < br; i++) mu[i] = m[i] == ninf ? (T)0 : m[i];
        for (int64_t s0 = 0; s0 < s_end; s0 += BC) {          /* pass 1: W */
            const int64_t bc = cattn_min64(BC, s_end - s0);
            FN(attn_scores)(g, St, ldp, K, qp, s0, bc, brp, ktail);
            for (int64_t i = 0; i < br; i++)   /* NaN rows: scores 0, so -inf marks the mask */
                if (ld[i] != ld[i])
                    for (int64_t s = 0; s < bc; s++) St[s * ldp + i] = 0;
            FN(attn_mask_tile)(g, St, ldp, mask, i0, br, s0, bc);
            for (int64_t i = 0; i < br; i++)                  /* NaN rows, before exp */
                if (ld[i] != ld[i])
                    for (int64_t s = 0; s < bc; s++)
                        W[i * g->rsw + s0 + s] = St[s * ldp + i] == ninf ? (T)0 : (T)NAN;
            for (int64_t i = br; i < brp; i++) mu[i] = 0;
            for (int64_t s = 0; s < bc; s++) expsub(St + s * ldp, mu, ts, brp);
            for (int64_t i = 0; i < br; i++) {
                if (ld[i] != ld[i]) continue;
                const double inv = ld[i] > 0 ? 1.0 / ld[i] : 0.0;  /* no key: zeros */
                for (int64_t s = 0; s < bc; s++)
                    W[i * g->rsw + s0 + s] = (T)((double)St[s * ldp + i] * inv);
            }
        }
        for (int64_t i = 0; i < br; i++)          /* keys past the causal limit */
            for (int64_t s = s_end; s < S; s++) W[i * g->rsw + s] = 0;
        return;
    }

    for (int64_t i = 0; i < br * Ev; i++) Oa[i] = 0;
    for (int64_t s0 = 0; s0 < s_end; s0 += BC) {
        const int64_t bc = cattn_min64(BC, s_end - s0);
        const uint8_t flag = g->vbad[u * g->nblk + s0 / BC];
        const int huge = (flag & 2) != 0;
        FN(attn_scores)(g, St, ldp, K, qp, s0, bc, brp, ktail);
        FN(attn_mask_tile)(g, St, ldp, mask, i0, br, s0, bc);
        FN(attn_online_step)(St, ldp, bc, brp, m, corr, mu, ts);
        if (huge)                                 /* P / ts: a convex combination */
            for (int64_t i = 0; i < brp; i++) {
                const T r = ts[i] == (T)0 ? (T)0 : (T)1 / ts[i];
                for (int64_t s = 0; s < bc; s++) St[s * ldp + i] *= r;
            }
        for (int64_t s = 0; s < bc; s++)                       /* padded PV rows */
            for (int64_t i = brp; i < brm; i++) St[s * ldp + i] = 0;
        FN(attn_pv)(g, Ot, evp, St, ldp, V, s0, bc, br, brm, flag & 1, vtail);
        for (int64_t i = 0; i < br; i++) {
            const double lo = ld[i] * (double)corr[i], ln = lo + (double)ts[i];
            if (ln == 0) continue;                              /* nothing seen yet */
            const double a = lo / ln, b = (huge ? (double)ts[i] : 1.0) / ln;
            double *oa = Oa + i * Ev;
            const T *ot = Ot + i * evp;
            for (int64_t j = 0; j < Ev; j++) oa[j] = a * oa[j] + b * (double)ot[j];
            ld[i] = ln;
        }
    }
    T *O = (T *)g->O + g->offo[uq] + i0 * g->rso;
    for (int64_t i = 0; i < br; i++)          /* no key attended: 0; NaN l: NaN */
        for (int64_t j = 0; j < Ev; j++)
            O[i * g->rso + j] = ld[i] == 0 ? (T)0 : (T)Oa[i * Ev + j];
}

/* Decode: a unit's group*L query rows (few) over key chunk c. Partials:
 * part[(u*nch + c)*rows + r] = {m, l, Ohat[Ev]} with Ohat = P V / l, the
 * chunk's normalized output (a convex combination of V rows: no overflow).
 * Scores of all rows are taken per block of 16 keys while those K rows sit
 * in L1; keys with zero weight are skipped in P·V, so NaN in masked or
 * padded cache slots never leaks.
 * work: rows x (E + CHUNK) scaled queries and scores. */
static void FN(attn_decode_task)(const cattn_attn_args *g, int64_t u, int64_t c, int64_t nch,
                                 T *part, T *work)
{
    const int64_t E = g->E, Ev = g->Ev, L = g->L, rows = g->group * L;
    const int64_t s0 = c * CATTN_DECODE_CHUNK;
    const int64_t n = cattn_min64(CATTN_DECODE_CHUNK, g->S - s0);
    const int64_t ldq = cattn_round_up(E, 16);
    const T *K = (const T *)g->K + g->offk[u] + s0 * g->rsk;
    const T *V = (const T *)g->V + g->offv[u] + s0 * g->rsv;
    T *qs = work, *sc = work + rows * ldq;
    const T ninf = -(T)INFINITY;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t gi = r / L, i = r % L, uq = u * g->group + gi;
        const T *q = (const T *)g->Q + g->offq[uq] + i * g->rsq;
        for (int64_t e = 0; e < E; e++) qs[r * ldq + e] = q[e] * (T)g->scale;
    }
    for (int64_t sb = 0; sb < n; sb += 16)                     /* scores */
        for (int64_t r = 0; r < rows; r++)
            dot_rows(sc + r * CATTN_DECODE_CHUNK + sb, qs + r * ldq, K + sb * g->rsk, g->rsk,
                     cattn_min64(16, n - sb), E);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t gi = r / L, i = r % L, uq = u * g->group + gi;
        T *scr = sc + r * CATTN_DECODE_CHUNK;
        T *pr = part + ((u * nch + c) * rows + r) * (2 + Ev);
        int64_t lim = n;                                    /* causal limit */
        if (g->causal) lim = cattn_max64(0, cattn_min64(n, i + g->shift + 1 - s0));
        for (int64_t s = lim; s < n; s++) scr[s] = ninf;
        if (g->mkind == 1) {
            const uint8_t *mk = (const uint8_t *)g->mask + g->offm[uq] + i * g->rsm + s0 * g->csm;
            for (int64_t s = 0; s < n; s++) if (!mk[s * g->csm]) scr[s] = ninf;
        } else if (g->mkind == 2) {
            const T *mk = (const T *)g->mask + g->offm[uq] + i * g->rsm + s0 * g->csm;
            for (int64_t s = 0; s < n; s++) {
                const T v = mk[s * g->csm];
                scr[s] = v == ninf ? ninf : scr[s] + v;
            }
        }
        T mx = ninf;
        for (int64_t s = 0; s < n; s++) mx = scr[s] > mx || scr[s] != scr[s] ? scr[s] : mx;
        const T mu = mx == ninf ? (T)0 : mx;
        const T l = expsum(scr, mu, n);                     /* P = exp(S - m) */
        pr[0] = mx;
        pr[1] = l;
        if (l != (T)0) {                                    /* P / l (NaN l: NaN) */
            const T r_ = (T)1 / l;
            for (int64_t s = 0; s < n; s++) scr[s] *= r_;
        }
        pv_rows(pr + 2, scr, V, g->rsv, n, Ev);             /* Ohat = P V / l */
    }
}

/* Combine the decode partials of row r of unit u, in chunk order, in double
 * (log-sum-exp; Ohat are normalized, so O = sum_c w_c Ohat_c with
 * w_c = exp(m_c - M) l_c / sum_c' exp(m_c' - M) l_c'):
 * acc: Ev doubles of scratch. */
static void FN(attn_decode_combine)(const cattn_attn_args *g, int64_t u, int64_t r, int64_t nch,
                                    const T *part, double *acc)
{
    const int64_t Ev = g->Ev, L = g->L, rows = g->group * L;
    const int64_t gi = r / L, i = r % L, uq = u * g->group + gi;
    T *O = (T *)g->O + g->offo[uq] + i * g->rso;
    T M = -(T)INFINITY;
    for (int64_t c = 0; c < nch; c++) {
        const T mc = part[((u * nch + c) * rows + r) * (2 + Ev)];
        M = mc > M || mc != mc ? mc : M;
    }
    const T mu = M == -(T)INFINITY ? (T)0 : M;
    double lsum = 0;
    for (int64_t c = 0; c < nch; c++) {
        const T *pr = part + ((u * nch + c) * rows + r) * (2 + Ev);
        if (pr[1] != (T)0) lsum += (double)expf1(pr[0] - mu) * (double)pr[1];
    }
    for (int64_t j = 0; j < Ev; j++) acc[j] = 0;
    if (lsum != 0)
        for (int64_t c = 0; c < nch; c++) {
            const T *pr = part + ((u * nch + c) * rows + r) * (2 + Ev);
            if (pr[1] == (T)0) continue;
            const double w = (double)expf1(pr[0] - mu) * (double)pr[1] / lsum;
            for (int64_t j = 0; j < Ev; j++) acc[j] += w * (double)pr[2 + j];
        }
    for (int64_t j = 0; j < Ev; j++) O[j] = (T)acc[j];
}

/* Flag kv blocks (BC keys) of V: bit 0 = holds NaN/inf (the careful P·V),
 * bit 1 = holds |v| > T_MAX / (4 BC) (P is normalized before P·V, so the
 * block's sum of at most BC products cannot overflow). */
static void FN(attn_scan_v)(const cattn_attn_args *g, int64_t u, int64_t b)
{
    const T *V = (const T *)g->V + g->offv[u] + b * BC * g->rsv;
    const int64_t n = cattn_min64(BC, g->S - b * BC);
    const T big = (sizeof(T) == sizeof(float) ? (T)FLT_MAX : (T)DBL_MAX) / (T)(4 * BC);
    T acc = 0, amax = 0;
    for (int64_t s = 0; s < n; s++)
        for (int64_t j = 0; j < g->Ev; j++) {
            const T x = V[s * g->rsv + j];
            const T ax = x < 0 ? -x : x;
            acc += x * (T)0;
            amax = ax > amax ? ax : amax;
        }
    g->vbad[u * g->nblk + b] = (uint8_t)((acc != (T)0) | ((amax > big) << 1));
}

int FN(cattn_attention)(cattn_attn_args *g, int n_threads)
{
    const int64_t rows = g->group * g->L;
    const int decode = !g->W && g->L <= CATTN_DECODE_MAX_ROWS;
    const int64_t nuq = g->nkv * g->group;
    const int64_t nqb = cattn_cdiv(g->L, BR);
    const int64_t nch = cattn_cdiv(g->S, CATTN_DECODE_CHUNK);
    g->nblk = cattn_cdiv(g->S, BC);
    const int64_t ntask = decode ? g->nkv * nch : nuq * nqb;
    const double flops = 4.0 * (double)rows * g->nkv * g->S * (double)(g->E + g->Ev);
    int nt = (int)cattn_max64(1, cattn_min64(n_threads, cattn_min64(ntask, (int64_t)(flops / 1e6) + 1)));
#ifndef _OPENMP
    nt = 1;
#endif
    size_t per = decode ? (size_t)(rows * (cattn_round_up(g->E, 16) + CATTN_DECODE_CHUNK))
                        : FN(attn_task_scratch)(g);
    if (decode)                           /* the combine's Ev double accumulators */
        per = per > (size_t)g->Ev * (sizeof(double) / sizeof(T))
            ? per : (size_t)g->Ev * (sizeof(double) / sizeof(T));
    per = cattn_round_up(per, 16);
    size_t shared = decode ? (size_t)(g->nkv * nch * rows * (2 + g->Ev)) : 0;
    size_t flags = decode || g->W ? 0 : (size_t)(g->nkv * g->nblk);
    T *buf = cattn_aligned_alloc(sizeof(T) * (per * nt + shared) + flags);
    if (!buf) return CATTN_ENOMEM;
    T *part = buf + per * nt;
    g->vbad = flags ? (uint8_t *)(part + shared) : NULL;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        T *work = buf + per * CATTN_TID();
        if (decode) {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t t = 0; t < ntask; t++)
                FN(attn_decode_task)(g, t / nch, t % nch, nch, part, work);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t t = 0; t < g->nkv * rows; t++)
                FN(attn_decode_combine)(g, t / rows, t % rows, nch, part, (double *)work);
        } else {
            if (g->vbad) {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
                for (int64_t t = 0; t < g->nkv * g->nblk; t++)
                    FN(attn_scan_v)(g, t / g->nblk, t % g->nblk);
            }
            /* heavy q-blocks first: the late ones under a causal mask (more
             * keys), else the full ones (the last block may be partial) */
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t t = 0; t < ntask; t++)
                FN(attn_flash_task)(g, t % nuq, g->causal ? nqb - 1 - t / nuq : t / nuq, work);
        }
    }
    cattn_aligned_free(buf);
    return CATTN_OK;
}

#undef pack_qt
#undef FN
#undef CAT3
#undef CAT3_
