/* attention.c — the fused attention's driver: picks the decode or flash
 * path, sizes the scratch once, runs one OpenMP parallel region and calls
 * the tile kernels of the dispatch table (kernels/attention_tiles_tmpl.h,
 * instantiated per ISA). Not here: any arithmetic on the data.
 *
 * Contract (cattn.h): O = softmax(Q K^T * scale + mask) V per (batch, head),
 * or the weights W = softmax(...) when args->W is set.
 * Legend: L queries, S keys, E head dim, Ev value dim; a "unit" is one
 * (batch, kv head) with `group` query heads.
 * Tasks never depend on the thread count: decode splits the keys in fixed
 * chunks combined in chunk order; flash gives each (query head, q-block)
 * to one thread. So results are bitwise identical for any n_threads.
 */
#include "dispatch.h"
#include "threads.h"

static int attention_run(cattn_attn_args *g, const cattn_attn_kernels *k, size_t tsize,
                         int n_threads)
{
    const int64_t rows = g->group * g->L;
    const int decode = !g->W && g->L <= CATTN_DECODE_MAX_ROWS;
    if (g->slen && !(decode && rows <= CATTN_DECODE_MAX_ROWS)) return CATTN_EARGS;
    const int64_t nuq = g->nkv * g->group, nqb = cattn_cdiv(g->L, k->br);
    cattn_attn_run run = {g, cattn_cdiv(g->S, k->bc), NULL, NULL, cattn_cdiv(g->S, CATTN_DECODE_CHUNK),
                          NULL};
    const int64_t ntask = decode ? g->nkv * run.nch : nuq * nqb;
    const double flops = 4.0 * (double)rows * g->nkv * g->S * (double)(g->E + g->Ev);
    const int nt = cattn_short_threads(
        cattn_threads_for(flops, CATTN_ATTN_FLOPS_PER_THREAD, ntask, n_threads), flops / 2);

    /* per-thread scratch (elements): decode scores + the combine's Ev
     * doubles, or one flash task's tiles; then the decode partials, then
     * the V block flags (bytes) */
    size_t per;
    if (decode) {
        per = (size_t)(rows * (cattn_round_up(g->E, 16) + CATTN_DECODE_CHUNK));
        const size_t comb = (size_t)g->Ev * sizeof(double) / tsize;
        per = per > comb ? per : comb;
    } else {
        per = k->task_scratch(g);
    }
    per = (size_t)cattn_round_up((int64_t)per, 16);
    const size_t part = decode ? (size_t)(g->nkv * run.nch * rows * (2 + g->Ev)) : 0;
    /* flash with outputs: V's blocks flagged first, and packed (vpk) when
     * more than one task reads each (several q-blocks or query heads per
     * kv head); a V block read once is read in place */
    const int scan = !decode && !g->W;
    const int pack = scan && nqb * g->group > 1;
    const size_t vpk = pack ? (size_t)cattn_round_up(g->nkv * g->S * cattn_round_up(g->Ev, k->nr), 16) : 0;
    const size_t flags = scan ? (size_t)(g->nkv * run.nblk) : 0;
    char *buf = cattn_aligned_alloc(tsize * (per * (size_t)nt + part + vpk) + flags);
    if (!buf) return CATTN_ENOMEM;
    run.part = buf + tsize * per * (size_t)nt;
    run.vpk = pack ? buf + tsize * (per * (size_t)nt + part) : NULL;
    run.vflags = scan ? (uint8_t *)buf + tsize * (per * (size_t)nt + part + vpk) : NULL;
    (void)nt;                                   /* unused without OpenMP */

    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        void *work = buf + tsize * per * (size_t)CATTN_TID();
        if (decode) {
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t t = 0; t < ntask; t++)
                k->decode_task(&run, t / run.nch, t % run.nch, work);
            if (run.nch != 1) {             /* one chunk: the tasks wrote O */
                CATTN_OMP(omp for schedule(static))
                for (int64_t t = 0; t < g->nkv * rows; t++)
                    k->decode_combine(&run, t / rows, t % rows, work);
            }
        } else {
            if (run.vflags) {
                CATTN_OMP(omp for schedule(static))
                for (int64_t t = 0; t < g->nkv * run.nblk; t++)
                    k->scan_v(&run, t / run.nblk, t % run.nblk);
            }
            /* heavy q-blocks first: the late ones under a causal mask (more
             * keys), else the full ones (the last block may be partial) */
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t t = 0; t < ntask; t++)
                k->flash_task(&run, t % nuq, g->causal ? nqb - 1 - t / nuq : t / nuq, work);
        }
    }
    cattn_region_end(&reg);
    cattn_aligned_free(buf);
    return CATTN_OK;
}

int cattn_attention_f32(cattn_attn_args *args, int n_threads)
{
    cattn_init();
    return attention_run(args, &cattn_kt.attn_f32, sizeof(float), n_threads);
}

/* float16 K and V (a float16 KV cache; cattn.h): the decode path reads them
 * through the table's decode_task_h (the bits of the widened values); the
 * flash path widens one unit's K and V at a time into scratch (S (E + Ev)
 * floats) and runs the float32 tiles on that unit alone. */
int cattn_attention_f32_kvh(cattn_attn_args *args, int n_threads)
{
    cattn_init();
    cattn_attn_kernels k = cattn_kt.attn_f32;
    if (!k.decode_task_h) return CATTN_EARGS;
    if (!args->W && args->L <= CATTN_DECODE_MAX_ROWS) {
        k.decode_task = k.decode_task_h;
        return attention_run(args, &k, sizeof(float), n_threads);
    }
    if (args->slen) return CATTN_EARGS;                 /* ragged steps are decode steps */
    const int64_t S = args->S, E = args->E, Ev = args->Ev, G = args->group;
    float *buf = cattn_aligned_alloc(sizeof(float) * (size_t)cattn_max64(1, S * (E + Ev)));
    if (!buf) return CATTN_ENOMEM;
    static const int64_t zero = 0;
    int st = CATTN_OK;
    for (int64_t u = 0; u < args->nkv && st == CATTN_OK; u++) {
        const uint16_t *K = (const uint16_t *)args->K + args->offk[u];
        const uint16_t *V = args->W ? NULL : (const uint16_t *)args->V + args->offv[u];
        float *kb = buf, *vb = buf + S * E;
        for (int64_t s = 0; s < S; s++) {
            for (int64_t e = 0; e < E; e++) kb[s * E + e] = cattn_h2f(K[s * args->rsk + e]);
            if (!args->W)
                for (int64_t e = 0; e < Ev; e++) vb[s * Ev + e] = cattn_h2f(V[s * args->rsv + e]);
        }
        cattn_attn_args one = *args;
        one.nkv = 1;
        one.K = kb; one.offk = &zero; one.rsk = E;
        one.V = vb; one.offv = &zero; one.rsv = Ev;
        one.offq = args->offq + u * G;
        if (args->offo) one.offo = args->offo + u * G;
        if (args->offm) one.offm = args->offm + u * G;
        if (args->offw) one.offw = args->offw + u * G;
        st = attention_run(&one, &k, sizeof(float), n_threads);
    }
    cattn_aligned_free(buf);
    return st;
}

int cattn_attention_f64(cattn_attn_args *args, int n_threads)
{
    cattn_init();
    return attention_run(args, &cattn_kt.attn_f64, sizeof(double), n_threads);
}
