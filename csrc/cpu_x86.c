/* cpu_x86.c — the x86 CPU file: decodes CPUID leaves (vendor, family and
 * model, brand, the instruction sets the CPU and OS support, the caches)
 * and reads this machine's with the CPUID and XGETBV instructions.
 * Contracts in cpuinfo.h.
 *
 * Not here: the block sizes derived from the caches, the decode-once cache
 * and the defaults of a build without a CPU file (cpuinfo.c), the kernel
 * paths (cpu.c). The decoder is plain C over a callback and builds on every
 * architecture (the tests feed it recorded leaves through cattn._ext); only
 * cattn_cpu_detect needs the instructions, under CATTN_CPU_X86 (cpuinfo.h).
 */
#include <string.h>
#include "cpuinfo.h"

#ifdef CATTN_CPU_X86
#include <cpuid.h>
#endif

#define BIT(r, n) (((r) >> (n)) & 1u)

static void leaf(cattn_cpuid_fn f, void *ctx, uint32_t l, uint32_t s, uint32_t r[4])
{
    r[0] = r[1] = r[2] = r[3] = 0;
    f(ctx, l, s, r);
}

/* leaf 4 (Intel) and 0x8000001D (AMD) share one layout:
 *   EAX[4:0] type (0 none, 1 data, 2 code, 3 unified), EAX[7:5] level,
 *   EAX[25:14] logical CPUs sharing - 1; EBX[11:0] line - 1,
 *   EBX[21:12] partitions - 1, EBX[31:22] ways - 1; ECX sets - 1. */
static int caches_from(cattn_cpuid_fn f, void *ctx, uint32_t l, cattn_cpu *cpu)
{
    int found = 0;
    for (uint32_t s = 0; s < 32; s++) {
        uint32_t r[4];
        leaf(f, ctx, l, s, r);
        const uint32_t type = r[0] & 31u, level = (r[0] >> 5) & 7u;
        if (type == 0) break;
        if (type == 2) continue;                                  /* code only */
        cattn_cache c;
        c.line = (int)(r[1] & 0xFFFu) + 1;
        c.ways = (int)(r[1] >> 22) + 1;
        c.shared = (int)((r[0] >> 14) & 0xFFFu) + 1;
        c.bytes = (int64_t)c.ways * (((r[1] >> 12) & 0x3FFu) + 1) * c.line * ((int64_t)r[2] + 1);
        if (level == 1) cpu->l1d = c;
        else if (level == 2) cpu->l2 = c;
        else if (level == 3) cpu->l3 = c;
        else continue;
        found = 1;
    }
    return found;
}

/* AMD's legacy associativity codes (leaf 0x80000006, APM vol. 3) -> the
 * lower bound of ways; 0 for reserved, "see 0x8000001D" and fully associative */
static int amd_ways(uint32_t code)
{
    static const int ways[16] = {0, 1, 2, 3, 4, 6, 8, 0, 16, 0, 32, 48, 64, 96, 128, 0};
    return ways[code & 15];
}

