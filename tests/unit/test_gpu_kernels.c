/*
 * Unit test of the GPU kernels (kernels/gpu), through their host build: the test looks the
 * kernels up in braid_emu_kernels[] and runs every thread of a grid in turn, as the
 * emulated driver does (emu_abi.h), then compares the outputs bit for bit with the host
 * kernels (kernels/kernels.h):
 *   nin 1      braid_kern_scale (a copy without premul), then braid_kern_divide
 *   nin 2      braid_kern_reduce exactly (input 0 scaled first when its mask bit is set)
 *   nin > 2    fp16/bf16/fp8: a reference written here that accumulates in fp32 and rounds
 *              once; other types: braid_kern_reduce pairwise, which is the same thing there
 * over every type and op, nin 1..8, premul masks (the multiplier by value or as a value in
 * memory, premul_ptr), integer postdiv, aligned, co-misaligned
 * and scattered pointers, in place, odd counts, several grid shapes, and inputs full of
 * NaNs, infinities, -0, subnormals and values that saturate fp8. Bytes around every output
 * must stay untouched. braid_k_cast against braid_kern_cast: every pair of float types, with
 * and without a scale and an accumulation, in place where the sizes allow, from every code
 * of fp8, fp16 and bf16 and from random, special and full-mantissa fp32 and fp64 values.
 * The message check of braid_k_copy and braid_k_reduce (kargs.h: msg): a record that
 * differs in any word stops the launch and is reported with its mark.
 * It also checks the image table (images.h) against configure's choices: the "emu" image,
 * a fatbin when nvcc was used, a code-object bundle for hipcc.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/gpu/emu_abi.h"
#include "kernels/gpu/images.h"
#include "kernels/gpu/kargs.h"
#include "kernels/host/fp.h"
#include "kernels/kernels.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int is_narrow(braid_dtype_t dt)
{
    return dt == BRAID_FP16 || dt == BRAID_BF16 || dt == BRAID_FP8_E4M3 || dt == BRAID_FP8_E5M2;
}

/* ---- the grid, as the emulator runs it ---- */

typedef struct grid {
    unsigned blocks, threads;
} grid_t;

static const grid_t grids[] = { { 1, 1 }, { 1, 32 }, { 3, 7 }, { 2, 64 }, { 4, 33 }, { 1, 256 } };
#define NGRIDS (sizeof(grids) / sizeof(grids[0]))

static const braid_emu_kernel_t *kernel(const char *name)
{
    for (const braid_emu_kernel_t *k = braid_emu_kernels; k->name != NULL; k++)
        if (strcmp(k->name, name) == 0)
            return k;
    fail_msg("kernel %s is not in braid_emu_kernels[]", name);
    return NULL;
}

static void launch(const char *name, grid_t g, braid_kargs_t args)
{
    const braid_emu_kernel_t *k = kernel(name);
    void *params[1] = { &args };

    braid_emu_gridDim = (braid_emu_dim3_t){ g.blocks, 1, 1 };
    braid_emu_blockDim = (braid_emu_dim3_t){ g.threads, 1, 1 };
    for (unsigned b = 0; b < g.blocks; b++)
        for (unsigned t = 0; t < g.threads; t++) {
            braid_emu_blockIdx = (braid_emu_dim3_t){ b, 0, 0 };
            braid_emu_threadIdx = (braid_emu_dim3_t){ t, 0, 0 };
            k->fn(params);
        }
}

/* ---- inputs ---- */

static const uint32_t specials32[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc12345, 0x7f800001,
    0xff812345, 0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff, 0x7149f2ca, 0x3f800000,
};
static const uint64_t specials64[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
    0x7ff8000000000000ull, 0xfff8000000012345ull, 0x7ff0000000000001ull, 0xfff4000000000abcull,
    0x7fefffffffffffffull, 0x0000000000000001ull, 0x800fffffffffffffull, 0x7e37e43c8800759cull,
    0x3ff0000000000000ull,
};
static const uint16_t specials_fp16[] = {
    0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x7bff, 0xfbff, 0x0001, 0x83ff, 0x3c00,
};
static const uint16_t specials_bf16[] = {
    0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x7f7f, 0xff7f, 0x0001, 0x807f, 0x3f80,
};
static const uint8_t specials_e4m3[] = {
    0x00, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x01, 0x87, 0x77, 0x38, 0x7d,
};
static const uint8_t specials_e5m2[] = {
    0x00, 0x80, 0x7c, 0xfc, 0x7d, 0x7e, 0xff, 0x7b, 0xfb, 0x01, 0x83, 0x3c,
};
#define PICK(_a) (_a)[rng() % (sizeof(_a) / sizeof((_a)[0]))]

/* A "nice" value: small multiples of 1/8, now and then large (fp8 saturates). */
static float nice(void)
{
    uint64_t r = rng();
    float v = (float)((int)(r % 201) - 100) / 8.0f;
    return (r >> 20) % 4 == 0 ? v * 40.0f : v;
}

