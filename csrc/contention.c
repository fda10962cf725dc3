/* contention.c — short parallel regions on the calling thread alone while
 * the CPU is shared (threads.h: cattn_region_*, cattn_short_threads).
 *
 * An OpenMP region ends when every thread of its team has arrived. On a
 * CPU shared with other busy processes a woken worker can wait a scheduler
 * slice (milliseconds) for a core, and a 50 us region then takes ms (a
 * MiniLM sentence went from 5 ms to 50-300 ms). Regions record when their
 * workers started; a start later than CATTN_LATE_START_S marks the CPU as
 * contended for a window, during which regions shorter than
 * CATTN_SHORT_WORK run on one thread (long ones keep their threads: a late
 * start costs them a small share). Only thread counts change, and every
 * kernel gives the same bits for any count.
 *
 * The window backs off: CATTN_CONTENDED_MIN_S after an isolated late start
 * (a virtual CPU descheduled once by its host: a fixed 0.1 s window there
 * ran ~7% of a short-sentence benchmark's calls on one thread, each 1.5x
 * slower), doubled for each late start within CATTN_CONTENDED_QUIET_S of
 * the previous window's end (the CPU stays shared), up to CATTN_CONTENDED_S.
 *
 * A process can turn the detection off (cattn_set_contention_detection):
 * `cattn serve` does, since there late starts come from its own event loop
 * and clients waking for each token, not from a busy neighbour, and one-thread
 * short regions made a single stream's decode 10-14% slower (2-core Zen 4).
 */
#include "threads.h"

#ifdef _OPENMP
static int64_t contended_until_ns;          /* omp_get_wtime() in ns; 0: never */
static int64_t window_ns;                   /* the last window's length */
static int detect = 1;                      /* late starts mark contention */

int cattn_set_contention_detection(int on)
{
    return __atomic_exchange_n(&detect, on ? 1 : 0, __ATOMIC_RELAXED);
}

static int64_t now_ns(void)
{
    return (int64_t)(omp_get_wtime() * 1e9);
}

int cattn_contended(void)
{
    return now_ns() < __atomic_load_n(&contended_until_ns, __ATOMIC_RELAXED);
}

void cattn_region_begin(cattn_region_t *r, int nt)
{
    r->nt = nt < CATTN_REGION_MAX_THREADS ? nt : CATTN_REGION_MAX_THREADS;
    for (int t = 0; t < r->nt; t++) r->arrive[t] = -1.0;
    r->t0 = omp_get_wtime();
}

void cattn_region_end(cattn_region_t *r)
{
    double late = 0.0;
    for (int t = 1; t < r->nt; t++)
        if (r->arrive[t] >= 0.0 && r->arrive[t] - r->t0 > late) late = r->arrive[t] - r->t0;
    if (late > CATTN_LATE_START_S && __atomic_load_n(&detect, __ATOMIC_RELAXED))
        cattn_note_late_start();
}

/* Races between threads only pick one of two nearby windows (relaxed). */
double cattn_note_late_start(void)
{
    const int64_t now = now_ns(), lo = (int64_t)(CATTN_CONTENDED_MIN_S * 1e9),
                  hi = (int64_t)(CATTN_CONTENDED_S * 1e9),
                  quiet = (int64_t)(CATTN_CONTENDED_QUIET_S * 1e9);
    const int64_t until = __atomic_load_n(&contended_until_ns, __ATOMIC_RELAXED);
    int64_t w = __atomic_load_n(&window_ns, __ATOMIC_RELAXED);
    w = until > 0 && now - until < quiet ? 2 * w : lo;
    w = w < lo ? lo : w > hi ? hi : w;
    __atomic_store_n(&window_ns, w, __ATOMIC_RELAXED);
    __atomic_store_n(&contended_until_ns, now + w, __ATOMIC_RELAXED);
    return (double)w * 1e-9;
}

void cattn_set_contended(double seconds)
{
    __atomic_store_n(&window_ns, seconds > 0 ? (int64_t)(seconds * 1e9) : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&contended_until_ns, seconds > 0 ? now_ns() + (int64_t)(seconds * 1e9) : 0,
                     __ATOMIC_RELAXED);
}
#else
int cattn_contended(void) { return 0; }
void cattn_region_begin(cattn_region_t *r, int nt) { r->nt = nt; r->t0 = 0.0; }
void cattn_region_end(cattn_region_t *r) { (void)r; }
void cattn_set_contended(double seconds) { (void)seconds; }
int cattn_set_contention_detection(int on) { (void)on; return 0; }
double cattn_note_late_start(void) { return 0.0; }
#endif
