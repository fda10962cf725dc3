/* tools/emu/avx512_check.c — the kernel paths against each other, bit for
 * bit, in one process: for checking the AVX-512 path on a CPU that lacks it
 * (under an emulator: tools/emu/run.sh boots it in Bochs) or natively.
 *
 * cattn fills one dispatch table at load (cpu.c); here each path's table is
 * built by its own table function and swapped into cattn_kt before a call
 * through the public C API (cattn.h), so the drivers, threads and block
 * sizes are the ones the extension runs. Checks (each against the AVX2
 * path's bits, which the AVX-512 kernels promise; cattn_kt's block sizes):
 *   - GEMM float32 / float64: shapes with edges off every block, strided and
 *     transposed operands, bias + activation, 1 and 2 threads;
 *   - prepacked float32 linear, 1-40 rows and 300 rows;
 *   - int8 linear (AVX-512BW and, when the CPU has it, VNNI) and the exact
 *     int32 sums against an int64 computation; the portable path too;
 *   - fused attention float32 / float64: prefill and decode shapes, causal,
 *     masks, GQA, E and Ev off the tile widths; also against a float64
 *     reference within a tolerance;
 *   - the row kernels (softmax / log-softmax rows, activations, exp) on
 *     lengths around every vector width, with NaN, infinities, signed zeros,
 *     |x| at the GELU forms' boundary 3 and the exp limits; in place too.
 * Prints one line per check and "ALL DONE failures=N" last.
 * Shape legend: M, N, K (GEMM); B, H, L, S, E, Ev (attention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/reboot.h>
#include <termios.h>

#include "cattn.h"
#include "dispatch.h"
#include "cpuinfo.h"

static int failures = 0, checks = 0;
static cattn_dispatch_t kt_base, kt_ref, kt_avx2, kt_512, kt_512bw;
static int have512 = 0, vnni = 0;

static void use(const cattn_dispatch_t *kt) { cattn_kt = *kt; }

static uint64_t rs = 88172645463325252ull;
static double urand(void)   /* xorshift64: [-1, 1) */
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) / 4503599627370496.0 - 1.0;
}
static void fillf(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = (float)urand(); }
static void filld(double *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = urand(); }

static void report(const char *what, int ok)
{
    checks++;
    if (!ok) failures++;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    fflush(stdout);
}

/* ------------------------------------------------------------------ GEMM */
static void gemm_case(int64_t M, int64_t N, int64_t K, int transb, int strided, int bias_act,
                      int nt)
{
    const int64_t lda = K + (strided ? 3 : 0), ldb = transb ? K + (strided ? 5 : 0)
                                                             : N + (strided ? 5 : 0);
    float *A = malloc(sizeof(float) * (M * lda + 1)), *B = malloc(sizeof(float) * ((transb ? N : K) * ldb + 1));
    float *bias = malloc(sizeof(float) * (N + 1));
    double *Ad = malloc(sizeof(double) * (M * lda + 1)), *Bd = malloc(sizeof(double) * ((transb ? N : K) * ldb + 1));
    fillf(A, M * lda); fillf(B, (transb ? N : K) * ldb); fillf(bias, N);
    filld(Ad, M * lda); filld(Bd, (transb ? N : K) * ldb);
    float *C1 = calloc(M * N + 1, sizeof(float)), *C2 = calloc(M * N + 1, sizeof(float));
    double *D1 = calloc(M * N + 1, sizeof(double)), *D2 = calloc(M * N + 1, sizeof(double));
    const int64_t rsb = transb ? 1 : ldb, csb = transb ? ldb : 1;
    const int act = bias_act ? CATTN_ACT_GELU : CATTN_ACT_NONE;
    use(&kt_avx2);
    cattn_gemm_f32(C1, N, 1, A, lda, 1, B, rsb, csb, M, N, K, bias_act ? bias : NULL, act, nt);
    cattn_gemm_f64(D1, N, 1, Ad, lda, 1, Bd, rsb, csb, M, N, K, NULL, CATTN_ACT_NONE, nt);
    use(&kt_512);
    cattn_gemm_f32(C2, N, 1, A, lda, 1, B, rsb, csb, M, N, K, bias_act ? bias : NULL, act, nt);
    cattn_gemm_f64(D2, N, 1, Ad, lda, 1, Bd, rsb, csb, M, N, K, NULL, CATTN_ACT_NONE, nt);
    /* the float32 result against float64 sums: |err| <= K 2^-24 sum|a b| */
    int close = 1;
    for (int64_t i = 0; i < M && !bias_act; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int64_t p = 0; p < K; p++) {
                const double t = (double)A[i * lda + p] * (double)B[p * rsb + j * csb];
                s += t; sa += fabs(t);
            }
            if (fabs(s - C2[i * N + j]) > 1e-6 + 2 * (K + 2) * 5.97e-8 * sa) close = 0;
        }
    char what[160];
    snprintf(what, sizeof what, "gemm f32+f64 M=%lld N=%lld K=%lld transb=%d strided=%d bias+gelu=%d threads=%d",
             (long long)M, (long long)N, (long long)K, transb, strided, bias_act, nt);
    report(what, !memcmp(C1, C2, sizeof(float) * M * N) && !memcmp(D1, D2, sizeof(double) * M * N) && close);
    free(A); free(B); free(bias); free(Ad); free(Bd); free(C1); free(C2); free(D1); free(D2);
}