static uint32_t narrow_code(braid_dtype_t dt, float f)
{
    switch (dt) {
    case BRAID_FP16: return braid_float_to_fp16(f);
    case BRAID_BF16: return braid_float_to_bf16(f);
    case BRAID_FP8_E4M3: return braid_float_to_e4m3(f);
    default: return braid_float_to_e5m2(f);
    }
}

static void fill_one(braid_dtype_t dt, unsigned char *p)
{
    uint64_t r = rng(), kind = r % 8, bits = rng();
    size_t sz = braid_dtype_size(dt);

    if (!braid_dtype_is_float(dt)) {
        /* the low bytes: each type's extremes are in there */
        static const uint64_t ispecial[] = { 0, 1, ~0ull, 0x8000000000000000ull,
                                             0x7fffffffffffffffull, 0x80, 0x7f, 0xff,
                                             0x80000000, 0x7fffffff, 0xffffffff };
        uint64_t v = kind == 0 ? PICK(ispecial)
                     : kind < 4 ? bits : (uint64_t)((int)(bits % 21) - 10);
        memcpy(p, &v, sz);   /* little-endian */
        return;
    }
    switch (dt) {
    case BRAID_FP32: {
        float f = kind == 0  ? braid_fp_from_bits(PICK(specials32))
                  : kind < 3 ? braid_fp_from_bits((uint32_t)bits)
                             : nice();
        memcpy(p, &f, 4);
        break;
    }
    case BRAID_FP64: {
        double d = nice();
        uint64_t u = kind == 0 ? PICK(specials64) : bits;
        if (kind < 3)
            memcpy(&d, &u, 8);
        memcpy(p, &d, 8);
        break;
    }
    default: {
        uint16_t c;
        if (kind == 0)
            c = dt == BRAID_FP16 ? PICK(specials_fp16) : dt == BRAID_BF16 ? PICK(specials_bf16)
                : dt == BRAID_FP8_E4M3 ? PICK(specials_e4m3) : PICK(specials_e5m2);
        else if (kind < 3)
            c = (uint16_t)bits;
        else
            c = (uint16_t)narrow_code(dt, nice());
        memcpy(p, &c, sz);
        break;
    }
    }
}

static void fill(braid_dtype_t dt, void *p, size_t count)
{
    for (size_t i = 0; i < count; i++)
        fill_one(dt, (unsigned char *)p + i * braid_dtype_size(dt));
}

static braid_scalar_t pick_premul(braid_dtype_t dt)
{
    static const double fp[] = { 0.5, -3.0, 1.0 / 3.0, 1e30, 0.0, -0.0, INFINITY, 65504.0 * 4,
                                 1e-40, 7.0 };
    static const uint64_t fpnan[] = { 0x7ff4000000012345ull, 0xfff8000000000abcull };
    static const uint64_t iv[] = { 3, ~0ull, 0x100000001ull, 0x8000000000000000ull, 255, 7 };
    braid_scalar_t s;
    if (!braid_dtype_is_float(dt)) {
        s.u = PICK(iv);
    } else if (rng() % 10 == 0) {
        s.u = PICK(fpnan);
    } else {
        s.f = PICK(fp);
    }
    return s;
}

/* ---- the reference ---- */

static float narrow_load(braid_dtype_t dt, const void *p, size_t i)
{
    switch (dt) {
    case BRAID_FP16: return braid_fp16_to_float(((const uint16_t *)p)[i]);
    case BRAID_BF16: return braid_bf16_to_float(((const uint16_t *)p)[i]);
    case BRAID_FP8_E4M3: return braid_e4m3_to_float(((const uint8_t *)p)[i]);
    default: return braid_e5m2_to_float(((const uint8_t *)p)[i]);
    }
}

static void narrow_store(braid_dtype_t dt, void *p, size_t i, float f)
{
    if (braid_dtype_size(dt) == 2)
        ((uint16_t *)p)[i] = (uint16_t)narrow_code(dt, f);
    else
        ((uint8_t *)p)[i] = (uint8_t)narrow_code(dt, f);
}

/* fp32 as the host kernels combine (kernels.h): x86 arithmetic, x's NaN when x is one,
 * fmax/fmin with -0 below +0. */
static float ref_op(braid_opkind_t op, float x, float y)
{
    switch (op) {
    case BRAID_OP_SUM: return isnan(x) ? x : x + y;
    case BRAID_OP_PROD: return isnan(x) ? x : x * y;
    case BRAID_OP_MAX:
        if (isnan(y))
            return x;
        if (isnan(x))
            return y;
        return x == y ? braid_fp_from_bits(braid_fp_bits(x) & braid_fp_bits(y)) : x > y ? x : y;
    default:
        if (isnan(y))
            return x;
        if (isnan(x))
            return y;
        return x == y ? braid_fp_from_bits(braid_fp_bits(x) | braid_fp_bits(y)) : x < y ? x : y;
    }
}