void cattn_cpu_parse(cattn_cpuid_fn f, void *ctx, uint64_t xcr0, cattn_cpu *cpu)
{
    uint32_t r[4];
    memset(cpu, 0, sizeof *cpu);
    leaf(f, ctx, 0, 0, r);
    const uint32_t max_basic = r[0];
    memcpy(cpu->vendor, &r[1], 4); memcpy(cpu->vendor + 4, &r[3], 4);
    memcpy(cpu->vendor + 8, &r[2], 4);
    cpu->vendor[12] = 0;
    leaf(f, ctx, 0x80000000u, 0, r);
    const uint32_t max_ext = r[0] >= 0x80000000u ? r[0] : 0;

    /* family / model: extended fields added as the SDM and APM say */
    uint32_t ecx1 = 0;
    if (max_basic >= 1) {
        leaf(f, ctx, 1, 0, r);
        const uint32_t fam = (r[0] >> 8) & 15u, mod = (r[0] >> 4) & 15u;
        cpu->family = (int)(fam == 15 ? fam + ((r[0] >> 20) & 255u) : fam);
        cpu->model = (int)(fam == 6 || fam == 15 ? mod + (((r[0] >> 16) & 15u) << 4) : mod);
        ecx1 = r[2];
    }
    /* the OS must save YMM (XCR0 bits 1, 2) and, for AVX-512, the opmask
     * and upper ZMM state (bits 5, 6, 7) */
    const int osxsave = BIT(ecx1, 27);
    const int os_avx = osxsave && (xcr0 & 0x6) == 0x6;
    const int os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;
    const int avx = BIT(ecx1, 28) && os_avx;
    cpu->fma = avx && BIT(ecx1, 12);
    cpu->f16c = avx && BIT(ecx1, 29);
    if (max_basic >= 7) {
        leaf(f, ctx, 7, 0, r);
        const uint32_t ebx7 = r[1], ecx7 = r[2], max7 = r[0];
        cpu->avx2 = avx && BIT(ebx7, 5);
        cpu->avx512f = os_avx512 && BIT(ebx7, 16);
        cpu->avx512dq = cpu->avx512f && BIT(ebx7, 17);
        cpu->avx512bw = cpu->avx512f && BIT(ebx7, 30);
        cpu->avx512vl = cpu->avx512f && BIT(ebx7, 31);
        cpu->avx512_vnni = cpu->avx512f && BIT(ecx7, 11);
        if (max7 >= 1) {
            leaf(f, ctx, 7, 1, r);
            cpu->avx512_bf16 = cpu->avx512f && BIT(r[0], 5);
        }
    }
    if (max_ext >= 0x80000004u) {
        uint32_t b[12];
        for (uint32_t i = 0; i < 3; i++) leaf(f, ctx, 0x80000002u + i, 0, b + 4 * i);
        memcpy(cpu->brand, b, 48);
        cpu->brand[48] = 0;
        char *s = cpu->brand;                                 /* trim spaces */
        while (*s == ' ') s++;
        memmove(cpu->brand, s, strlen(s) + 1);
        for (size_t n = strlen(cpu->brand); n && cpu->brand[n - 1] == ' '; n--)
            cpu->brand[n - 1] = 0;
    }

    /* caches: the deterministic leaves first (AMD's needs TOPOEXT) */
    int topoext = 0;
    if (max_ext >= 0x80000001u) {
        leaf(f, ctx, 0x80000001u, 0, r);
        topoext = BIT(r[2], 22);
    }
    if (max_basic >= 4 && caches_from(f, ctx, 4, cpu) && cpu->l1d.bytes)
        cpu->cache_source = "cpuid leaf 4";
    else if (topoext && max_ext >= 0x8000001Du && caches_from(f, ctx, 0x8000001Du, cpu)
             && cpu->l1d.bytes)
        cpu->cache_source = "cpuid leaf 0x8000001D";
    else if (max_ext >= 0x80000006u) {
        leaf(f, ctx, 0x80000005u, 0, r);                /* L1d: ECX[31:24] KiB */
        cpu->l1d = (cattn_cache){(int64_t)(r[2] >> 24) << 10, (int)((r[2] >> 16) & 255u),
                                 (int)(r[2] & 255u), 1};
        leaf(f, ctx, 0x80000006u, 0, r);                /* L2: ECX[31:16] KiB */
        cpu->l2 = (cattn_cache){(int64_t)(r[2] >> 16) << 10, amd_ways((r[2] >> 12) & 15u),
                                (int)(r[2] & 255u), 1};
        /* L3: EDX[31:18] in 512 KiB units */
        cpu->l3 = (cattn_cache){(int64_t)(r[3] >> 18) << 19, amd_ways((r[3] >> 12) & 15u),
                                (int)(r[3] & 255u), 1};
        cpu->cache_source = "cpuid leaves 0x80000005/6";
    }
    /* anything still unknown: typical x86-64 sizes */
    if (cpu->l1d.bytes <= 0) cpu->l1d = (cattn_cache){32 << 10, 8, 64, 1};
    if (cpu->l2.bytes <= 0) cpu->l2 = (cattn_cache){256 << 10, 4, 64, 1};
    if (cpu->l3.bytes <= 0) cpu->l3 = (cattn_cache){0, 0, 64, 1};
    if (!cpu->cache_source) cpu->cache_source = "defaults (no cache leaves)";
}

#ifdef CATTN_CPU_X86
static void real_cpuid(void *ctx, uint32_t l, uint32_t s, uint32_t out[4])
{
    (void)ctx;
    __cpuid_count(l, s, out[0], out[1], out[2], out[3]);
}

static uint64_t real_xcr0(void)
{
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    (void)a; (void)b; (void)d;
    if (!BIT(c, 27)) return 0;                                 /* no OSXSAVE */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* every x86-64 CPU answers CPUID: always read */
int cattn_cpu_detect(cattn_cpu *cpu)
{
    cattn_cpu_parse(real_cpuid, NULL, real_xcr0(), cpu);
    return 1;
}
#endif