static void packed_case(int64_t M, int64_t N, int64_t K, int nt)
{
    float *A = malloc(sizeof(float) * M * K + 4), *W = malloc(sizeof(float) * N * K + 4);
    float *bias = malloc(sizeof(float) * N + 4);
    fillf(A, M * K); fillf(W, N * K); fillf(bias, N);
    float *P = malloc(sizeof(float) * cattn_packed_size_f32(N, K) + 64);
    cattn_pack_weight_f32(P, W, K, 1, N, K);
    float *C1 = calloc(M * N + 1, sizeof(float)), *C2 = calloc(M * N + 1, sizeof(float));
    use(&kt_avx2);
    cattn_linear_packed_f32(C1, N, 1, A, K, 1, P, M, N, K, bias, CATTN_ACT_RELU, nt);
    use(&kt_512);
    cattn_linear_packed_f32(C2, N, 1, A, K, 1, P, M, N, K, bias, CATTN_ACT_RELU, nt);
    char what[128];
    snprintf(what, sizeof what, "linear packed f32 M=%lld N=%lld K=%lld threads=%d",
             (long long)M, (long long)N, (long long)K, nt);
    report(what, !memcmp(C1, C2, sizeof(float) * M * N));
    free(A); free(W); free(bias); free(P); free(C1); free(C2);
}

/* ------------------------------------------------------------------ int8 */
static void int8_case(int64_t M, int64_t N, int64_t K, int act, int nt)
{
    const int64_t k2 = (K + 1) / 2, np = (N + 15) / 16 * 16;
    int8_t *qw = malloc(N * K + 1), *P = calloc(cattn_qpacked_size(N, K) + 64, 1);
    float *sw = calloc(np, sizeof(float)), *bias = malloc(sizeof(float) * N + 4);
    int32_t *colsum = calloc(np, sizeof(int32_t));
    for (int64_t i = 0; i < N * K; i++) qw[i] = (int8_t)(urand() * 127.5);
    for (int64_t j = 0; j < N; j++) {
        sw[j] = (float)(0.01 * (1.5 + urand()));
        for (int64_t k = 0; k < K; k++) colsum[j] += qw[j * K + k];
    }
    for (int64_t j = 0; j < N; j++)                                   /* cattn.h's layout */
        for (int64_t k = 0; k < K; k++)
            P[(j / 16) * k2 * 32 + (k / 2) * 32 + 2 * (j % 16) + (k % 2)] = qw[j * K + k];
    fillf(bias, N);
    float *A = malloc(sizeof(float) * M * K + 4);
    fillf(A, M * K);
    if (M > 2) { A[K + 1] = 300.0f; A[2 * K] = -1e-30f; }
    float *C[4];
    const cattn_dispatch_t *kts[4] = {&kt_ref, &kt_avx2, &kt_512bw, &kt_512};
    for (int t = 0; t < 4; t++) {
        C[t] = calloc(M * N + 1, sizeof(float));
        use(kts[t]);
        cattn_linear_int8(C[t], N, 1, A, K, 1, P, sw, colsum, M, N, K, bias, act, nt);
    }
    /* exact int32 sums against int64 */
    uint8_t *qa = malloc(M * K + 1);
    for (int64_t i = 0; i < M * K; i++) qa[i] = (uint8_t)(rs = rs * 6364136223846793005ull + 1, rs >> 56);
    int32_t *acc = malloc(sizeof(int32_t) * M * N + 4);
    int exact = 1;
    for (int t = 2; t < 4; t++) {
        use(kts[t]);
        cattn_qgemm_i32(acc, qa, P, M, N, K, nt);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                int64_t s = 0;
                for (int64_t k = 0; k < K; k++) s += (int64_t)qa[i * K + k] * qw[j * K + k];
                if (s != acc[i * N + j]) exact = 0;
            }
    }
    char what[160];
    snprintf(what, sizeof what, "int8 linear M=%lld N=%lld K=%lld act=%d threads=%d: portable = avx2 = avx512bw = %s; exact sums",
             (long long)M, (long long)N, (long long)K, act, nt, kt_512.int8_kernel);
    int same = 1;
    for (int t = 1; t < 4; t++)
        if (memcmp(C[0], C[t], sizeof(float) * M * N)) { same = 0; printf("  path %d differs\n", t); }
    report(what, same && exact);
    for (int t = 0; t < 4; t++) free(C[t]);
    free(qw); free(P); free(sw); free(bias); free(colsum); free(A); free(qa); free(acc);
}

