/* tokens.c — the token rows of a sentence model, out: the mean pooling
 * that ends them.
 * Single-threaded (microseconds per sentence); not here: the encoder.
 * Legend: T token rows, E width, B sequences, V vocabulary rows.
 *
 * cattn_mean_pool_f32 (the sentence embedding):
 *   m[b] = (sum of sequence b's rows, in row order, in double) / n_b
 *   out[b] = m[b] / max(||m[b]||_2, 1e-12) when normalize, else m[b],
 *   rounded to float32 once. x (T, E): sequence 0's rows, then 1's ...
 *   (T = sum of lengths); out (B, E); a sequence of no rows gives 0.
 *   Each sequence's vector depends on its rows alone (batch invariance).
 */
#include <math.h>
#include <stdlib.h>
#include "cattn.h"
#include "common.h"

int cattn_mean_pool_f32(float *out, const float *x, const int64_t *lengths, int64_t B,
                        int64_t E, int normalize)
{
    double *CATTN_RESTRICT acc = malloc(sizeof(double) * (size_t)(E > 0 ? E : 1));
    if (!acc) return CATTN_ENOMEM;
    const float *rows = x;
    for (int64_t b = 0; b < B; b++) {
        const int64_t n = lengths[b];
        for (int64_t e = 0; e < E; e++) acc[e] = 0;
        for (int64_t t = 0; t < n; t++, rows += E) {
            const float *CATTN_RESTRICT r = rows;
            for (int64_t e = 0; e < E; e++) acc[e] += (double)r[e];
        }
        if (n > 0)
            for (int64_t e = 0; e < E; e++) acc[e] /= (double)n;
        if (normalize) {
            double ss = 0;
            for (int64_t e = 0; e < E; e++) ss += acc[e] * acc[e];
            const double norm = sqrt(ss), d = norm > 1e-12 ? norm : 1e-12;
            for (int64_t e = 0; e < E; e++) acc[e] /= d;
        }
        float *CATTN_RESTRICT o = out + b * E;
        for (int64_t e = 0; e < E; e++) o[e] = (float)acc[e];
    }
    free(acc);
    return CATTN_OK;
}