typedef struct rcase {
    braid_dtype_t dt;
    braid_opkind_t op;
    int nin;
    uint32_t mask;
    braid_scalar_t premul;
    uint64_t postdiv;
    size_t count;
    int via_ptr;            /* the multiplier comes as a value of dt in memory (premul_ptr) */
} rcase_t;

/* fp16/bf16/fp8: accumulate in fp32, round once. */
static void ref_narrow(const rcase_t *c, void *const *in, void *want)
{
    float p = (float)c->premul.f;
    for (size_t i = 0; i < c->count; i++) {
        float v = 0;
        for (int j = 0; j < c->nin; j++) {
            float y = narrow_load(c->dt, in[j], i);
            if ((c->mask >> j) & 1) {
                unsigned char t[2];
                narrow_store(c->dt, t, 0, ref_op(BRAID_OP_PROD, y, p));
                y = narrow_load(c->dt, t, 0);
            }
            v = j == 0 ? y : ref_op(c->op, v, y);
        }
        narrow_store(c->dt, want, i, v);
    }
}

static void ref_reduce(const rcase_t *c, void *const *in, void *want)
{
    if (c->nin > 2 && is_narrow(c->dt)) {
        ref_narrow(c, in, want);
        return;
    }
    braid_kern_scale(c->dt, want, in[0], c->count, c->mask & 1 ? &c->premul : NULL);
    for (int j = 1; j < c->nin; j++)
        braid_kern_reduce(c->dt, c->op, want, want, in[j], c->count,
                          (c->mask >> j) & 1 ? &c->premul : NULL);
    braid_kern_divide(c->dt, want, want, c->count, c->postdiv);
}

/* ---- running a case ---- */

#define GUARD 0xa5
#define SLACK 64   /* bytes before and after every buffer's data */

typedef struct buf {
    unsigned char *base;
    size_t off, bytes, cap;   /* data at base + SLACK + off, `bytes` long */
} buf_t;

static void buf_alloc(buf_t *b, size_t off, size_t bytes)
{
    b->off = off;
    b->bytes = bytes;
    b->cap = 2 * SLACK + off + bytes;
    b->base = aligned_alloc(64, (b->cap + 63) / 64 * 64);
    assert_non_null(b->base);
    memset(b->base, GUARD, b->cap);
}

static unsigned char *buf_data(const buf_t *b)
{
    return b->base + SLACK + b->off;
}

static void buf_check_guard(const buf_t *b, const char *what)
{
    for (size_t i = 0; i < b->cap; i++) {
        if (i == SLACK + b->off)
            i += b->bytes;
        if (i < b->cap && b->base[i] != GUARD)
            fail_msg("%s: byte %zd around the data was written", what,
                     (ptrdiff_t)i - (ptrdiff_t)(SLACK + b->off));
    }
}

static void report(const rcase_t *c, const char *what, const void *got, const void *want,
                   void *const *in, int layout, grid_t g)
{
    size_t sz = braid_dtype_size(c->dt), i = 0;
    uint64_t gv = 0, wv = 0;
    while (memcmp((const char *)got + i * sz, (const char *)want + i * sz, sz) == 0)
        i++;
    memcpy(&gv, (const char *)got + i * sz, sz);
    memcpy(&wv, (const char *)want + i * sz, sz);
    print_error("%s %s nin=%d mask=0x%x premul=0x%llx postdiv=%llu count=%zu layout=%d "
                "grid=%ux%u %s: [%zu] got 0x%llx want 0x%llx; inputs:",
                braid_dtype_name(c->dt), braid_opkind_name(c->op), c->nin, c->mask,
                (unsigned long long)c->premul.u, (unsigned long long)c->postdiv, c->count,
                layout, g.blocks, g.threads, what, i, (unsigned long long)gv,
                (unsigned long long)wv);
    for (int j = 0; j < c->nin; j++) {
        uint64_t v = 0;
        memcpy(&v, (const char *)in[j] + i * sz, sz);
        print_error(" 0x%llx", (unsigned long long)v);
    }
    print_error("\n");
    fail_msg("%s: bits differ", what);
}

/*
 * Layouts: 0 all 16-byte aligned, 1 all at one offset modulo 16 (the vector path after a
 * head), 2 offsets scattered (element by element), 3 in place (out[0] is in[0]).
 */
/* The premul as a value of dt (a device-resident ncclPreMulSum scalar), into p. */
static void scalar_store(braid_dtype_t dt, braid_scalar_t s, void *p)
{
    float f = (float)s.f;
    uint16_t h;
    uint8_t b;
    switch (dt) {
    case BRAID_FP64: memcpy(p, &s.f, 8); break;
    case BRAID_FP32: memcpy(p, &f, 4); break;
    case BRAID_FP16: h = braid_fp_to_fp16(f); memcpy(p, &h, 2); break;
    case BRAID_BF16: h = braid_fp_to_bf16(f); memcpy(p, &h, 2); break;
    case BRAID_FP8_E4M3: b = braid_fp_to_e4m3(f); memcpy(p, &b, 1); break;
    case BRAID_FP8_E5M2: b = braid_fp_to_e5m2(f); memcpy(p, &b, 1); break;
    default: memcpy(p, &s.u, braid_dtype_size(dt)); break;   /* little-endian low bytes */
    }
}

