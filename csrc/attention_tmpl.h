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

/* Scratch for one flash task, in elements. */
static size_t FN(attn_task_scratch)(const cattn_attn_args *g)
{
    const int64_t ldp = cattn_round_up(cattn_round_up(BR, MR), NR);
    const int64_t evp = cattn_round_up(g->Ev, NR);
    return (size_t)(BR * g->E)                          /* Q^T panels */
         + (size_t)(cattn_round_up(BC, MR) * ldp)       /* St / Pt */
         + (size_t)(ldp * evp)                          /* O accumulator */
         + (size_t)(4 * ldp)                            /* m, l, corr, lb */
         + (size_t)(MR * g->E)                          /* K tail rows */
         + (size_t)(BC * NR)                            /* V tail panel */
         + 6 * 16;                                      /* alignment slack */
}

/* One flash task: query rows [i0, i0+br) of (unit u, head g). If W is set
 * (attention_weights), pass 1 finds the row max/sum and pass 2 writes
 * W = exp(s - m) / l; otherwise O = softmax(S) V. */
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
    T *Oa = St + cattn_round_up(cattn_round_up(BC, MR) * ldp, 16);
    T *m = Oa + cattn_round_up(ldp * evp, 16), *l = m + ldp, *corr = l + ldp, *lb = corr + ldp;
    T *ktail = lb + ldp;
    T *vtail = ktail + cattn_round_up(MR * E, 16);
    const T ninf = -(T)INFINITY;

    int64_t s_end = S;
    if (g->causal) s_end = cattn_max64(0, cattn_min64(S, i0 + br + g->shift));
    pack_qt(qp, Q, g->rsq, br, brp, E, (T)g->scale);
    for (int64_t i = 0; i < ldp; i++) { m[i] = ninf; l[i] = 0; }
    if (!g->W)
        for (int64_t i = 0; i < brm * evp; i++) Oa[i] = 0;

    for (int pass = g->W ? 0 : 1; pass < 2; pass++) {
        for (int64_t s0 = 0; s0 < s_end; s0 += BC) {
            const int64_t bc = cattn_min64(BC, s_end - s0);
            /* St[s][i] = K[s0+s] · Q[i] * scale  (bc x brp) */
            for (int64_t ir = 0; ir < bc; ir += MR) {
                const T *a = K + (s0 + ir) * g->rsk;
                int64_t lai = g->rsk;
                if (ir + MR > bc) {                       /* tail rows: zero copy */
                    for (int64_t r = 0; r < MR; r++)
                        for (int64_t e = 0; e < E; e++)
                            ktail[r * E + e] = ir + r < bc ? a[r * g->rsk + e] : (T)0;
                    a = ktail;
                    lai = E;
                }
                for (int64_t jp = 0; jp < brp / NR; jp++)
                    ukr(E, a, 1, lai, qp + jp * NR * E, NR, St + ir * ldp + jp * NR, ldp, 0);
            }
            FN(attn_mask_tile)(g, St, ldp, mask, i0, br, s0, bc);
            if (pass == 0) {                /* weights pass 1: running max and sum */
                for (int64_t i = 0; i < brp; i++) lb[i] = m[i];
                for (int64_t s = 0; s < bc; s++)
                    for (int64_t i = 0; i < brp; i++) {
                        const T v = St[s * ldp + i];
                        lb[i] = v > lb[i] ? v : lb[i];
                    }
                for (int64_t i = 0; i < brp; i++) {
                    const T mu = lb[i] == ninf ? (T)0 : lb[i];
                    l[i] *= expf1(m[i] - mu);
                    m[i] = lb[i];
                    corr[i] = mu;
                }
                for (int64_t s = 0; s < bc; s++) expsub(St + s * ldp, corr, l, brp);
                continue;
            }
            if (g->W) {                     /* weights pass 2: normalized probabilities */
                for (int64_t i = 0; i < brp; i++) {
                    corr[i] = m[i] == ninf ? (T)0 : m[i];
                    lb[i] = 0;
                }
                for (int64_t s = 0; s < bc; s++) expsub(St + s * ldp, corr, lb, brp);
                T *W = (T *)g->W + g->offw[uq] + i0 * g->rsw + s0;
                for (int64_t i = 0; i < br; i++) {      /* masked (p == 0) stay 0 */
                    const T inv = l[i] > 0 ? (T)1 / l[i] : (T)0;
                    for (int64_t s = 0; s < bc; s++) {
                        const T p = St[s * ldp + i];
                        W[i * g->rsw + s] = p == (T)0 || l[i] == (T)0 ? (T)0
                                          : (l[i] > 0 ? p * inv : l[i]);
                    }
                }
                continue;
            }
            /* online softmax: new max, correction of old sums, P = exp(S - m) */
            for (int64_t i = 0; i < brp; i++) lb[i] = m[i];
            for (int64_t s = 0; s < bc; s++)
                for (int64_t i = 0; i < brp; i++) {
                    const T v = St[s * ldp + i];
                    lb[i] = v > lb[i] ? v : lb[i];
                }
            int rescale = 0;
            for (int64_t i = 0; i < brp; i++) {
                const T mu = lb[i] == ninf ? (T)0 : lb[i];
                corr[i] = expf1(m[i] - mu);
                rescale |= m[i] != lb[i] && l[i] != 0;
                m[i] = lb[i];
                lb[i] = mu;
            }
            for (int64_t i = 0; i < brp; i++) l[i] *= corr[i];
            for (int64_t s = 0; s < bc; s++) expsub(St + s * ldp, lb, l, brp);
            if (rescale)
                for (int64_t i = 0; i < br; i++)
                    if (corr[i] != (T)1)
                        for (int64_t j = 0; j < Ev; j++) Oa[i * evp + j] *= corr[i];
            for (int64_t s = 0; s < bc; s++)                    /* padded PV rows */
                for (int64_t i = brp; i < brm; i++) St[s * ldp + i] = 0;
            /* O += P · V over this block */
            const int careful = g->vbad && g->vbad[u * g->nblk + s0 / BC];
            if (!careful) {
                const T *Vb = V + s0 * g->rsv;
                for (int64_t jv = 0; jv < evp; jv += NR) {
                    const T *b = Vb + jv;
                    int64_t ldb = g->rsv;
                    if (jv + NR > Ev) {                          /* tail columns */
                        for (int64_t s = 0; s < bc; s++)
                            for (int64_t j = 0; j < NR; j++)
                                vtail[s * NR + j] = jv + j < Ev ? Vb[s * g->rsv + jv + j] : (T)0;
                        b = vtail;
                        ldb = NR;
                    }
                    for (int64_t ir = 0; ir < brm; ir += MR)
                        ukr(bc, St + ir, ldp, 1, b, ldb, Oa + ir * evp + jv, evp, 1);
                }
            } else {      /* non-finite V in block: only keys with weight > 0 */
                for (int64_t i = 0; i < br; i++)
                    for (int64_t s = 0; s < bc; s++) {
                        const T p = St[s * ldp + i];
                        if (p == (T)0) continue;
                        const T *vs = V + (s0 + s) * g->rsv;
                        for (int64_t j = 0; j < Ev; j++) Oa[i * evp + j] += p * vs[j];
                    }
            }
        }
    }
    if (g->W) {        /* rows past the causal limit or with no key: zeros */
        T *W = (T *)g->W + g->offw[uq] + i0 * g->rsw;
        for (int64_t i = 0; i < br; i++)
            for (int64_t s = s_end; s < S; s++) W[i * g->rsw + s] = 0;
        if (s_end == 0)
            for (int64_t i = 0; i < br; i++)
                for (int64_t s = 0; s < S; s++) W[i * g->rsw + s] = 0;
        return;
    }
    T *O = (T *)g->O + g->offo[uq] + i0 * g->rso;
    for (int64_t i = 0; i < br; i++) {
        const T li = l[i];
        const T inv = li > 0 ? (T)1 / li : (T)0;
        for (int64_t j = 0; j < Ev; j++)
            O[i * g->rso + j] = li == 0 ? (T)0 : (li > 0 ? Oa[i * evp + j] * inv : li);
    }
}

