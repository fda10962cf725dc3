/* kernels/attention_tiles_tmpl.h — the fused attention's tile kernels,
 * written once; included by kernels/<isa>/attention.c for float and double.
 * The threads, scratch and task order are the driver's (csrc/attention.c);
 * this file computes one task at a time. The includer defines:
 *   PATH, T, SFX                     ISA name, type (tile sizes from config.h)
 *   ukr(k, a, lak, lai, b, ldb, c, ldc, acc)
 *       c[MR,NR] (=|+=) sum_p a[p*lak + i*lai] * b[p*ldb + j]
 *   expsub(x, m, l, n)   x[i] = exp(x[i] - m[i]); l[i] += x[i]   (n % NR == 0)
 *   dot_rows(out, q, K, rsk, n, E)  out[s] = q · K[s*rsk : +E]  for s < n
 *   expsum(x, m, n)      x[s] = exp(x[s] - m), returns the sum (fixed order)
 *   pv_rows(o, p, V, rsv, n, Ev)  o[j] = sum over s with p[s] != 0 of p[s] V[s][j]
 *   expf1(x)             scalar exp with vexp.h semantics
 *   dot_rows_h, pv_rows_h (optional, T = float): dot_rows and pv_rows over
 *       float16 K / V rows (uint16_t), for the float16-cache decode task
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
#include <string.h>

#include "../dispatch.h"

/* register tile (the micro-kernel's) and flash tile, by type */
#define MR ((int64_t)(sizeof(T) == 4 ? CATTN_MR_F32 : CATTN_MR_F64))
#define NR ((int64_t)(sizeof(T) == 4 ? CATTN_NR_F32 : CATTN_NR_F64))
#define BR ((int64_t)(sizeof(T) == 4 ? CATTN_ATTN_BR_F32 : CATTN_ATTN_BR_F64))
#define BC ((int64_t)(sizeof(T) == 4 ? CATTN_ATTN_BC_F32 : CATTN_ATTN_BC_F64))

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
    if (g->mkind == CATTN_MASK_BOOL) {
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

/* One flash task's view of its scratch and operands. Every buffer keeps
 * one meaning for the whole task:
 *   qp (BR x E)     Q^T * scale in NR-wide panels (the B operand of scores)
 *   St (BC x ldp)   scores S^T of one key block, then P^T = exp(S - m)^T
 *   Ot (brm x evp)  this block's P V (the micro-kernel's output)
 *   m, ts, corr, mu (ldp each)  running max, block sum, exp(m_old - m),
 *                   exp base (m, or 0 for a row with no finite score yet)
 *   ktail, vtail    zero-padded K rows / V columns at block edges (vtail:
 *                   V read in place, when the driver did not pack it)
 *   ld, Oa (double) running row sum l and normalized output (BR x Ev) */
typedef struct {
    const cattn_attn_args *g;
    int64_t u, uq, i0, br, brp, brm, ldp, evp, s_end;
    const T *K, *V, *vpk;               /* vpk: unit u's packed V (attn_scan_v) */
    const void *mask;
    T *qp, *St, *Ot, *m, *ts, *corr, *mu, *ktail, *vtail;
    double *ld, *Oa;
} FN(attn_task);

/* Scratch for one flash task, in elements of T (the double accumulators
 * ld and Oa take sizeof(double) / sizeof(T) elements each). */
static size_t FN(attn_task_scratch)(const cattn_attn_args *g)
{
    const int64_t ldp = cattn_round_up(cattn_round_up(BR, MR), NR);
    const int64_t evp = cattn_round_up(g->Ev, NR);
    const size_t dbl = sizeof(double) / sizeof(T);
    return (size_t)(BR * g->E)                          /* qp */
         + (size_t)(cattn_round_up(BC, MR) * ldp)       /* St */
         + (size_t)(ldp * evp)                          /* Ot */
         + (size_t)(4 * ldp)                            /* m, ts, corr, mu */
         + (size_t)(MR * g->E)                          /* ktail */
         + (size_t)(BC * NR)                            /* vtail */
         + dbl * (size_t)(ldp + BR * g->Ev)             /* ld, Oa */
         + 8 * 16;                                      /* alignment slack */
}

/* carve `work` (attn_task_scratch elements) and pack Q^T for rows
 * [qb*BR, +br) of query head uq; m = -inf, l = 0 */
static FN(attn_task) FN(attn_task_init)(const cattn_attn_run *run, int64_t uq, int64_t qb, T *work)
{
    const cattn_attn_args *g = run->a;
    FN(attn_task) t;
    t.g = g;
    t.uq = uq;
    t.u = uq / g->group;
    t.i0 = qb * BR;
    t.br = cattn_min64(BR, g->L - t.i0);
    t.brp = cattn_round_up(t.br, NR);
    t.brm = cattn_round_up(t.br, MR);
    t.ldp = cattn_round_up(cattn_round_up(BR, MR), NR);
    t.evp = cattn_round_up(g->Ev, NR);
    t.s_end = g->S;
    if (g->causal) t.s_end = cattn_max64(0, cattn_min64(g->S, t.i0 + t.br + g->shift));
    t.K = (const T *)g->K + g->offk[t.u];
    t.V = (const T *)g->V + g->offv[t.u];
    t.vpk = run->vpk ? (const T *)run->vpk + t.u * g->S * t.evp : NULL;   /* NULL: V in place */
    t.mask = NULL;
    if (g->mkind == CATTN_MASK_BOOL) t.mask = (const uint8_t *)g->mask + g->offm[uq];
    else if (g->mkind == CATTN_MASK_ADD) t.mask = (const T *)g->mask + g->offm[uq];
    t.qp = work;
    t.St = t.qp + cattn_round_up(BR * g->E, 16);
    t.Ot = t.St + cattn_round_up(cattn_round_up(BC, MR) * t.ldp, 16);
    t.m = t.Ot + cattn_round_up(t.ldp * t.evp, 16);
    t.ts = t.m + t.ldp;
    t.corr = t.ts + t.ldp;
    t.mu = t.corr + t.ldp;
    t.ktail = t.mu + t.ldp;
    t.vtail = t.ktail + cattn_round_up(MR * g->E, 16);
    t.ld = (double *)(t.vtail + cattn_round_up(BC * NR, 16));
    t.Oa = t.ld + cattn_round_up(t.ldp, 8);
    pack_qt(t.qp, (const T *)g->Q + g->offq[uq] + t.i0 * g->rsq, g->rsq, t.br, t.brp, g->E,
            (T)g->scale);
    for (int64_t i = 0; i < t.ldp; i++) { t.m[i] = -(T)INFINITY; t.ld[i] = 0; }
    return t;
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
 * B operand: V's block from its packed copy vpb when the driver packed it
 * (attn_scan_v: NR-column panels of the block's min(BC, S - s0) rows, of
 * which a causal task may use fewer), read contiguously; else V in place
 * (vpb NULL; a column tail through vtail). In place, V's rows are a
 * power-of-two number of bytes apart and a panel of BC rows maps onto a
 * quarter of the L1 sets: it misses on every pass. Same bits either way.
 * careful: V holds NaN/inf in this block, so only keys with P > 0 are read. */
static void FN(attn_pv)(const cattn_attn_args *g, T *Ot, int64_t evp, const T *St, int64_t ldp,
                        const T *V, const T *vpb, int64_t s0, int64_t bc, int64_t br,
                        int64_t brm, int careful, T *vtail)
{
    const int64_t Ev = g->Ev, rsv = g->rsv;
    const T *Vb = V + s0 * rsv;
    if (careful) {
        for (int64_t i = 0; i < br; i++) {
            T *o = Ot + i * evp;
            for (int64_t j = 0; j < Ev; j++) o[j] = 0;
            for (int64_t s = 0; s < bc; s++) {
                const T p = St[s * ldp + i];
                if (p == (T)0) continue;
                const T *vs = Vb + s * rsv;
                for (int64_t j = 0; j < Ev; j++) o[j] += p * vs[j];
            }
        }
        return;
    }
    const int64_t nb = cattn_min64(BC, g->S - s0);
    for (int64_t jv = 0; jv < evp; jv += NR) {
        const T *b = vpb ? vpb + jv * nb : Vb + jv;
        int64_t ldb = vpb ? NR : rsv;
        if (!vpb && jv + NR > Ev) {                          /* tail columns */
            for (int64_t s = 0; s < bc; s++)
                for (int64_t j = 0; j < NR; j++)
                    vtail[s * NR + j] = jv + j < Ev ? Vb[s * rsv + jv + j] : (T)0;
            b = vtail;
            ldb = NR;
        }
        for (int64_t ir = 0; ir < brm; ir += MR)
            ukr(bc, St + ir, ldp, 1, b, ldb, Ot + ir * evp + jv, evp, 0);
    }
}

/* St = masked scores of key block [s0, s0+bc) for the task's rows; rows
 * whose l is NaN (nan_rows set) get 0 before the mask, so -inf there marks
 * exactly the masked keys */
static void FN(attn_block_scores)(const FN(attn_task) *t, int64_t s0, int64_t bc, int nan_rows)
{
    FN(attn_scores)(t->g, t->St, t->ldp, t->K, t->qp, s0, bc, t->brp, t->ktail);
    if (nan_rows)
        for (int64_t i = 0; i < t->br; i++)
            if (t->ld[i] != t->ld[i])
                for (int64_t s = 0; s < bc; s++) t->St[s * t->ldp + i] = 0;
    FN(attn_mask_tile)(t->g, t->St, t->ldp, t->mask, t->i0, t->br, s0, bc);
}

/* Output rows: O = softmax(S) V with the output kept normalized
 * (FlashAttention's Algorithm 1, line 12), in double across key blocks:
 *   l' = l corr + ts,   Oa = (l corr / l') Oa + (1 / l') P V
 * so neither the row sum nor the output is ever accumulated key by key in
 * T (T's rounding level for any S), and Oa is a convex combination of V
 * rows: no overflow whatever |V| (for a block flagged huge by attn_scan_v,
 * P is divided by ts before P V and Oa takes ts / l' instead). With a single
 * key block (S <= BC) there is nothing to carry: O = P V / ts at once. */
static void FN(attn_output_rows)(FN(attn_task) *t, const cattn_attn_run *run)
{
    const cattn_attn_args *g = t->g;
    const int64_t Ev = g->Ev, ldp = t->ldp;
    T *St = t->St;
    const int one_block = t->s_end <= BC;   /* then O = Ot / ts directly, in T */
    uint8_t flag = 0;
    if (!one_block)
        for (int64_t i = 0; i < t->br * Ev; i++) t->Oa[i] = 0;
    for (int64_t s0 = 0; s0 < t->s_end; s0 += BC) {
        const int64_t bc = cattn_min64(BC, t->s_end - s0);
        flag = run->vflags[t->u * run->nblk + s0 / BC];
        const int huge = (flag & 2) != 0;
        FN(attn_block_scores)(t, s0, bc, 0);
        FN(attn_online_step)(St, ldp, bc, t->brp, t->m, t->corr, t->mu, t->ts);
        if (huge)                                 /* P / ts: a convex combination */
            for (int64_t i = 0; i < t->brp; i++) {
                const T r = t->ts[i] == (T)0 ? (T)0 : (T)1 / t->ts[i];
                for (int64_t s = 0; s < bc; s++) St[s * ldp + i] *= r;
            }
        for (int64_t s = 0; s < bc; s++)                       /* padded PV rows */
            for (int64_t i = t->brp; i < t->brm; i++) St[s * ldp + i] = 0;
        FN(attn_pv)(g, t->Ot, t->evp, St, ldp, t->V, t->vpk ? t->vpk + s0 * t->evp : NULL, s0, bc,
                    t->br, t->brm, flag & 1, t->vtail);
        if (one_block) break;
        for (int64_t i = 0; i < t->br; i++) {
            const double lo = t->ld[i] * (double)t->corr[i], ln = lo + (double)t->ts[i];
            if (ln == 0) continue;                              /* nothing seen yet */
            const double a = lo / ln, b = (huge ? (double)t->ts[i] : 1.0) / ln;
            double *oa = t->Oa + i * Ev;
            const T *ot = t->Ot + i * t->evp;
            for (int64_t j = 0; j < Ev; j++) oa[j] = a * oa[j] + b * (double)ot[j];
            t->ld[i] = ln;
        }
    }
    /* the stores below could alias g's and t's fields (no strict
     * aliasing): locals, so that the row loops vectorize */
    const int64_t rso = g->rso, evp = t->evp, br = t->br;
    T *CATTN_RESTRICT O = (T *)g->O + g->offo[t->uq] + t->i0 * rso;
    if (one_block) {                          /* no key attended: 0; NaN sum: NaN */
        const T *Ot = t->Ot;
        for (int64_t i = 0; i < br; i++) {
            const T l = t->s_end ? t->ts[i] : (T)0;
            const T r = l == (T)0 ? (T)0 : (flag & 2) ? (T)1 : (T)1 / l;
            T *CATTN_RESTRICT o = O + i * rso;
            const T *CATTN_RESTRICT ot = Ot + i * evp;
            if (l == (T)0)
                for (int64_t j = 0; j < Ev; j++) o[j] = (T)0;
            else
                for (int64_t j = 0; j < Ev; j++) o[j] = ot[j] * r;
        }
        return;
    }
    for (int64_t i = 0; i < br; i++) {       /* no key attended: 0; NaN l: NaN */
        T *CATTN_RESTRICT o = O + i * rso;
        const double *CATTN_RESTRICT oa = t->Oa + i * Ev;
        if (t->ld[i] == 0)
            for (int64_t j = 0; j < Ev; j++) o[j] = (T)0;
        else
            for (int64_t j = 0; j < Ev; j++) o[j] = (T)oa[j];
    }
}

/* Weight rows (attention_weights): pass 0 finds m and l over every key
 * block, pass 1 recomputes the scores and writes W = exp(s - m) / l. A row
 * whose l is NaN (a NaN or +inf score) is NaN at every position it attends
 * to (whatever its score, -inf included) and 0 where masked, as
 * softmax([inf, 1]) = [nan, nan]. */
static void FN(attn_weight_rows)(FN(attn_task) *t)
{
    const cattn_attn_args *g = t->g;
    const int64_t ldp = t->ldp, br = t->br;
    const T ninf = -(T)INFINITY;
    T *St = t->St, *W = (T *)g->W + g->offw[t->uq] + t->i0 * g->rsw;
    for (int64_t s0 = 0; s0 < t->s_end; s0 += BC) {              /* pass 0 */
        const int64_t bc = cattn_min64(BC, t->s_end - s0);
        FN(attn_block_scores)(t, s0, bc, 0);
        FN(attn_online_step)(St, ldp, bc, t->brp, t->m, t->corr, t->mu, t->ts);
        for (int64_t i = 0; i < br; i++)
            t->ld[i] = t->ld[i] * (double)t->corr[i] + (double)t->ts[i];
    }
    int nan_rows = 0;
    for (int64_t i = 0; i < t->brp; i++) {
        t->mu[i] = i < br && t->m[i] != ninf ? t->m[i] : (T)0;
        nan_rows |= i < br && t->ld[i] != t->ld[i];
    }
    for (int64_t s0 = 0; s0 < t->s_end; s0 += BC) {              /* pass 1 */
        const int64_t bc = cattn_min64(BC, t->s_end - s0);
        FN(attn_block_scores)(t, s0, bc, nan_rows);
        for (int64_t i = 0; i < br; i++)                  /* NaN rows, before exp */
            if (t->ld[i] != t->ld[i])
                for (int64_t s = 0; s < bc; s++)
                    W[i * g->rsw + s0 + s] = St[s * ldp + i] == ninf ? (T)0 : (T)NAN;
        for (int64_t s = 0; s < bc; s++) expsub(St + s * ldp, t->mu, t->ts, t->brp);
        for (int64_t i = 0; i < br; i++) {
            if (t->ld[i] != t->ld[i]) continue;
            const double inv = t->ld[i] > 0 ? 1.0 / t->ld[i] : 0.0;   /* no key: zeros */
            for (int64_t s = 0; s < bc; s++)
                W[i * g->rsw + s0 + s] = (T)((double)St[s * ldp + i] * inv);
        }
    }
    for (int64_t i = 0; i < br; i++)              /* keys past the causal limit */
        for (int64_t s = t->s_end; s < g->S; s++) W[i * g->rsw + s] = 0;
}

/* One flash task: query rows [qb*BR, +BR) of query head uq */
static void FN(attn_flash_task)(const cattn_attn_run *run, int64_t uq, int64_t qb, void *work)
{
    FN(attn_task) t = FN(attn_task_init)(run, uq, qb, (T *)work);
    if (run->a->W) FN(attn_weight_rows)(&t);
    else FN(attn_output_rows)(&t, run);
}

#define DKT T
#define DNAME attn_decode_task
#define DDOT dot_rows
#define DPV pv_rows
#include "attention_decode_tmpl.h"
#ifdef dot_rows_h                     /* float16 K and V (a float16 KV cache), T = float */
#define DKT uint16_t
#define DNAME attn_decode_task_h
#define DDOT dot_rows_h
#define DPV pv_rows_h
#include "attention_decode_tmpl.h"
#endif

/* Combine the decode partials of row r of unit u, in chunk order, in double
 * (not called with one chunk: the task wrote O)
 * (log-sum-exp; Ohat are normalized, so O = sum_c w_c Ohat_c with
 * w_c = exp(m_c - M) l_c / sum_c' exp(m_c' - M) l_c'):
 * acc: Ev doubles of scratch. */
static void FN(attn_decode_combine)(const cattn_attn_run *run, int64_t u, int64_t r, void *work)
{
    const cattn_attn_args *g = run->a;
    const int64_t nch = run->nch;
    const T *part = (const T *)run->part;
    double *acc = (double *)work;
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

/* Flag kv blocks (BC keys) of V, and pack them when run->vpk is set: bit 0 = holds NaN/inf (the careful P·V),
 * bit 1 = holds |v| > T_MAX / (4 BC) (P is normalized before P·V, so the
 * block's sum of at most BC products cannot overflow). */
static void FN(attn_scan_v)(const cattn_attn_run *run, int64_t u, int64_t b)
{
    const cattn_attn_args *g = run->a;
    const T *V = (const T *)g->V + g->offv[u] + b * BC * g->rsv;
    const int64_t n = cattn_min64(BC, g->S - b * BC);
    const T big = (sizeof(T) == sizeof(float) ? (T)FLT_MAX : (T)DBL_MAX) / (T)(4 * BC);
    /* on the bits without the sign (unsigned order = order of |x|, NaN and
     * inf above every finite value): one max reduction, vectorized.
     * NaN or inf <=> |bits| >= inf's; |x| > big or NaN <=> |bits| > big's */
    const int64_t Ev = g->Ev, rsv = g->rsv;
    int nonfinite, huge;
    if (sizeof(T) == 4) {
        uint32_t big_bits, umax = 0;
        const float bigf = (float)big;
        memcpy(&big_bits, &bigf, sizeof big_bits);
        for (int64_t s = 0; s < n; s++) {
            const T *v = V + s * rsv;
            for (int64_t j = 0; j < Ev; j++) {
                uint32_t x;
                memcpy(&x, v + j, sizeof x);
                x &= 0x7FFFFFFFu;
                umax = x > umax ? x : umax;
            }
        }
        nonfinite = umax >= 0x7F800000u;
        huge = umax > big_bits;
    } else {
        uint64_t big_bits, umax = 0;
        const double bigd = (double)big;
        memcpy(&big_bits, &bigd, sizeof big_bits);
        for (int64_t s = 0; s < n; s++) {
            const T *v = V + s * rsv;
            for (int64_t j = 0; j < Ev; j++) {
                uint64_t x;
                memcpy(&x, v + j, sizeof x);
                x &= 0x7FFFFFFFFFFFFFFFull;
                umax = x > umax ? x : umax;
            }
        }
        nonfinite = umax >= 0x7FF0000000000000ull;
        huge = umax > big_bits;
    }
    run->vflags[u * run->nblk + b] = (uint8_t)(nonfinite | (huge << 1));
    /* pack: vp[jp][s][j] = V[b BC + s][jp NR + j] (0 past Ev), in place of
     * the block in unit u's copy (moves values: P·V keeps its bits) */
    if (!run->vpk) return;
    const int64_t evp = cattn_round_up(Ev, NR);
    T *CATTN_RESTRICT vp = (T *)run->vpk + (u * g->S + b * BC) * evp;
    for (int64_t jv = 0; jv < evp; jv += NR, vp += n * NR) {
        if (jv + NR <= Ev)
            for (int64_t s = 0; s < n; s++) memcpy(vp + s * NR, V + s * rsv + jv, NR * sizeof(T));
        else                                                /* tail columns: 0 */
            for (int64_t s = 0; s < n; s++)
                for (int64_t j = 0; j < NR; j++) vp[s * NR + j] = jv + j < Ev ? V[s * rsv + jv + j] : (T)0;
    }
}

/* this ISA's entries for the dispatch table */
const cattn_attn_kernels CATTN_CAT3(cattn_attn, PATH, SFX) = {
    BR, BC, NR, FN(attn_task_scratch), FN(attn_scan_v), FN(attn_flash_task),
    FN(attn_decode_task), FN(attn_decode_combine),
#ifdef dot_rows_h
    FN(attn_decode_task_h)
#else
    NULL
#endif
};

#undef pack_qt
#undef dot_rows_h
#undef pv_rows_h
#undef MR
#undef NR
#undef BR
#undef BC
/* the includer's parameters */
#undef PATH
#undef T
#undef SFX
#undef ukr
#undef expsub
#undef dot_rows
#undef expsum
#undef pv_rows
#undef expf1