static void run_case(const rcase_t *c0, int layout, int two_outs, grid_t g)
{
    rcase_t cc = *c0, *c = &cc;
    uint64_t scalar[1] = { 0 };
    if (c->via_ptr) {   /* the kernel takes the value stored; the reference its exact value */
        scalar_store(c->dt, c->premul, scalar);
        c->premul = braid_scalar_load(c->dt, scalar);
    }
    size_t sz = braid_dtype_size(c->dt), nb = c->count * sz, per16 = 16 / sz;
    size_t common = per16 > 1 ? (1 + rng() % (per16 - 1)) * sz : 0;
    buf_t in[BRAID_KARGS_MAXIN], out[2];
    void *ref_in[BRAID_KARGS_MAXIN];
    unsigned char *want = malloc(nb + 1), *saved[BRAID_KARGS_MAXIN];
    braid_kargs_t k;

    memset(&k, 0, sizeof(k));
    for (int j = 0; j < c->nin; j++) {
        size_t off = layout == 1 ? common : layout == 2 ? (rng() % per16) * sz : 0;
        buf_alloc(&in[j], off, nb);
        fill(c->dt, buf_data(&in[j]), c->count);
        saved[j] = malloc(in[j].cap);
        memcpy(saved[j], in[j].base, in[j].cap);
        ref_in[j] = saved[j] + SLACK + off;
        k.in[j] = buf_data(&in[j]);
    }
    for (int o = 0; o < 1 + two_outs; o++) {
        size_t off = layout == 1 ? common : layout == 2 ? (rng() % per16) * sz : 0;
        if (o == 0 && layout == 3)
            out[0] = in[0];
        else
            buf_alloc(&out[o], off, nb);
        k.out[o] = buf_data(&out[o]);
    }
    k.count = c->count;
    k.premul.u = c->via_ptr ? ~c->premul.u : c->premul.u;   /* premul_ptr wins */
    k.premul_ptr = c->via_ptr ? scalar : NULL;
    k.postdiv = c->postdiv;
    k.nin = c->nin;
    k.dtype = c->dt;
    k.op = c->op;
    k.premul_mask = c->mask;

    ref_reduce(c, ref_in, want);
    launch(BRAID_KERNEL_REDUCE, g, k);

    for (int o = 0; o < 1 + two_outs; o++) {
        if (memcmp(buf_data(&out[o]), want, nb) != 0)
            report(c, o == 0 ? "out[0]" : "out[1]", buf_data(&out[o]), want, ref_in, layout, g);
        buf_check_guard(&out[o], o == 0 ? "out[0]" : "out[1]");
    }
    for (int j = layout == 3 ? 1 : 0; j < c->nin; j++)
        if (memcmp(in[j].base, saved[j], in[j].cap) != 0)
            fail_msg("input %d was written", j);

    /* for nin 2 the fp32 reference of this file must agree with the host kernels too */
    if (c->nin == 2 && is_narrow(c->dt)) {
        unsigned char *mine = malloc(nb + 1);
        ref_narrow(c, ref_in, mine);
        if (memcmp(mine, want, nb) != 0)
            report(c, "the test's reference", mine, want, ref_in, layout, g);
        free(mine);
    }

    for (int o = layout == 3 ? 1 : 0; o < 1 + two_outs; o++)
        free(out[o].base);
    for (int j = 0; j < c->nin; j++) {
        free(in[j].base);
        free(saved[j]);
    }
    free(want);
}

/* Every type and op, nin 1..8, with varied masks, postdiv, counts, layouts and grids. */
static void test_reduce_all(void **state)
{
    static const size_t counts[] = { 1, 2, 7, 15, 17, 33, 64, 100, 257, 1000 };
    static const uint64_t divs[] = { 0, 1, 2, 3, 7, 1000, 1ull << 40, ~0ull };
    unsigned n = 0;
    (void)state;

    for (int dt = 0; dt < BRAID_NUM_DTYPES; dt++)
        for (int op = 0; op < BRAID_NUM_OPS; op++)
            for (int nin = 1; nin <= BRAID_KARGS_MAXIN; nin++)
                for (int v = 0; v < 8; v++, n++) {
                    uint32_t all = (1u << nin) - 1;
                    rcase_t c = {
                        .dt = (braid_dtype_t)dt, .op = (braid_opkind_t)op, .nin = nin,
                        .mask = v == 0 ? 0 : v == 1 ? all : (uint32_t)rng() & all,
                        .premul = pick_premul((braid_dtype_t)dt),
                        .postdiv = divs[rng() % (sizeof(divs) / sizeof(divs[0]))],
                        .count = counts[(n + (unsigned)v) % (sizeof(counts) / sizeof(counts[0]))],
                        .via_ptr = v == 1 || v == 6,
                    };
                    run_case(&c, v % 4, v % 3 == 0, grids[n % NGRIDS]);
                }
}

