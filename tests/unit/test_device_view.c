/*
 * Bucket plans' slices on a device (braid_device_exec_view_slice, src/exec/dev_slice.c) on
 * braid's emulated CUDA driver, bit for bit against a reference written here from the host
 * kernels (braid_kern_cast, braid_kern_reduce), one element at a time as exec_view.c
 * defines the result:
 *
 *   src  0 fp16 150 gap 163 fp32 563 bf16 653 gap 700 fp64 1033 e4m3 1153 e5m2 1230 gap 1300
 *   dst  0 fp32 60 gap 64 bf16 364 fp16 614 e4m3 714 gap 750 fp64 1150 e5m2 1240 fp32 1370
 *        gap 1400            (the flat element where each tensor or gap starts)
 *
 * Every slice shape a schedule makes (gather and send; receive, reduce, send and scatter;
 * receive, reduce and scatter; receive, send and scatter; receive and scatter), over wire
 * and accumulation types from fp8 to fp64, every op, with and without the op's pre-scale
 * and the destination's scale and accumulation, slots mapped for the device and not (the
 * staging memory), the destination the source's own tensors (in place) or others at
 * another offset, slices of random lengths up to the slot, which for narrow wire types
 * takes the executor several rounds of its accumulation buffers.
 *
 * The driver is emu's libcuda.so.1 of the build ($BRAID_BUILD_DIR, which make
 * check sets, else found from this program's path), loaded before braid looks for one;
 * BRAID_TEST_DRIVER=system uses whatever libcuda.so.1 the loader finds (a real GPU).
 */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "device/device.h"
#include "exec/dev_slice.h"
#include "kernels/kernels.h"

#define SLICE_BYTES 2048
#define NSRC 1300
#define NDST 1400
#define MAXSEGS 8

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- the driver ---- */

static int load_driver(void)
{
    const char *drv = getenv("BRAID_TEST_DRIVER"), *build = getenv("BRAID_BUILD_DIR");
    char path[PATH_MAX + 64], exe[PATH_MAX];

    if (drv != NULL && strcmp(drv, "system") == 0)
        return 1;
    if (build != NULL) {
        snprintf(path, sizeof(path), "%s/emu/.libs/libcuda.so.1", build);
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
            return 0;
        exe[n] = '\0';
        for (int up = 0; up < 3; up++) {    /* <build>/tests/unit/test_device_view */
            char *slash = strrchr(exe, '/');
            if (slash == NULL)
                return 0;
            *slash = '\0';
        }
        snprintf(path, sizeof(path), "%s/emu/.libs/libcuda.so.1", exe);
    }
    /* braid's dlopen("libcuda.so.1") then finds this one, by its soname */
    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) {
        fprintf(stderr, "test_device_view: cannot load the emulated driver: %s\n", dlerror());
        return 0;
    }
    return 1;
}

/* ---- views: device tensors and their host twins ---- */

typedef struct tensors {
    braid_seg_t dev[MAXSEGS], host[MAXSEGS];
    int nsegs;
} tensors_t;

static const braid_device_ops_t *ops;
static braid_device_exec_t *dx;

static void to_device(void *d, const void *h, size_t bytes)
{
    assert_int_equal(ops->copy_async(d, h, bytes, NULL), BRAID_OK);
    assert_int_equal(ops->stream_sync(NULL), BRAID_OK);
}

static void from_device(void *h, const void *d, size_t bytes)
{
    assert_int_equal(ops->copy_async(h, d, bytes, NULL), BRAID_OK);
    assert_int_equal(ops->stream_sync(NULL), BRAID_OK);
}

/* The executor's waits: a slice that takes a minute has hung. */
static braid_status_t wait_check(void *arg, double waited)
{
    (void)arg;
    return waited < 60 ? BRAID_OK : BRAID_ERR_TIMEOUT;
}

static const braid_device_wait_t wait_1min = { wait_check, NULL };

