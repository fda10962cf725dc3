/* kernels/attention_decode_tmpl.h — the decode path's task, written once;
 * included by attention_tiles_tmpl.h (and kernels/avx2/attention_h_f16c.c)
 * with, besides the tiles' T, SFX, expsum, expf1:
 *   DKT    the element type of K and V: T, or uint16_t (IEEE float16: a
 *          float16 KV cache, T = float)
 *   DNAME  the function's name (FN(DNAME))
 *   DDOT(out, q, K, rsk, n, E)   out[s] = q · K[s*rsk : +E] (K of DKT)
 *   DPV(o, p, V, rsv, n, Ev)     o[j] = sum over s with p[s] != 0 of p[s] V[s][j]
 * A float16 cache's DDOT / DPV widen each value exactly and then do the
 * float ones' operations in the same order: the task gives the bits it
 * gives on the widened float32 K and V. */

/* Decode: a unit's group*L query rows (few) over key chunk c. Partials:
 * part[(u*nch + c)*rows + r] = {m, l, Ohat[Ev]} with Ohat = P V / l, the
 * chunk's normalized output (a convex combination of V rows: no overflow).
 * Scores of all rows are taken per block of 16 keys while those K rows sit
 * in L1; keys with zero weight are skipped in P·V, so NaN in masked or
 * padded cache slots never leaks.
 * work: rows x (E + CHUNK) scaled queries and scores. */
static void FN(DNAME)(const cattn_attn_run *run, int64_t u, int64_t c, void *work_)
{
    const cattn_attn_args *g = run->a;
    const int64_t nch = run->nch;
    T *part = (T *)run->part, *work = (T *)work_;
    const int64_t E = g->E, Ev = g->Ev, L = g->L, rows = g->group * L;
    const int64_t s0 = c * CATTN_DECODE_CHUNK;
    const int64_t S = g->slen ? g->slen[u] : g->S;     /* this unit's keys */
    if (s0 >= S) {                  /* a ragged step's unit without chunk c: weight 0 */
        for (int64_t r = 0; r < rows; r++) {
            T *pr = part + ((u * nch + c) * rows + r) * (2 + Ev);
            pr[0] = -(T)INFINITY;
            pr[1] = 0;
        }
        return;
    }
    const int64_t n = cattn_min64(CATTN_DECODE_CHUNK, S - s0);
    const int64_t ldq = cattn_round_up(E, 16);
    const DKT *K = (const DKT *)g->K + g->offk[u] + s0 * g->rsk;
    const DKT *V = (const DKT *)g->V + g->offv[u] + s0 * g->rsv;
    T *qs = work, *sc = work + rows * ldq;
    const T ninf = -(T)INFINITY;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t gi = r / L, i = r % L, uq = u * g->group + gi;
        const T *q = (const T *)g->Q + g->offq[uq] + i * g->rsq;
        for (int64_t e = 0; e < E; e++) qs[r * ldq + e] = q[e] * (T)g->scale;
    }
    for (int64_t sb = 0; sb < n; sb += CATTN_DECODE_KEY_BLOCK)            /* scores */
        for (int64_t r = 0; r < rows; r++)
            DDOT(sc + r * CATTN_DECODE_CHUNK + sb, qs + r * ldq, K + sb * g->rsk, g->rsk,
                     cattn_min64(CATTN_DECODE_KEY_BLOCK, n - sb), E);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t gi = r / L, i = r % L, uq = u * g->group + gi;
        T *scr = sc + r * CATTN_DECODE_CHUNK;
        T *pr = part + ((u * nch + c) * rows + r) * (2 + Ev);
        int64_t lim = n;                                    /* causal limit */
        if (g->causal) lim = cattn_max64(0, cattn_min64(n, i + g->shift + 1 - s0));
        for (int64_t s = lim; s < n; s++) scr[s] = ninf;
        if (g->mkind == CATTN_MASK_BOOL) {
            const uint8_t *mk = (const uint8_t *)g->mask + g->offm[uq] + i * g->rsm + s0 * g->csm;
            for (int64_t s = 0; s < n; s++) if (!mk[s * g->csm]) scr[s] = ninf;
        } else if (g->mkind == CATTN_MASK_ADD) {
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
        /* Ohat = P V / l; with one chunk it is the output itself (the
         * combine's weight is exactly 1, or 0 with Ohat = 0: same bits) */
        T *o = nch == 1 ? (T *)g->O + g->offo[uq] + i * g->rso : pr + 2;
        DPV(o, scr, V, g->rsv, n, Ev);
    }
}

#undef DKT
#undef DNAME
#undef DDOT
#undef DPV