/* nin 2 over every pair of values of a list (all 256 codes for fp8), every op, with and
 * without a premul on either input. */
static void pairs(braid_dtype_t dt, const void *vals, size_t nvals)
{
    size_t sz = braid_dtype_size(dt), count = nvals * nvals;
    unsigned char *a = malloc(count * sz), *b = malloc(count * sz);
    unsigned char *got = malloc(count * sz), *want = malloc(count * sz);

    for (size_t i = 0; i < nvals; i++)
        for (size_t j = 0; j < nvals; j++) {
            memcpy(a + (i * nvals + j) * sz, (const char *)vals + i * sz, sz);
            memcpy(b + (i * nvals + j) * sz, (const char *)vals + j * sz, sz);
        }
    for (int op = 0; op < BRAID_NUM_OPS; op++)
        for (uint32_t mask = 0; mask < 4; mask++) {
            rcase_t c = { .dt = dt, .op = (braid_opkind_t)op, .nin = 2, .mask = mask,
                          .premul = pick_premul(dt), .count = count };
            void *in[2] = { a, b };
            braid_kargs_t k = { .in = { a, b }, .out = { got, NULL }, .count = count,
                                .nin = 2, .dtype = dt, .op = op, .premul_mask = mask };
            k.premul.u = c.premul.u;
            ref_reduce(&c, in, want);
            launch(BRAID_KERNEL_REDUCE, grids[(op + mask) % NGRIDS], k);
            if (memcmp(got, want, count * sz) != 0)
                report(&c, "pairs", got, want, in, 0, grids[(op + mask) % NGRIDS]);
        }
    free(a);
    free(b);
    free(got);
    free(want);
}

static void test_reduce_pairs(void **state)
{
    uint8_t codes[256];
    uint64_t nice64[4] = { 0x3fe0000000000000ull, 0xc008000000000000ull, 0x41dfffffffc00000ull,
                           0x0010000000000000ull };
    uint64_t list64[sizeof(specials64) / 8 + 4];
    (void)state;

    for (int i = 0; i < 256; i++)
        codes[i] = (uint8_t)i;
    pairs(BRAID_FP8_E4M3, codes, 256);
    pairs(BRAID_FP8_E5M2, codes, 256);
    pairs(BRAID_FP16, specials_fp16, sizeof(specials_fp16) / 2);
    pairs(BRAID_BF16, specials_bf16, sizeof(specials_bf16) / 2);
    pairs(BRAID_FP32, specials32, sizeof(specials32) / 4);
    memcpy(list64, specials64, sizeof(specials64));
    memcpy(list64 + sizeof(specials64) / 8, nice64, sizeof(nice64));
    pairs(BRAID_FP64, list64, sizeof(list64) / 8);
}

/* Nothing is written for count 0, nin outside 1..8, an unknown type or op. */
static void test_reduce_nothing(void **state)
{
    unsigned char a[64], b[64], o[64], zero[64];
    braid_kargs_t k = { .in = { a, b }, .out = { o, NULL }, .count = 4, .nin = 2,
                        .dtype = BRAID_FP32, .op = BRAID_OP_SUM };
    (void)state;

    memset(a, 1, sizeof(a));
    memset(b, 2, sizeof(b));
    memset(o, 0, sizeof(o));
    memset(zero, 0, sizeof(zero));
    k.count = 0;
    launch(BRAID_KERNEL_REDUCE, grids[1], k);
    k.count = 4;
    k.nin = 0;
    launch(BRAID_KERNEL_REDUCE, grids[1], k);
    k.nin = BRAID_KARGS_MAXIN + 1;
    launch(BRAID_KERNEL_REDUCE, grids[1], k);
    k.nin = 2;
    k.dtype = BRAID_NUM_DTYPES;
    launch(BRAID_KERNEL_REDUCE, grids[1], k);
    k.nin = 1;
    launch(BRAID_KERNEL_REDUCE, grids[1], k);
    k.nin = 2;
    k.dtype = BRAID_FP32;
    k.op = BRAID_NUM_OPS;
    launch(BRAID_KERNEL_REDUCE, grids[1], k);
    assert_memory_equal(o, zero, sizeof(o));
}

/* The message check (kargs.h: msg): a record that matches lets braid_k_copy and
 * braid_k_reduce run; one that differs in any word makes them write nothing but, once,
 * the record found and the mark. A copy of no bytes only checks. */