/* Mostly small multiples of 1/8 (sums stay exact long enough to be interesting), some
 * with full mantissas, large (fp8 saturates), tiny (subnormal), -0 and infinities, and
 * NaNs with payloads where `nans`. */
static double value(int nans)
{
    uint64_t r = rng();
    switch (r % 16) {
    case 4:
        if (nans) {
            uint64_t u = (rng() & 0x8007ffffffffffffull) | 0x7ff8000000000000ull;
            double d;
            memcpy(&d, &u, 8);
            return d;
        }
        return 1.0;
    case 0: return ldexp((double)(int64_t)rng(), -(int)((r >> 8) % 80) - 40);
    case 1: return ldexp((double)(int32_t)rng(), -140);
    case 2: return (r >> 8) % 2 ? 70000.0 : -1e6;
    case 3: return (r >> 8) % 7 == 0 ? ((r >> 16) % 2 ? INFINITY : -INFINITY) : -0.0;
    default: return (double)((int)((r >> 8) % 201) - 100) / 8.0;
    }
}

static void fill(braid_dtype_t dt, void *p, size_t n, int nans)
{
    for (size_t i = 0; i < n; i++) {
        double d = value(nans);
        braid_kern_cast(dt, (char *)p + i * braid_dtype_size(dt), BRAID_FP64, &d, 1, NULL, 0);
    }
}

/* Segments as { first, count, dtype } triples, ended by count 0. */
static void tensors_make(tensors_t *t, const size_t (*layout)[3], int nans)
{
    memset(t, 0, sizeof(*t));
    for (int i = 0; layout[i][1] != 0; i++, t->nsegs++) {
        braid_dtype_t dt = (braid_dtype_t)layout[i][2];
        size_t bytes = layout[i][1] * braid_dtype_size(dt);
        braid_seg_t s = { .first = layout[i][0], .count = layout[i][1], .dtype = dt };
        t->host[i] = s;
        t->dev[i] = s;
        t->host[i].ptr = malloc(bytes);
        assert_non_null(t->host[i].ptr);
        assert_int_equal(ops->mem_alloc(bytes, (void **)&t->dev[i].ptr), BRAID_OK);
        fill(dt, t->host[i].ptr, layout[i][1], nans);
        to_device(t->dev[i].ptr, t->host[i].ptr, bytes);
    }
}

static void tensors_free(tensors_t *t)
{
    for (int i = 0; i < t->nsegs; i++) {
        free(t->host[i].ptr);
        ops->mem_free(t->dev[i].ptr);
    }
}

/* Every device tensor equals its host twin, bit for bit. */
static void tensors_check(const tensors_t *t, const char *what, const char *name)
{
    for (int i = 0; i < t->nsegs; i++) {
        size_t sz = braid_dtype_size(t->host[i].dtype), bytes = t->host[i].count * sz;
        unsigned char *got = malloc(bytes);
        from_device(got, t->dev[i].ptr, bytes);
        for (size_t e = 0; e < t->host[i].count; e++) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + e * sz, sz);
            memcpy(&w, t->host[i].ptr + e * sz, sz);
            if (g != w)
                fail_msg("%s: %s tensor %d (%s), flat element %zu: got 0x%llx want 0x%llx",
                         name, what, i, braid_dtype_name(t->host[i].dtype),
                         t->host[i].first + e, (unsigned long long)g, (unsigned long long)w);
        }
        free(got);
    }
}

/* ---- the reference: exec_view.c's view_block, one element at a time ---- */

static const braid_seg_t *seg_at(const braid_view_t *v, size_t e)
{
    for (int i = 0; i < v->nsegs; i++)
        if (e >= v->segs[i].first && e < v->segs[i].first + v->segs[i].count)
            return &v->segs[i];
    return NULL;
}

