/*
 * The public face of the host kernels: picks one ISA variant of reduce_impl.c (once, at
 * first use, from the CPU's features or BRAID_CPU_ISA) and forwards every call to its table.
 * Also the datatype helpers and the scalar conversions of kernels.h.
 *
 * The hot path costs one acquire load of the table pointer (a plain load on x86) and an
 * indirect call; the choice itself is made under pthread_once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/host/fp.h"
#include "kernels/host/reduce_impl.h"
#include "base/log.h"
#include "base/param.h"

/*
 * Copies in [COPY_NT_MIN, COPY_NT_MAX) go through the variant's streaming copy; others, and
 * all copies in the generic variant, through memcpy. Measured on a Sapphire Rapids VM: the
 * streaming copy beats glibc's memcpy by 1.3-1.7x from 2 to 32 MiB, and loses by ~20% at
 * 128 MiB, where glibc streams too, with a better (page-interleaved) loop.
 */
#define BRAID_KERN_COPY_NT_MIN ((size_t)1 << 20)
#define BRAID_KERN_COPY_NT_MAX ((size_t)64 << 20)

typedef struct kern_variant {
    const char *name;
    const braid_kern_table_t *table;
    int (*supported)(void);
} kern_variant_t;

/* Every extension the variant's -m flags let the compiler use must be present. */
static int kern_has_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("f16c");
}

static int kern_has_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

static int kern_has_generic(void)
{
    return 1;
}

/* Best first. */
static const kern_variant_t kern_variants[] = {
    { "avx512", &braid_kern_table_avx512, kern_has_avx512 },
    { "avx2", &braid_kern_table_avx2, kern_has_avx2 },
    { "generic", &braid_kern_table_generic, kern_has_generic },
};
#define KERN_NVARIANTS (sizeof(kern_variants) / sizeof(kern_variants[0]))

static _Atomic(const braid_kern_table_t *) kern_cur;
static pthread_once_t kern_once = PTHREAD_ONCE_INIT;

static const kern_variant_t *kern_variant_find(const char *name)
{
    for (size_t i = 0; i < KERN_NVARIANTS; i++)
        if (strcmp(kern_variants[i].name, name) == 0)
            return &kern_variants[i];
    return NULL;
}

static const braid_kern_table_t *kern_best(void)
{
    for (size_t i = 0; i < KERN_NVARIANTS; i++)
        if (kern_variants[i].supported())
            return kern_variants[i].table;
    return &braid_kern_table_generic;
}

static void kern_init_once(void)
{
    const char *want = braid_param_str(BRAID_P_CPU_ISA);
    const braid_kern_table_t *t = NULL;

    __builtin_cpu_init();
    if (want != NULL && want[0] != '\0' && strcmp(want, "auto") != 0) {
        const kern_variant_t *v = kern_variant_find(want);
        if (v == NULL)
            BRAID_WARN("BRAID_CPU_ISA=%s is not a kernel variant; use auto, avx512, avx2 or "
                       "generic (using the best one this cpu supports)", want);
        else if (!v->supported())
            BRAID_WARN("BRAID_CPU_ISA=%s is not supported by this cpu; use auto or a lesser "
                       "variant (using the best one this cpu supports)", want);
        else
            t = v->table;
    }
    if (t == NULL)
        t = kern_best();
    atomic_store_explicit(&kern_cur, t, memory_order_release);
    BRAID_INFO(BRAID_SUB_INIT, "host kernels: %s variant", t->name);
}

static inline const braid_kern_table_t *kern_table(void)
{
    const braid_kern_table_t *t = atomic_load_explicit(&kern_cur, memory_order_acquire);
    if (__builtin_expect(t == NULL, 0)) {
        pthread_once(&kern_once, kern_init_once);
        t = atomic_load_explicit(&kern_cur, memory_order_acquire);
    }
    return t;
}

const char *braid_kern_isa(void)
{
    return kern_table()->name;
}

int braid_kern_select_isa(const char *name)
{
    const kern_variant_t *v;

    kern_table();   /* let a first-use initialisation happen before, not after, this */
    if (name == NULL)
        return -1;
    if (strcmp(name, "auto") == 0) {
        atomic_store_explicit(&kern_cur, kern_best(), memory_order_release);
        return 0;
    }
    v = kern_variant_find(name);
    if (v == NULL || !v->supported())
        return -1;
    atomic_store_explicit(&kern_cur, v->table, memory_order_release);
    return 0;
}

