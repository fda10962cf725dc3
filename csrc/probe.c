/* probe.c — a memory-read probe for the benchmarks: the weight-bandwidth
 * limit of a decode step is the bytes it reads over what a plain read
 * loop streams on the same CPU in the same run (NumPy's np.dot reads
 * slower than the loop on some machines). Not a kernel: nothing calls it
 * but benchmarks/.
 *
 *   cattn_read_probe: the xor of every 64-bit word of p[0:bytes) (bytes a
 *   multiple of 8), read once, split across nt threads in contiguous parts
 */
#include "cattn.h"
#include "threads.h"

uint64_t cattn_read_probe(const void *p, size_t bytes, int nt)
{
    const uint64_t *w = (const uint64_t *)p;
    const int64_t n = (int64_t)(bytes / 8);
    uint64_t acc = 0;
    if (nt < 1) nt = 1;
    CATTN_OMP(omp parallel for num_threads(nt) schedule(static) reduction(^ : acc) if (nt > 1))
    for (int64_t i = 0; i < n; i += 8) {
        uint64_t a = 0;
        const int64_t e = i + 8 < n ? i + 8 : n;
        for (int64_t k = i; k < e; k++) a ^= w[k];
        acc ^= a;
    }
    return acc;
}