static void ref_gather(const braid_view_t *v, size_t e, size_t n, braid_dtype_t acc, char *a,
                       const double *pre)
{
    size_t as = braid_dtype_size(acc);
    for (size_t i = 0; i < n; i++) {
        const braid_seg_t *s = seg_at(v, e + i);
        if (s == NULL)
            memset(a + i * as, 0, as);
        else
            braid_kern_cast(acc, a + i * as, s->dtype,
                            s->ptr + (e + i - s->first) * braid_dtype_size(s->dtype), 1, pre, 0);
    }
}

static void ref_scatter(const braid_view_t *v, size_t e, size_t n, braid_dtype_t vt,
                        const char *vals)
{
    for (size_t i = 0; i < n; i++) {
        const braid_seg_t *s = seg_at(v, e + i);
        if (s != NULL)
            braid_kern_cast(s->dtype, s->ptr + (e + i - s->first) * braid_dtype_size(s->dtype),
                            vt, vals + i * braid_dtype_size(vt), 1,
                            v->scaled ? &v->scale : NULL, v->accumulate);
    }
}

/* s with host views: the send slot's value into out, the destination tensors updated. */
static void ref_slice(const braid_device_view_slice_t *s, char *out)
{
    braid_dtype_t w = (braid_dtype_t)s->wire, acc = (braid_dtype_t)s->acc;
    size_t n = s->count;
    char *a = malloc(n * 8), *t = malloc(n * 8);
    const char *val = s->in;
    braid_dtype_t vt = w;

    if (s->src != NULL) {
        ref_gather(s->src, s->esrc, n, acc, a, s->pre);
        if (s->in != NULL && s->reduce) {
            braid_kern_cast(acc, t, w, s->in, n, NULL, 0);
            braid_kern_reduce(acc, (braid_opkind_t)s->op, a, t, a, n, NULL);
        }
        val = a;
        vt = acc;
        if (out != NULL)
            braid_kern_cast(w, out, acc, a, n, NULL, 0);
    } else if (out != NULL) {
        memcpy(out, s->in, n * braid_dtype_size(w));
    }
    if (s->dst != NULL)
        ref_scatter(s->dst, s->edst, n, out != NULL ? w : vt, out != NULL ? out : val);
    free(a);
    free(t);
}

/* ---- cases ---- */

enum { SHAPE_SEND, SHAPE_REDUCE_SEND_STORE, SHAPE_REDUCE_STORE, SHAPE_COPY_STORE, SHAPE_STORE,
       NSHAPES };
static const char *const shape_names[] = { "gather+send", "recv+reduce+send+scatter",
                                           "recv+reduce+scatter", "recv+send+scatter",
                                           "recv+scatter" };

static const size_t src_layout[][3] = {
    { 0, 150, BRAID_FP16 }, { 163, 400, BRAID_FP32 }, { 563, 90, BRAID_BF16 },
    { 700, 333, BRAID_FP64 }, { 1033, 120, BRAID_FP8_E4M3 }, { 1153, 77, BRAID_FP8_E5M2 },
    { 0, 0, 0 },
};
static const size_t dst_layout[][3] = {
    { 0, 60, BRAID_FP32 }, { 64, 300, BRAID_BF16 }, { 364, 250, BRAID_FP16 },
    { 614, 100, BRAID_FP8_E4M3 }, { 750, 400, BRAID_FP64 }, { 1150, 90, BRAID_FP8_E5M2 },
    { 1240, 130, BRAID_FP32 }, { 0, 0, 0 },
};

typedef struct vcase {
    int shape, op, mapped, in_place, dshift;
    braid_dtype_t wire, acc;
    const double *pre;
    int scaled, accumulate;
    double scale;
} vcase_t;

/* A host slot: mapped for the device (pinned) or plain malloc (the staging memory). */
static void *slot_alloc(int mapped)
{
    void *p = NULL;
    if (mapped) {
        braid_ptr_info_t info;
        assert_int_equal(ops->host_alloc(SLICE_BYTES, &p), BRAID_OK);
        assert_int_equal(ops->ptr_info(p, &info), BRAID_OK);
        assert_int_equal(info.kind, BRAID_MEM_PINNED);
        assert_non_null(info.dptr);
    } else {
        p = malloc(SLICE_BYTES);
        assert_non_null(p);
    }
    return p;
}

