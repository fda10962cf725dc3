/* threads.h — OpenMP in one place: the directive macro, thread ids, and
 * the thread policy of the row-wise kernels (rows.c: softmax, norms, activations).
 * Every split here is by fixed rows or chunks: which thread computes a
 * value never changes it, so results are bitwise identical for any count.
 */
#ifndef CATTN_THREADS_H
#define CATTN_THREADS_H

#include "common.h"

/* an OpenMP directive inside a macro or template; nothing without OpenMP */
#ifdef _OPENMP
#include <omp.h>
#define CATTN_OMP(...) _Pragma(#__VA_ARGS__)
#define CATTN_TID() omp_get_thread_num()
#define CATTN_NT() omp_get_num_threads()
#else
#define CATTN_OMP(...)
#define CATTN_TID() 0
#define CATTN_NT() 1
#endif

/* ---- contention (contention.c): short regions alone on a shared CPU ----
 * Around a parallel region of nt threads:
 *   cattn_region_t r; cattn_region_begin(&r, nt);
 *   omp parallel { cattn_region_arrive(&r); ... }
 *   cattn_region_end(&r);          -- a worker that started late marks the CPU
 * and pick the region's threads with cattn_short_threads(nt, work). */
#define CATTN_REGION_MAX_THREADS 64
typedef struct {
    double t0;                                   /* omp_get_wtime() at begin */
    double arrive[CATTN_REGION_MAX_THREADS];     /* each thread's start (-1: none) */
    int nt;
} cattn_region_t;

void cattn_region_begin(cattn_region_t *r, int nt);
void cattn_region_end(cattn_region_t *r);
/* cattn_contended, cattn_set_contended: cattn.h */

static inline void cattn_region_arrive(cattn_region_t *r)
{
#ifdef _OPENMP
    const int t = omp_get_thread_num();
    if (t > 0 && t < r->nt) r->arrive[t] = omp_get_wtime();
#else
    (void)r;
#endif
}

/* nt, or 1 for a region of less than CATTN_SHORT_WORK multiply-adds while
 * the CPU is contended */
static inline int cattn_short_threads(int nt, double work)
{
    return nt > 1 && work < CATTN_SHORT_WORK && cattn_contended() ? 1 : nt;
}

/* Threads for a row-wise pass over `elems` elements: 1 below per_thread
 * elements per thread (fork/join would dominate); cattn_rows_threads: the
 * cheap passes' CATTN_ROWS_MIN_PER_THREAD. */
static inline int cattn_rows_threads_min(int64_t elems, int64_t per_thread, int n_threads)
{
#ifdef _OPENMP
    int64_t nt = elems / per_thread;
    if (nt > n_threads) nt = n_threads;
    return nt < 1 ? 1 : (int)nt;
#else
    (void)elems; (void)per_thread; (void)n_threads;
    return 1;
#endif
}

static inline int cattn_rows_threads(int64_t elems, int n_threads)
{
    return cattn_rows_threads_min(elems, CATTN_ROWS_MIN_PER_THREAD, n_threads);
}

/* Rows handed out dynamically, ~CATTN_ROWS_CHUNK elements at a time, so a
 * thread that loses its core (shared machines) does not hold the others up. */
static inline int64_t cattn_rows_chunk(int64_t n)
{
    return n >= CATTN_ROWS_CHUNK ? 1 : CATTN_ROWS_CHUNK / (n > 0 ? n : 1);
}

/* Threads for work of `amount` units when each thread should get at least
 * `min_per_thread`, at most `tasks` and `n_threads`. */
static inline int cattn_threads_for(double amount, double min_per_thread, int64_t tasks,
                                    int n_threads)
{
#ifdef _OPENMP
    int64_t nt = (int64_t)(amount / min_per_thread) + 1;
    nt = cattn_min64(nt, cattn_min64(tasks, n_threads));
    return nt < 1 ? 1 : (int)nt;
#else
    (void)amount; (void)min_per_thread; (void)tasks; (void)n_threads;
    return 1;
#endif
}

#endif
