/* rows.c — the threaded drivers of softmax / log-softmax, layer norm, RMS
 * norm, activations and the exp test hook (rows_tmpl.h, instantiated for
 * float and double). Not here: any arithmetic (kernels/<isa>/rows.c,
 * act.c; numerics in kernels/ref/rows.c).
 */
#include "dispatch.h"
#include "threads.h"

#define T float
#define SFX f32
#define COLS CATTN_SMX_COLS_F32
#include "rows_tmpl.h"

#define T double
#define SFX f64
#define COLS CATTN_SMX_COLS_F64
#include "rows_tmpl.h"
