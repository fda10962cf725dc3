/* cpuinfo.c — the architecture-neutral half of the CPU description: the
 * GEMM block sizes derived from the caches, and this machine's description
 * (cattn_cpu_this), read once through the CPU file of the build. Contracts
 * in cpuinfo.h.
 *
 * Not here: reading a CPU (the CPU files: cpu_x86.c, CPUID). A build with
 * no CPU file for its architecture gets typical cache sizes and no
 * instruction sets (the portable path); cattn_cpu_detect's fallback below
 * says so. An ARM port: cpuinfo.h's CPU-file test, then cpu_arm.c.
 */
#include <string.h>
#include "common.h"
#include "cpuinfo.h"

static int64_t clamp_mult(int64_t v, int64_t mult, int64_t lo, int64_t hi)
{
    v = v / mult * mult;
    return v < lo ? lo : v > hi ? hi : v;
}

void cattn_gemm_blocks_for(const cattn_cpu *cpu, int mr, int nr, int elt, cattn_gemm_blocks *b)
{
    b->kc = clamp_mult(cpu->l1d.bytes / 2 / (nr * elt), 8, 64, CATTN_KC_MAX);
    b->mc = clamp_mult(cpu->l2.bytes * 9 / 32 / (b->kc * elt), mr, mr,
                       CATTN_MC_MAX / mr * mr);
    /* one core's share of L3 (a CPU without L3: twice L2) */
    const int64_t l3 = cpu->l3.bytes > 0 ? cpu->l3.bytes / (cpu->l3.shared > 0 ? cpu->l3.shared : 1)
                                         : 2 * cpu->l2.bytes;
    b->nc = clamp_mult(l3 / 4 / (b->kc * elt), nr, 16 * nr, CATTN_NC_MAX / nr * nr);
}

#ifndef CATTN_HAVE_CPU_FILE
/* no CPU file for this architecture: nothing read */
int cattn_cpu_detect(cattn_cpu *cpu)
{
    (void)cpu;
    return 0;
}
#endif

static cattn_cpu this_cpu;
static int this_done = 0;

const cattn_cpu *cattn_cpu_this(void)
{
    if (!this_done) {
        cattn_cpu c;
        if (!cattn_cpu_detect(&c)) {
            memset(&c, 0, sizeof c);
            strcpy(c.vendor, "unknown");
            c.l1d = (cattn_cache){32 << 10, 8, 64, 1};
            c.l2 = (cattn_cache){256 << 10, 4, 64, 1};
            c.l3 = (cattn_cache){0, 0, 64, 1};
            c.cache_source = "defaults (not x86-64)";
        }
        this_cpu = c;   /* same values on every call: a benign race at worst */
        this_done = 1;
    }
    return &this_cpu;
}