static void slot_free(void *p, int mapped)
{
    if (mapped)
        ops->host_free(p);
    else
        free(p);
}

static void run_case(const vcase_t *c, const char *name)
{
    tensors_t src, dstt;
    size_t ws = braid_dtype_size(c->wire), cap = SLICE_BYTES / ws;
    int has_src = c->shape <= SHAPE_REDUCE_STORE;
    int has_in = c->shape != SHAPE_SEND, has_out = c->shape == SHAPE_SEND ||
                 c->shape == SHAPE_REDUCE_SEND_STORE || c->shape == SHAPE_COPY_STORE;
    int has_dst = c->shape != SHAPE_SEND;
    char *in = slot_alloc(c->mapped), *out = slot_alloc(c->mapped), *want = malloc(SLICE_BYTES);

    /*
     * NaNs in what is read, not in what an accumulation adds to: with two NaN operands x86
     * returns the first, and which one that is in braid_kern_cast's plain C is the
     * compiler's choice (test_gpu_kernels covers the cast's NaNs).
     */
    tensors_make(&src, src_layout, !(c->in_place && c->accumulate));
    if (!c->in_place)
        tensors_make(&dstt, dst_layout, !c->accumulate);
    const tensors_t *dt = c->in_place ? &src : &dstt;
    braid_view_t sv_dev = { .segs = src.dev, .nsegs = src.nsegs };
    braid_view_t sv_host = { .segs = src.host, .nsegs = src.nsegs };
    braid_view_t dv_dev = { .segs = dt->dev, .nsegs = dt->nsegs, .accumulate = c->accumulate,
                            .scaled = c->scaled, .scale = c->scale };
    braid_view_t dv_host = dv_dev;
    dv_host.segs = dt->host;

    size_t nflat = has_src ? NSRC : NDST - c->dshift;
    for (size_t o = 0; o < nflat;) {
        size_t n = 1 + rng() % cap;
        n = n < nflat - o ? n : nflat - o;
        braid_device_view_slice_t s = {
            .src = has_src ? &sv_dev : NULL, .dst = has_dst ? &dv_dev : NULL,
            .esrc = o, .edst = o + c->dshift, .in = has_in ? in : NULL,
            .out = has_out ? out : NULL, .count = n, .wire = c->wire, .acc = c->acc,
            .op = c->op, .reduce = c->shape == SHAPE_REDUCE_SEND_STORE ||
                                   c->shape == SHAPE_REDUCE_STORE,
            .pre = c->pre,
        };
        if (has_in)
            fill(c->wire, in, n, 1);
        memset(out, 0x5a, SLICE_BYTES);
        memset(want, 0x5a, SLICE_BYTES);
        assert_int_equal(braid_device_exec_view_slice(dx, &s, &wait_1min), BRAID_OK);
        s.src = has_src ? &sv_host : NULL;
        s.dst = has_dst ? &dv_host : NULL;
        ref_slice(&s, has_out ? want : NULL);
        for (size_t i = 0; i < SLICE_BYTES; i += ws)
            if (memcmp(out + i, want + i, ws) != 0) {
                uint64_t g = 0, w = 0;
                memcpy(&g, out + i, ws);
                memcpy(&w, want + i, ws);
                fail_msg("%s: slice at %zu (%zu elements): send slot element %zu: got 0x%llx "
                         "want 0x%llx", name, o, n, i / ws, (unsigned long long)g,
                         (unsigned long long)w);
            }
        o += n;
    }
    tensors_check(dt, "destination", name);
    if (!c->in_place) {
        tensors_check(&src, "source", name);
        tensors_free(&dstt);
    }
    tensors_free(&src);
    slot_free(in, c->mapped);
    slot_free(out, c->mapped);
    free(want);
}