/* ------------------------------------------------------------- attention */
static void attn_case(int dbl, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                      int64_t E, int64_t Ev, int causal, int mask, int nt)
{
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    const int64_t group = Hq / Hkv, nkv = B * Hkv, nq = B * Hq;
    char *Q = malloc(es * nq * L * E + 8), *K = malloc(es * nkv * S * E + 8),
         *V = malloc(es * nkv * S * Ev + 8), *O1 = calloc(nq * L * Ev + 1, es),
         *O2 = calloc(nq * L * Ev + 1, es);
    uint8_t *mk = malloc(nq * L * S + 1);
    for (int64_t i = 0; i < nq * L * S; i++) mk[i] = urand() > -0.7;
    int64_t *offq = malloc(8 * nq), *offo = malloc(8 * nq), *offk = malloc(8 * nkv),
            *offv = malloc(8 * nkv), *offm = malloc(8 * nq);
    for (int64_t u = 0; u < nkv; u++) { offk[u] = u * S * E; offv[u] = u * S * Ev; }
    for (int64_t h = 0; h < nq; h++) { offq[h] = h * L * E; offo[h] = h * L * Ev; offm[h] = h * L * S; }
    if (dbl) { filld((double *)Q, nq * L * E); filld((double *)K, nkv * S * E); filld((double *)V, nkv * S * Ev); }
    else { fillf((float *)Q, nq * L * E); fillf((float *)K, nkv * S * E); fillf((float *)V, nkv * S * Ev); }
    cattn_attn_args a;
    memset(&a, 0, sizeof a);
    a.Q = Q; a.offq = offq; a.rsq = E; a.K = K; a.offk = offk; a.rsk = E;
    a.V = V; a.offv = offv; a.rsv = Ev; a.offo = offo; a.rso = Ev;
    a.mask = mask ? mk : NULL; a.mkind = mask ? 1 : 0; a.offm = offm; a.rsm = S; a.csm = 1;
    a.nkv = nkv; a.group = group; a.L = L; a.S = S; a.E = E; a.Ev = Ev;
    a.scale = 1.0 / sqrt((double)E); a.causal = causal; a.shift = S - L;
    int rc = 0;
    a.O = O1; use(&kt_avx2);
    rc |= dbl ? cattn_attention_f64(&a, nt) : cattn_attention_f32(&a, nt);
    a.O = O2; use(&kt_512);
    rc |= dbl ? cattn_attention_f64(&a, nt) : cattn_attention_f32(&a, nt);
    /* float64 reference of the AVX-512 result */
    int close = 1;
    double *sc = malloc(sizeof(double) * S + 8);
    for (int64_t h = 0; h < nq && close; h++) {
        const int64_t u = h / group;
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY, l = 0;
            for (int64_t s = 0; s < S; s++) {
                int vis = (!causal || s <= i + S - L) && (!mask || mk[offm[h] + i * S + s]);
                double d = 0;
                for (int64_t e = 0; e < E; e++)
                    d += (dbl ? ((double *)Q)[offq[h] + i * E + e] * ((double *)K)[offk[u] + s * E + e]
                              : (double)((float *)Q)[offq[h] + i * E + e] * ((float *)K)[offk[u] + s * E + e]);
                sc[s] = vis ? d * a.scale : -INFINITY;
                if (sc[s] > mx) mx = sc[s];
            }
            for (int64_t s = 0; s < S; s++) { sc[s] = mx == -INFINITY ? 0 : exp(sc[s] - mx); l += sc[s]; }
            for (int64_t j = 0; j < Ev; j++) {
                double o = 0;
                for (int64_t s = 0; s < S; s++)
                    o += sc[s] * (dbl ? ((double *)V)[offv[u] + s * Ev + j] : ((float *)V)[offv[u] + s * Ev + j]);
                o = l > 0 ? o / l : 0;
                const double got = dbl ? ((double *)O2)[offo[h] + i * Ev + j] : ((float *)O2)[offo[h] + i * Ev + j];
                if (fabs(got - o) > (dbl ? 1e-12 : 2e-5) * (1 + sqrt((double)(S + E)))) close = 0;
            }
        }
    }
    char what[200];
    snprintf(what, sizeof what, "attention %s B=%lld Hq=%lld Hkv=%lld L=%lld S=%lld E=%lld Ev=%lld causal=%d mask=%d threads=%d",
             dbl ? "f64" : "f32", (long long)B, (long long)Hq, (long long)Hkv, (long long)L,
             (long long)S, (long long)E, (long long)Ev, causal, mask, nt);
    report(what, rc == 0 && !memcmp(O1, O2, es * nq * L * Ev) && close);
    free(Q); free(K); free(V); free(O1); free(O2); free(mk); free(offq); free(offo);
    free(offk); free(offv); free(offm); free(sc);
}