/* ---- kernels: the API layer has validated dt and op; anything else is a no-op ---- */

void braid_kern_reduce(braid_dtype_t dt, braid_opkind_t op, void *dst, const void *a,
                       const void *b, size_t count, const braid_scalar_t *premul)
{
    if ((unsigned)dt >= BRAID_NUM_DTYPES || (unsigned)op >= BRAID_NUM_OPS || count == 0)
        return;
    kern_table()->reduce[dt][op](dst, a, b, count, premul);
}

void braid_kern_cast(braid_dtype_t ddt, void *dst, braid_dtype_t sdt, const void *src,
                     size_t count, const double *scale, int accumulate)
{
    if (count == 0 || !braid_dtype_is_float(ddt) || !braid_dtype_is_float(sdt))
        return;
    if (ddt == sdt && scale == NULL && !accumulate) {
        if (dst != src)
            memmove(dst, src, count * braid_dtype_size(ddt));
        return;
    }
    kern_table()->cast(ddt, dst, sdt, src, count, scale, accumulate);
}

void braid_kern_scale(braid_dtype_t dt, void *dst, const void *src, size_t count,
                      const braid_scalar_t *premul)
{
    if ((unsigned)dt >= BRAID_NUM_DTYPES || count == 0)
        return;
    if (premul == NULL) {
        if (dst != src)
            memcpy(dst, src, count * braid_dtype_size(dt));
        return;
    }
    kern_table()->scale[dt](dst, src, count, premul);
}

void braid_kern_divide(braid_dtype_t dt, void *dst, const void *src, size_t count,
                       uint64_t divisor)
{
    braid_kern_divide_fn_t fn;

    if ((unsigned)dt >= BRAID_NUM_DTYPES || count == 0)
        return;
    fn = kern_table()->divide[dt];
    if (fn != NULL)
        fn(dst, src, count, divisor);
}

void braid_kern_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return;
    if (bytes < BRAID_KERN_COPY_NT_MIN || bytes >= BRAID_KERN_COPY_NT_MAX)
        memcpy(dst, src, bytes);
    else
        kern_table()->copy_large(dst, src, bytes);
}

void braid_kern_copy_stream(void *dst, const void *src, size_t bytes)
{
    if (bytes != 0)
        kern_table()->copy_large(dst, src, bytes);
}

braid_scalar_t braid_scalar_load(braid_dtype_t dt, const void *p)
{
    braid_scalar_t s = { .u = 0 };
    union { int8_t i8; uint8_t u8; int32_t i32; uint32_t u32; int64_t i64; uint64_t u64;
            uint16_t h; float f; double d; } v;

    memcpy(&v, p, braid_dtype_size(dt));
    switch (dt) {
    case BRAID_INT8: s.i = v.i8; break;
    case BRAID_UINT8: s.u = v.u8; break;
    case BRAID_INT32: s.i = v.i32; break;
    case BRAID_UINT32: s.u = v.u32; break;
    case BRAID_INT64: s.i = v.i64; break;
    case BRAID_UINT64: s.u = v.u64; break;
    case BRAID_FP16: s.f = braid_fp_from_fp16(v.h); break;
    case BRAID_FP32: s.f = v.f; break;
    case BRAID_FP64: s.f = v.d; break;
    case BRAID_BF16: s.f = braid_fp_from_bf16(v.h); break;
    case BRAID_FP8_E4M3: s.f = braid_fp_from_e4m3(v.u8); break;
    case BRAID_FP8_E5M2: s.f = braid_fp_from_e5m2(v.u8); break;
    default: break;
    }
    return s;
}

/* ---- scalar conversions (fp.h inlines, for callers outside the kernels) ---- */

float braid_fp16_to_float(uint16_t h) { return braid_fp_from_fp16(h); }
uint16_t braid_float_to_fp16(float f) { return braid_fp_to_fp16(f); }
float braid_bf16_to_float(uint16_t h) { return braid_fp_from_bf16(h); }
uint16_t braid_float_to_bf16(float f) { return braid_fp_to_bf16(f); }
float braid_e4m3_to_float(uint8_t v) { return braid_fp_from_e4m3(v); }
uint8_t braid_float_to_e4m3(float f) { return braid_fp_to_e4m3(f); }
float braid_e5m2_to_float(uint8_t v) { return braid_fp_from_e5m2(v); }
uint8_t braid_float_to_e5m2(float f) { return braid_fp_to_e5m2(f); }