static void test_msg_check(void **state)
{
    uint64_t rec[BRAID_MSG_WORDS] = { 7, 1000, 0x2030405, 4000 };
    uint64_t err[BRAID_MSG_WORDS + 1];
    float in[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];
    static const char *const kernels[] = { BRAID_KERNEL_COPY, BRAID_KERNEL_REDUCE };
    (void)state;
    for (int kn = 0; kn < 2; kn++)
        for (int w = -1; w < BRAID_MSG_WORDS; w++) {   /* -1: all match; else word w differs */
            braid_kargs_t k;
            memset(&k, 0, sizeof(k));
            memset(out, 0, sizeof(out));
            memset(err, 0, sizeof(err));
            k.in[0] = in;
            k.out[0] = out;
            k.count = kn == 0 ? sizeof(in) : 8;
            k.nin = 1;
            k.dtype = BRAID_FP32;
            k.msg = rec;
            k.msg_err = err;
            memcpy(k.msg_want, rec, sizeof(rec));
            if (w >= 0)
                k.msg_want[w] ^= 1u << w;
            k.msg_mark = 0x500000001ull;
            launch(kernels[kn], grids[4], k);
            if (w < 0) {
                assert_memory_equal(out, in, sizeof(in));
                assert_int_equal(err[BRAID_MSG_WORDS], 0);
            } else {
                static const float zero[8];
                assert_memory_equal(out, zero, sizeof(out));
                assert_memory_equal(err, rec, sizeof(rec));
                assert_int_equal(err[BRAID_MSG_WORDS], 0x500000001ull);
            }
        }
}

/* braid_k_copy: any sizes and byte offsets, one or two outputs. */
static void test_copy(void **state)
{
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 31, 100, 4096 + 13 };
    static const size_t offs[] = { 0, 3, 8, 15 };
    unsigned n = 0;
    (void)state;

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (size_t so = 0; so < 4; so++)
            for (size_t d = 0; d < 4; d++)
                for (int two = 0; two < 2; two++, n++) {
                    buf_t src, out[2];
                    braid_kargs_t k;
                    buf_alloc(&src, offs[so], sizes[s]);
                    buf_alloc(&out[0], offs[d], sizes[s]);
                    buf_alloc(&out[1], two && n % 3 ? offs[d] : offs[(d + 1) % 4], sizes[s]);
                    for (size_t i = 0; i < sizes[s]; i++)
                        buf_data(&src)[i] = (unsigned char)rng();
                    memset(&k, 0, sizeof(k));
                    k.in[0] = buf_data(&src);
                    k.out[0] = buf_data(&out[0]);
                    k.out[1] = two ? buf_data(&out[1]) : NULL;
                    k.count = sizes[s];
                    launch(BRAID_KERNEL_COPY, grids[n % NGRIDS], k);
                    for (int o = 0; o < 1 + two; o++) {
                        assert_memory_equal(buf_data(&out[o]), buf_data(&src), sizes[s]);
                        buf_check_guard(&out[o], "copy");
                    }
                    if (!two)
                        buf_check_guard(&out[1], "copy's unused out[1]");
                    free(src.base);
                    free(out[0].base);
                    free(out[1].base);
                }
}

/* ---- braid_k_cast ---- */

static const braid_dtype_t float_types[] = { BRAID_FP16, BRAID_FP32, BRAID_FP64, BRAID_BF16,
                                             BRAID_FP8_E4M3, BRAID_FP8_E5M2 };
#define NFLOATS (sizeof(float_types) / sizeof(float_types[0]))

/* Element i of p as fp64 (NaN stays NaN, fp8 and narrow formats widen exactly). */
static double elem_value(braid_dtype_t dt, const void *p, size_t i)
{
    double d;
    braid_kern_cast(BRAID_FP64, &d, dt, (const char *)p + i * braid_dtype_size(dt), 1, NULL, 0);
    return d;
}

/* Cast sources: every code of the 1- and 2-byte formats; fp32 and fp64 random bits,
 * specials and values with full mantissas around the narrow formats' ranges (so that
 * every rounding, fp64's double rounding through fp32 included, is exercised). */
static size_t cast_source(braid_dtype_t dt, void *p)
{
    size_t sz = braid_dtype_size(dt), n = sz == 1 ? 256 : sz == 2 ? 65536 : 4099;
    for (size_t i = 0; i < n; i++) {
        unsigned char *e = (unsigned char *)p + i * sz;
        uint64_t r = rng();
        if (sz <= 2) {
            uint16_t c = (uint16_t)i;
            memcpy(e, &c, sz);
        } else if (r % 3 != 0) {
            fill_one(dt, e);
        } else if (dt == BRAID_FP32) {
            float f = ldexpf((float)(int32_t)rng(), -(int)(r >> 8) % 64 - 8);
            memcpy(e, &f, 4);
        } else {
            double d = ldexp((double)(int64_t)rng(), -(int)(r >> 8) % 96 - 30);
            memcpy(e, &d, 8);
        }
    }
    return n;
}

/*
 * The accumulation's destination: random values of its type, but never a NaN where the
 * scaled source can be one too. With two NaN operands x86 returns the first, and which one
 * the compiler puts first in braid_kern_cast's plain C is its own choice.
 */
static void cast_dest(braid_dtype_t ddt, void *d, braid_dtype_t sdt, const void *src,
                      size_t n, const double *scale)
{
    static const float one_half = 1.5f;
    int finite_scale = scale == NULL || isfinite((float)*scale);
    fill(ddt, d, n);
    for (size_t i = 0; i < n; i++)
        if (isnan(elem_value(ddt, d, i)) && !(finite_scale && isfinite(elem_value(sdt, src, i))))
            braid_kern_cast(ddt, (char *)d + i * braid_dtype_size(ddt), BRAID_FP32, &one_half,
                            1, NULL, 0);
}