/* ------------------------------------------------------------ row kernels
 * Each entry of the avx512 table against the avx2 one, called directly. */
static const int64_t row_lens[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65,
                                   100, 257, 511, 512, 513, 1030};
#define NLENS ((int)(sizeof row_lens / sizeof row_lens[0]))

/* values of scale `sc`, with specials at a few positions (kind 1: NaN and
 * infinities; kind 2: zeros and the gelu boundary |x| = 3; kind 3: an all
 * -inf row) */
static double row_value(int64_t i, int64_t n, double sc, int kind)
{
    if (kind == 3) return -INFINITY;
    const double u = urand() * sc;
    if (kind == 1 && n > 4 && i % 13 == 5) return (i / 13) % 3 == 0 ? NAN : (i / 13) % 3 == 1 ? INFINITY : -INFINITY;
    if (kind == 2 && i % 5 == 2) {
        const double sp[8] = {-0.0, 0.0, 3.0, -3.0, nextafter(3.0, 4.0), nextafter(-3.0, -4.0), 88.7, -104.0};
        return sp[(i / 5) % 8];
    }
    return u;
}

/* the same bits, except that any NaN equals any NaN: which NaN's payload
 * and sign survive an operation with two NaN operands depends on operand
 * order, which the compiler may swap (a + b = b + a) */
static int same_f32(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(a + i, b + i, sizeof(float))) return 0;
    return 1;
}

static int same_f64(const double *a, const double *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(a + i, b + i, sizeof(double))) return 0;
    return 1;
}

static void rows_f32(const char *name, int kind_max, double sc,
                     void (*call)(const cattn_dispatch_t *, float *, const float *, int64_t))
{
    int ok = 1, inplace_ok = 1;
    for (int kind = 0; kind <= kind_max; kind++)
        for (int l = 0; l < NLENS; l++) {
            const int64_t n = row_lens[l];
            float *x = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n),
                  *y2 = malloc(sizeof(float) * n), *y3 = malloc(sizeof(float) * n);
            for (int64_t i = 0; i < n; i++) x[i] = (float)row_value(i, n, sc, kind);
            call(&kt_avx2, y1, x, n);
            call(&kt_512, y2, x, n);
            memcpy(y3, x, sizeof(float) * n);
            call(&kt_512, y3, y3, n);
            if (!same_f32(y1, y2, n)) ok = 0;
            if (!same_f32(y1, y3, n)) inplace_ok = 0;
            free(x); free(y1); free(y2); free(y3);
        }
    char what[160];
    snprintf(what, sizeof what, "rows %s float32 (lengths 1-1030; specials; in place %s)", name,
             inplace_ok ? "same" : "DIFFERENT");
    report(what, ok && inplace_ok);
}

static void rows_f64(const char *name, int kind_max, double sc,
                     void (*call)(const cattn_dispatch_t *, double *, const double *, int64_t))
{
    int ok = 1;
    for (int kind = 0; kind <= kind_max; kind++)
        for (int l = 0; l < NLENS; l++) {
            const int64_t n = row_lens[l];
            double *x = malloc(sizeof(double) * n), *y1 = malloc(sizeof(double) * n),
                   *y2 = malloc(sizeof(double) * n);
            for (int64_t i = 0; i < n; i++) x[i] = row_value(i, n, sc, kind);
            call(&kt_avx2, y1, x, n);
            call(&kt_512, y2, x, n);
            if (!same_f64(y1, y2, n)) ok = 0;
            free(x); free(y1); free(y2);
        }
    char what[160];
    snprintf(what, sizeof what, "rows %s float64 (lengths 1-1030; specials)", name);
    report(what, ok);
}