/* Decode: a unit's group*L query rows (few) over key chunk c. Partials:
 * part[(u*nch + c)*rows + r] = {m, l, O[Ev]}. Scores of all rows are taken
 * per block of 16 keys while those K rows sit in L1; keys with zero weight
 * are skipped in P·V, so NaN in masked or padded cache slots never leaks.
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
        pr[0] = mx;
        pr[1] = expsum(scr, mu, n);                         /* P = exp(S - m) */
        pv_rows(pr + 2, scr, V, g->rsv, n, Ev);             /* O = P · V */
    }
}

/* combine decode partials of row r of unit u in chunk order (log-sum-exp) */
static void FN(attn_decode_combine)(const cattn_attn_args *g, int64_t u, int64_t r, int64_t nch,
                                    const T *part)
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
    T lsum = 0;
    for (int64_t j = 0; j < Ev; j++) O[j] = 0;
    for (int64_t c = 0; c < nch; c++) {
        const T *pr = part + ((u * nch + c) * rows + r) * (2 + Ev);
        if (pr[1] == (T)0) continue;
        const T w = expf1(pr[0] - mu);
        lsum += w * pr[1];
        for (int64_t j = 0; j < Ev; j++) O[j] += w * pr[2 + j];
    }
    const T inv = lsum > 0 ? (T)1 / lsum : (T)0;
    for (int64_t j = 0; j < Ev; j++)
        O[j] = lsum == 0 ? (T)0 : (lsum > 0 ? O[j] * inv : lsum);
}

/* mark kv blocks (BC keys) of V holding a non-finite value */
static void FN(attn_scan_v)(const cattn_attn_args *g, int64_t u, int64_t b)
{
    const T *V = (const T *)g->V + g->offv[u] + b * BC * g->rsv;
    const int64_t n = cattn_min64(BC, g->S - b * BC);
    T acc = 0;
    for (int64_t s = 0; s < n; s++)
        for (int64_t j = 0; j < g->Ev; j++) acc += V[s * g->rsv + j] * (T)0;
    g->vbad[u * g->nblk + b] = acc != (T)0;   /* NaN (from NaN or inf) */
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
                FN(attn_decode_combine)(g, t / rows, t % rows, nch, part);
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