typedef struct ccase {
    braid_dtype_t ddt, sdt;
    const double *scale;
    int accumulate, in_place;
    grid_t g;
} ccase_t;

static void cast_report(const ccase_t *c, const void *got, const void *want, const void *src,
                        const void *dst0, size_t n)
{
    size_t ds = braid_dtype_size(c->ddt), ss = braid_dtype_size(c->sdt), i = 0;
    uint64_t gv = 0, wv = 0, sv = 0, dv = 0;
    while (i < n && memcmp((const char *)got + i * ds, (const char *)want + i * ds, ds) == 0)
        i++;
    memcpy(&gv, (const char *)got + i * ds, ds);
    memcpy(&wv, (const char *)want + i * ds, ds);
    memcpy(&sv, (const char *)src + i * ss, ss);
    memcpy(&dv, (const char *)dst0 + i * ds, ds);
    fail_msg("cast %s <- %s scale=%g accumulate=%d in_place=%d grid=%ux%u: [%zu] of %zu: "
             "src 0x%llx dst 0x%llx: got 0x%llx want 0x%llx", braid_dtype_name(c->ddt),
             braid_dtype_name(c->sdt), c->scale != NULL ? *c->scale : 1.0, c->accumulate,
             c->in_place, c->g.blocks, c->g.threads, i, n, (unsigned long long)sv,
             (unsigned long long)dv, (unsigned long long)gv, (unsigned long long)wv);
}

static void cast_case(const ccase_t *c)
{
    size_t ds = braid_dtype_size(c->ddt), ss = braid_dtype_size(c->sdt);
    unsigned char *src = malloc(65536 * 8);
    size_t n = cast_source(c->sdt, src);
    unsigned char *want = malloc(n * ds), *dst0 = malloc(n * ds);
    buf_t out;
    braid_kargs_t k;

    assert_non_null(src);
    buf_alloc(&out, (rng() % 4) * ds % 16, n * (ds > ss ? ds : ss));
    if (c->in_place) {
        memcpy(buf_data(&out), src, n * ss);
        memcpy(dst0, src, n * ds);
    } else if (c->accumulate) {
        cast_dest(c->ddt, dst0, c->sdt, src, n, c->scale);
        memcpy(buf_data(&out), dst0, n * ds);
    } else {
        memset(dst0, 0, n * ds);
    }
    memcpy(want, dst0, n * ds);
    braid_kern_cast(c->ddt, want, c->sdt, src, n, c->scale, c->accumulate);

    memset(&k, 0, sizeof(k));
    k.in[0] = c->in_place ? buf_data(&out) : src;
    k.out[0] = buf_data(&out);
    k.count = n;
    k.dtype = c->ddt;
    k.dtype_in = c->sdt;
    k.accumulate = c->accumulate;
    if (c->scale != NULL) {
        k.premul.f = *c->scale;
        k.premul_mask = 1;
    }
    launch(BRAID_KERNEL_CAST, c->g, k);
    if (memcmp(buf_data(&out), want, n * ds) != 0)
        cast_report(c, buf_data(&out), want, src, dst0, n);
    out.bytes = n * ds;
    buf_check_guard(&out, "cast");
    free(out.base);
    free(src);
    free(want);
    free(dst0);
}

/* Every pair of float types, with and without a scale and an accumulation. */
static void test_cast_all(void **state)
{
    static const double scales[] = { 0.5, -3.0, 1.0 / 3.0, 1e30, 0.0, -0.0, INFINITY, -INFINITY,
                                     65504.0 * 4, 1e-40, 7.0, 1e300, 1.0 };
    unsigned n = 0, ran = 0;
    (void)state;

    for (size_t d = 0; d < NFLOATS; d++)
        for (size_t s = 0; s < NFLOATS; s++)
            for (int v = 0; v < 6; v++, n++) {
                ccase_t c = {
                    .ddt = float_types[d], .sdt = float_types[s],
                    .scale = v & 1 ? &scales[rng() % (sizeof(scales) / sizeof(scales[0]))]
                                   : NULL,
                    .accumulate = (v >> 1) & 1,
                    .in_place = v >= 4 && braid_dtype_size(float_types[d]) ==
                                              braid_dtype_size(float_types[s]) &&
                                (float_types[d] == float_types[s] || v == 4),
                    .g = grids[n % NGRIDS],
                };
                if (v >= 4 && !c.in_place)
                    continue;
                cast_case(&c);
                ran++;
            }
    print_message("%u cast cases\n", ran);
    assert_true(ran > 0);
}