static void c_smx32(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->softmax_row_f32(y, x, n, 0); }
static void c_lsm32(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->softmax_row_f32(y, x, n, 1); }
static void c_smx64(const cattn_dispatch_t *k, double *y, const double *x, int64_t n) { k->softmax_row_f64(y, x, n, 0); }
static void c_lsm64(const cattn_dispatch_t *k, double *y, const double *x, int64_t n) { k->softmax_row_f64(y, x, n, 1); }
static void c_relu(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->act_f32(y, x, n, CATTN_ACT_RELU); }
static void c_gelu(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->act_f32(y, x, n, CATTN_ACT_GELU); }
static void c_gelut(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->act_f32(y, x, n, CATTN_ACT_GELU_TANH); }
static void c_silu(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->act_f32(y, x, n, CATTN_ACT_SILU); }
static void c_exp32(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->exp_f32(y, x, n, 0); }
static void c_expn32(const cattn_dispatch_t *k, float *y, const float *x, int64_t n) { k->exp_f32(y, x, n, 1); }
static void c_exp64(const cattn_dispatch_t *k, double *y, const double *x, int64_t n) { k->exp_f64(y, x, n, 0); }
static void c_expn64(const cattn_dispatch_t *k, double *y, const double *x, int64_t n) { k->exp_f64(y, x, n, 1); }

static void rows_checks(void)
{
    rows_f32("softmax", 3, 30.0, c_smx32);
    rows_f32("log_softmax", 3, 30.0, c_lsm32);
    rows_f64("softmax", 3, 300.0, c_smx64);
    rows_f64("log_softmax", 3, 300.0, c_lsm64);
    rows_f32("relu", 2, 5.0, c_relu);
    rows_f32("gelu (|x| up to 5)", 2, 5.0, c_gelu);
    rows_f32("gelu (|x| up to 20)", 2, 20.0, c_gelu);
    rows_f32("gelu_tanh", 2, 12.0, c_gelut);
    rows_f32("silu", 2, 40.0, c_silu);
    rows_f32("exp", 2, 110.0, c_exp32);
    rows_f32("exp (x <= 0 form)", 2, 110.0, c_expn32);
    rows_f64("exp", 2, 800.0, c_exp64);
    rows_f64("exp (x <= 0 form)", 2, 800.0, c_expn64);
}

static int run(int argc);

/* as a VM's init (pid 1: tools/emu/run.sh), power the machine off after */
int main(int argc, char **argv)
{
    (void)argv;
    const int rc = run(argc);
    if (getpid() == 1) {
        fflush(stdout);
        tcdrain(STDOUT_FILENO);   /* the serial line drained before power-off */
        sleep(2);
        sync();
        reboot(RB_POWER_OFF);
    }
    return rc;
}

