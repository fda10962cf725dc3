/* scratch.c — the drivers' scratch memory (cattn_aligned_alloc / free).
 *
 * A driver allocates its packing and tile buffers on every call and frees
 * them on return. Fresh memory from the system costs a page fault and the
 * kernel's zeroing per 4 KiB page on first touch: a MiniLM batch spent ~3%
 * of its time there (the int8 linear's quantized rows are megabytes). So
 * each calling thread keeps up to CATTN_SCRATCH_KEEP freed blocks (each at
 * most CATTN_SCRATCH_KEEP_BYTES) and hands them out again to calls that fit;
 * they are released when the thread exits. Only the calling (Python)
 * threads allocate; OpenMP workers use the blocks their caller passed.
 *
 * Each block carries its size in a header of CATTN_ALIGN bytes in front
 * of the pointer returned, which stays CATTN_ALIGN-aligned.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

typedef struct {
    void *raw[CATTN_SCRATCH_KEEP];        /* kept blocks (NULL: empty slot) */
    size_t size[CATTN_SCRATCH_KEEP];      /* their usable bytes */
} scratch_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_ok;

static void cache_release(void *c_)
{
    scratch_cache *c = c_;
    for (int i = 0; i < CATTN_SCRATCH_KEEP; i++) free(c->raw[i]);
    free(c);
}

static void cache_init(void)
{
    cache_ok = pthread_key_create(&cache_key, cache_release) == 0;
}

/* this thread's cache, created on first use; NULL if none can be */
static scratch_cache *cache_get(void)
{
    pthread_once(&cache_once, cache_init);
    if (!cache_ok) return NULL;
    scratch_cache *c = pthread_getspecific(cache_key);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (c && pthread_setspecific(cache_key, c) != 0) {
            free(c);
            c = NULL;
        }
    }
    return c;
}

void *cattn_aligned_alloc(size_t bytes)
{
    if (bytes == 0) bytes = CATTN_ALIGN;
    if (bytes > SIZE_MAX - CATTN_ALIGN) return NULL;
    scratch_cache *c = cache_get();
    if (c) {                               /* the smallest kept block that fits */
        int best = -1;
        for (int i = 0; i < CATTN_SCRATCH_KEEP; i++)
            if (c->raw[i] && c->size[i] >= bytes && (best < 0 || c->size[i] < c->size[best]))
                best = i;
        if (best >= 0) {
            char *raw = c->raw[best];
            c->raw[best] = NULL;
            return raw + CATTN_ALIGN;
        }
    }
    void *raw = NULL;
    if (posix_memalign(&raw, CATTN_ALIGN, bytes + CATTN_ALIGN) != 0) return NULL;
    memcpy(raw, &bytes, sizeof bytes);
    return (char *)raw + CATTN_ALIGN;
}

void cattn_aligned_free(void *p)
{
    if (!p) return;
    char *raw = (char *)p - CATTN_ALIGN;
    size_t bytes;
    memcpy(&bytes, raw, sizeof bytes);
    scratch_cache *c = bytes <= CATTN_SCRATCH_KEEP_BYTES ? cache_get() : NULL;
    if (c) {                 /* keep it in an empty slot, or in place of a smaller block */
        int slot = -1;
        for (int i = 0; i < CATTN_SCRATCH_KEEP; i++)
            if (!c->raw[i]) { slot = i; break; }
        if (slot < 0)
            for (int i = 0; i < CATTN_SCRATCH_KEEP; i++)
                if (c->size[i] < bytes && (slot < 0 || c->size[i] < c->size[slot])) slot = i;
        if (slot >= 0) {
            free(c->raw[slot]);
            c->raw[slot] = raw;
            c->size[slot] = bytes;
            return;
        }
    }
    free(raw);
}