static void test_view_slices(void **state)
{
    static const braid_dtype_t types[][2] = {
        { BRAID_FP32, BRAID_FP32 }, { BRAID_FP16, BRAID_FP32 }, { BRAID_BF16, BRAID_FP32 },
        { BRAID_FP8_E4M3, BRAID_FP32 }, { BRAID_FP8_E5M2, BRAID_FP32 },
        { BRAID_FP64, BRAID_FP64 }, { BRAID_FP32, BRAID_FP64 }, { BRAID_BF16, BRAID_FP64 },
    };
    static const double pres[] = { 0.5, 1.0 / 3.0, -2.0 };
    static const double scales[] = { 0.25, -1.0 / 3.0, 3.0 };
    unsigned n = 0;
    (void)state;

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
        for (int shape = 0; shape < NSHAPES; shape++)
            for (int op = 0; op < BRAID_NUM_OPS; op++, n++) {
                char name[160];
                vcase_t c = {
                    .shape = shape, .op = op, .mapped = (int)(n % 2),
                    .in_place = shape <= SHAPE_REDUCE_STORE && n % 3 == 0,
                    .wire = types[t][0], .acc = types[t][1],
                    .pre = n % 4 < 2 ? NULL : &pres[n % 3],
                    .scaled = n % 5 < 2, .accumulate = (n / 2) % 2,
                    .scale = scales[n % 3],
                };
                c.dshift = c.in_place ? 0 : (int)(n % 3) * 50;
                snprintf(name, sizeof(name), "%s wire %s acc %s %s pre %g dst x%g%s, "
                         "slots %s, dst %s +%d", shape_names[shape], braid_dtype_name(c.wire),
                         braid_dtype_name(c.acc), braid_opkind_name((braid_opkind_t)op),
                         c.pre != NULL ? *c.pre : 1.0, c.scaled ? c.scale : 1.0,
                         c.accumulate ? " accumulated" : "", c.mapped ? "mapped" : "staged",
                         c.in_place ? "in place" : "apart", c.dshift);
                run_case(&c, name);
            }
    print_message("%u view slice cases\n", n);
    assert_true(n > 0);
}

/* Slices the executor refuses: nothing to read, a bad type, a slot that goes through the
 * staging memory and is larger than it is. */
static void test_view_refused(void **state)
{
    static char slot[SLICE_BYTES + 4];
    braid_view_t none = { .nsegs = 0 };
    braid_device_view_slice_t s = { .count = 4, .wire = BRAID_FP32, .acc = BRAID_FP32 };
    (void)state;

    assert_true(braid_device_exec_view_slice(dx, &s, &wait_1min) < 0);
    s.in = slot;
    s.acc = BRAID_NUM_DTYPES;
    assert_true(braid_device_exec_view_slice(dx, &s, &wait_1min) < 0);
    s.acc = BRAID_FP32;
    s.dst = &none;
    assert_int_equal(braid_device_exec_view_slice(dx, &s, &wait_1min), BRAID_OK);
    s.count = SLICE_BYTES / 4 + 1;
    assert_true(braid_device_exec_view_slice(dx, &s, &wait_1min) < 0);
}

static int setup(void **state)
{
    (void)state;
    setenv("BRAID_DEVICE", "cuda", 1);
    ops = braid_device();
    if (strcmp(ops->name, "cuda") != 0 || braid_device_count() < 1) {
        fprintf(stderr, "test_device_view: the CUDA backend did not load the driver\n");
        return -1;
    }
    if (ops->bind(0) < 0 || braid_device_exec_create(0, SLICE_BYTES, 0, &dx) < 0) {
        fprintf(stderr, "test_device_view: no device executor: %s\n", braid_err_last());
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    braid_device_exec_destroy(dx, 60);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_refused),
        cmocka_unit_test(test_view_slices),
    };
    if (!load_driver())
        return 99;
    return cmocka_run_group_tests(tests, setup, teardown);
}