static int run(int argc)
{
    cattn_init();
    const cattn_cpu *cpu = cattn_cpu_this();
    printf("cpu: %s | %s | avx2 %d fma %d avx512 f %d bw %d vl %d dq %d vnni %d bf16 %d\n",
           cpu->vendor, cpu->brand, cpu->avx2, cpu->fma, cpu->avx512f, cpu->avx512bw,
           cpu->avx512vl, cpu->avx512dq, cpu->avx512_vnni, cpu->avx512_bf16);
    printf("default path: %s (int8: %s); built: %s; available: %s\n", cattn_kernel_path(),
           cattn_int8_kernel(), cattn_built_paths(), cattn_available_paths());
    kt_base = cattn_kt;
    have512 = strstr(cattn_available_paths(), "avx512") != NULL;
    vnni = cpu->avx512_vnni;
#ifdef CATTN_SIMDE
    /* tools/emu/simde.sh: the AVX-512 kernels are SIMDe's portable code */
    printf("SIMDE: the AVX-512 kernels run as SIMDe's portable intrinsics (VNNI included)\n");
    have512 = cpu->avx2 && cpu->fma;
    vnni = have512;
#endif
    /* CATTN_CHECK_SELFTEST=1: the AVX2 table in the AVX-512 slots (checks
     * this program, not the AVX-512 kernels, on any AVX2 CPU); =2: the
     * portable table there (whose float sums differ: the checks must fail) */
    const char *st = getenv("CATTN_CHECK_SELFTEST");
    const int selftest = st && (st[0] == '1' || st[0] == '2') && cpu->avx2 && cpu->fma;
    if ((!have512 || !cpu->avx2) && !selftest) {
        printf("this CPU lacks the AVX-512 path: nothing to compare\nALL DONE failures=0 checks=0 skipped\n");
        return argc > 1 ? 0 : 2;
    }
    /* as cpu.c builds a table: the portable entries, then the path's */
    cattn_dispatch_t *tabs[4] = {&kt_ref, &kt_avx2, &kt_512, &kt_512bw};
    for (int t = 0; t < 4; t++) {
        memset(tabs[t], 0, sizeof *tabs[t]);
        cattn_kernels_ref(tabs[t]);
        tabs[t]->gemm_f32 = kt_base.gemm_f32;
        tabs[t]->gemm_f64 = kt_base.gemm_f64;
    }
    cattn_kernels_avx2(&kt_avx2);
    if (selftest) {
        printf("SELFTEST: the AVX2 kernels stand in for the AVX-512 ones\n");
        if (st[0] == '1') {
            cattn_kernels_avx2(&kt_512);
            cattn_kernels_avx2(&kt_512bw);
        }
    } else {
        cattn_kernels_avx512(&kt_512, vnni);
        cattn_kernels_avx512(&kt_512bw, 0);
    }
    if (vnni && !selftest)
        report("int8: the VNNI kernel passed its load check (kernels/avx512/table.c vnni_agrees)",
               strstr(kt_512.int8_kernel, "failed") == NULL);
#ifdef CATTN_SIMDE
    goto int8_only;    /* tools/emu/simde.sh: the other kernels are not SIMDe's */
#endif
    const int64_t sizes[][3] = {{1, 1, 1}, {5, 17, 3}, {12, 16, 8}, {13, 33, 257}, {24, 48, 64},
                                {37, 70, 300}, {100, 129, 513}, {250, 40, 31}};
    for (int s = 0; s < 8; s++)
        for (int tb = 0; tb < 2; tb++)
            gemm_case(sizes[s][0], sizes[s][1], sizes[s][2], tb, s % 2, s == 5 && tb, 1 + (s % 2));
    gemm_case(0, 5, 7, 0, 0, 0, 1);
    gemm_case(130, 260, 40, 1, 1, 1, 2);
    for (int64_t m = 1; m <= 13; m += 3) packed_case(m, 70, 300, 1);
    packed_case(40, 48, 600, 2);
    packed_case(300, 33, 129, 2);
#ifdef CATTN_SIMDE
int8_only:;
#endif
    /* tiles of 1-5 rows (MR_I8 = 5): 1, 2, 3, 4, 5, 5+3, 5+4, 5+5+3, 8x5+1;
     * 200 rows on one thread: the row-block tasks */
    const int64_t qs[][3] = {{1, 16, 2}, {2, 17, 5}, {3, 17, 5}, {4, 40, 31}, {5, 33, 64},
                             {8, 64, 768}, {9, 20, 7}, {13, 100, 129}, {41, 16, 40},
                             {200, 70, 300}};
    for (int s = 0; s < 10; s++) int8_case(qs[s][0], qs[s][1], qs[s][2], s % 3 == 1 ? CATTN_ACT_GELU : s % 3 == 2 ? CATTN_ACT_RELU : CATTN_ACT_NONE, 1 + s % 2);
#ifdef CATTN_SIMDE
    printf("ALL DONE failures=%d checks=%d (int8 only: SIMDe)\n", failures, checks);
    return failures != 0;
#endif
    for (int dbl = 0; dbl < 2; dbl++) {
        attn_case(dbl, 1, 2, 2, 40, 40, 32, 32, 0, 0, 1);
        attn_case(dbl, 2, 4, 2, 100, 130, 64, 48, 1, 0, 2);
        attn_case(dbl, 1, 3, 1, 97, 200, 20, 23, 0, 1, 2);
        attn_case(dbl, 1, 2, 2, 1, 300, 64, 64, 0, 0, 1);        /* decode */
        attn_case(dbl, 2, 4, 4, 5, 70, 17, 31, 1, 1, 2);           /* decode, causal, mask */
        attn_case(dbl, 1, 1, 1, 200, 400, 64, 64, 1, 0, 2);        /* several kv blocks */
    }
    rows_checks();
    printf("ALL DONE failures=%d checks=%d\n", failures, checks);
    return failures != 0;
}