/* Nothing is written for count 0 or a type that is not floating-point. */
static void test_cast_nothing(void **state)
{
    unsigned char a[64], o[64], zero[64];
    braid_kargs_t k = { .in = { a }, .out = { o, NULL }, .count = 0, .dtype = BRAID_FP32,
                        .dtype_in = BRAID_FP16 };
    (void)state;

    memset(a, 1, sizeof(a));
    memset(o, 0, sizeof(o));
    memset(zero, 0, sizeof(zero));
    launch(BRAID_KERNEL_CAST, grids[1], k);
    k.count = 4;
    k.dtype = BRAID_INT32;
    launch(BRAID_KERNEL_CAST, grids[1], k);
    k.dtype = BRAID_FP32;
    k.dtype_in = BRAID_UINT8;
    launch(BRAID_KERNEL_CAST, grids[1], k);
    k.dtype_in = BRAID_NUM_DTYPES;
    launch(BRAID_KERNEL_CAST, grids[1], k);
    assert_memory_equal(o, zero, sizeof(o));
}

/* The emulator's table: every kernel, one braid_kargs_t each, NULL at the end. Without the
 * emulator linked in, params_to_host leaves every address as it is. */
static void test_emu_table(void **state)
{
    int n = 0;
    (void)state;

    for (const braid_emu_kernel_t *k = braid_emu_kernels; k->name != NULL; k++, n++) {
        braid_kargs_t a = { .in = { &n, &a }, .out = { &a.count, NULL } };
        void *params[1] = { &a };
        assert_non_null(k->fn);
        assert_int_equal(k->nparams, 1);
        assert_int_equal(k->param_sizes[0], sizeof(braid_kargs_t));
        k->params_to_host(params);
        assert_ptr_equal(a.in[0], &n);
        assert_ptr_equal(a.in[1], &a);
        assert_ptr_equal(a.out[0], &a.count);
        assert_null(a.out[1]);
    }
    assert_int_equal(n, 3);
    assert_non_null(kernel(BRAID_KERNEL_REDUCE));
    assert_non_null(kernel(BRAID_KERNEL_COPY));
    assert_non_null(kernel(BRAID_KERNEL_CAST));
}

static const braid_gpu_image_t *image(const char *kind)
{
    const braid_gpu_image_t *found = NULL;
    for (int i = 0; i < braid_gpu_nimages; i++)
        if (strcmp(braid_gpu_images[i].kind, kind) == 0) {
            assert_null(found);   /* one per kind */
            found = &braid_gpu_images[i];
        }
    return found;
}

/* The images that configure's toolchains made, and the emulator's, and the hiprtc source. */
static void test_images(void **state)
{
    const braid_gpu_image_t *emu = image("emu"), *cuda = image("cuda"), *hip = image("hip");
    (void)state;

    assert_non_null(emu);
    assert_string_equal(emu->archs, "host");
    assert_int_equal(emu->size, sizeof(BRAID_EMU_IMAGE_MAGIC));
    assert_memory_equal(emu->data, BRAID_EMU_IMAGE_MAGIC, sizeof(BRAID_EMU_IMAGE_MAGIC));
    assert_int_equal(braid_gpu_nimages, 1 + (cuda != NULL) + (hip != NULL));
#ifdef BRAID_GPU_CUDA_ARCHS
    static const unsigned char fatbin_magic[4] = { 0x50, 0xed, 0x55, 0xba };   /* 0xba55ed50 */
    assert_non_null(cuda);
    assert_string_equal(cuda->archs, BRAID_GPU_CUDA_ARCHS);
    assert_true(cuda->size > sizeof(fatbin_magic));
    assert_memory_equal(cuda->data, fatbin_magic, sizeof(fatbin_magic));
    assert_int_equal((uintptr_t)cuda->data % 8, 0);
    print_message("cuda image: %s, %zu bytes\n", cuda->archs, cuda->size);
#else
    assert_null(cuda);
#endif
#ifdef BRAID_GPU_HIP_ARCHS
    static const char bundle_magic[] = "__CLANG_OFFLOAD_BUNDLE__";
    assert_non_null(hip);
    assert_string_equal(hip->archs, BRAID_GPU_HIP_ARCHS);
    assert_true(hip->size > sizeof(bundle_magic));
    assert_memory_equal(hip->data, bundle_magic, sizeof(bundle_magic) - 1);
    assert_int_equal((uintptr_t)hip->data % 8, 0);
    print_message("hip image: %s, %zu bytes\n", hip->archs, hip->size);
#else
    assert_null(hip);
#endif
    assert_non_null(strstr(braid_gpu_hip_source, "braid_k_reduce"));
    assert_non_null(strstr(braid_gpu_hip_source, "braid_k_copy"));
    assert_non_null(strstr(braid_gpu_hip_source, "braid_k_cast"));
    assert_null(strstr(braid_gpu_hip_source, "#include \""));   /* every header inlined */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emu_table),
        cmocka_unit_test(test_images),
        cmocka_unit_test(test_reduce_nothing),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_msg_check),
        cmocka_unit_test(test_reduce_pairs),
        cmocka_unit_test(test_reduce_all),
        cmocka_unit_test(test_cast_nothing),
        cmocka_unit_test(test_cast_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
