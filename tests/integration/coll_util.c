/*
 * coll_check helpers: every NCCL datatype encoded and decoded from double (the narrow float
 * formats from their bit fields, rounding to nearest even), the families of test values,
 * buffers with guard bytes, and failure reports.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

#define GUARD_BYTES 64
#define GUARD_BYTE 0xa5
#define REPORT_MAX 3

const cc_type_t cc_types[CC_NTYPES] = {
    { "int8", ncclInt8, 1, 0, 1, 127, 0 },
    { "uint8", ncclUint8, 1, 0, 0, 255, 0 },
    { "int32", ncclInt32, 4, 0, 1, 1 << 20, 0 },
    { "uint32", ncclUint32, 4, 0, 0, 1 << 20, 0 },
    { "int64", ncclInt64, 8, 0, 1, 1099511627776.0, 0 },
    { "uint64", ncclUint64, 8, 0, 0, 1099511627776.0, 0 },
    { "fp16", ncclFloat16, 2, 1, 1, 2048, 0x1p-11 },
    { "fp32", ncclFloat32, 4, 1, 1, 1 << 24, 0x1p-24 },
    { "fp64", ncclFloat64, 8, 1, 1, 1099511627776.0, 0x1p-53 },
    { "bf16", ncclBfloat16, 2, 1, 1, 256, 0x1p-8 },
    { "fp8e4m3", ncclFloat8e4m3, 1, 1, 1, 16, 0x1p-4 },
    { "fp8e5m2", ncclFloat8e5m2, 1, 1, 1, 8, 0x1p-3 },
};

const char *const cc_op_names[CC_NOPS] = {
    "sum", "prod", "max", "min", "avg", "premulsum-host", "premulsum-device",
};

/* ---- narrow float formats ---------------------------------------------------------- */

typedef struct mini_fmt {
    int ebits, mbits, bias;
    int fn;          /* e4m3 "fn": no infinities, only S.1111.111 is NaN */
} mini_fmt_t;

static const mini_fmt_t *mini_fmt(int type)
{
    static const mini_fmt_t f16 = { 5, 10, 15, 0 }, bf16 = { 8, 7, 127, 0 },
                            e4m3 = { 4, 3, 7, 1 }, e5m2 = { 5, 2, 15, 0 };
    switch (cc_types[type].dt) {
    case ncclFloat16: return &f16;
    case ncclBfloat16: return &bf16;
    case ncclFloat8e4m3: return &e4m3;
    case ncclFloat8e5m2: return &e5m2;
    default: return NULL;
    }
}

/* Finite values in range only (the tests never make others); rounds to nearest even. */
static uint32_t mini_encode(const mini_fmt_t *f, double v)
{
    uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
    double a = fabs(v);
    if (a == 0)
        return sign;
    int e2;
    frexp(a, &e2);
    int e = e2 - 1, emin = 1 - f->bias;
    if (e < emin)
        e = emin;
    uint32_t m = (uint32_t)nearbyint(ldexp(a, f->mbits - e));
    if (m >= (2u << f->mbits)) {
        m >>= 1;
        e++;
    }
    if (m < (1u << f->mbits))
        return sign | m;   /* subnormal */
    return sign | ((uint32_t)(e + f->bias) << f->mbits) | (m - (1u << f->mbits));
}

static double mini_decode(const mini_fmt_t *f, uint32_t bits)
{
    uint32_t mant = bits & ((1u << f->mbits) - 1);
    uint32_t ex = (bits >> f->mbits) & ((1u << f->ebits) - 1);
    int neg = (bits >> (f->ebits + f->mbits)) & 1;
    uint32_t emax = (1u << f->ebits) - 1;
    double v;
    if (f->fn && ex == emax && mant == (1u << f->mbits) - 1)
        v = NAN;
    else if (!f->fn && ex == emax)
        v = mant ? NAN : INFINITY;
    else if (ex == 0)
        v = ldexp((double)mant, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(mant | (1u << f->mbits)), (int)ex - f->bias - f->mbits);
    return neg ? -v : v;
}

void cc_encode(int type, double v, void *dst)
{
    const mini_fmt_t *f = mini_fmt(type);
    if (f != NULL) {
        uint32_t bits = mini_encode(f, v);
        if (cc_types[type].size == 1)
            *(uint8_t *)dst = (uint8_t)bits;
        else
            memcpy(dst, &(uint16_t){ (uint16_t)bits }, 2);
        return;
    }
    switch (cc_types[type].dt) {
    case ncclInt8: *(int8_t *)dst = (int8_t)v; break;
    case ncclUint8: *(uint8_t *)dst = (uint8_t)v; break;
    case ncclInt32: memcpy(dst, &(int32_t){ (int32_t)v }, 4); break;
    case ncclUint32: memcpy(dst, &(uint32_t){ (uint32_t)v }, 4); break;
    case ncclInt64: memcpy(dst, &(int64_t){ (int64_t)v }, 8); break;
    case ncclUint64: memcpy(dst, &(uint64_t){ (uint64_t)v }, 8); break;
    case ncclFloat32: memcpy(dst, &(float){ (float)v }, 4); break;
    default: memcpy(dst, &v, 8); break;
    }
}

double cc_decode(int type, const void *src)
{
    const mini_fmt_t *f = mini_fmt(type);
    if (f != NULL) {
        uint16_t h = 0;
        if (cc_types[type].size == 1)
            h = *(const uint8_t *)src;
        else
            memcpy(&h, src, 2);
        return mini_decode(f, h);
    }
    switch (cc_types[type].dt) {
    case ncclInt8: return *(const int8_t *)src;
    case ncclUint8: return *(const uint8_t *)src;
    case ncclInt32: { int32_t x; memcpy(&x, src, 4); return x; }
    case ncclUint32: { uint32_t x; memcpy(&x, src, 4); return x; }
    case ncclInt64: { int64_t x; memcpy(&x, src, 8); return (double)x; }
    case ncclUint64: { uint64_t x; memcpy(&x, src, 8); return (double)x; }
    case ncclFloat32: { float x; memcpy(&x, src, 4); return x; }
    default: { double x; memcpy(&x, src, 8); return x; }
    }
}

/* ---- test values --------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t cc_rng(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    return mix(*state);
}

/* An integer in [-r, r] (signed types) or [0, r], from the high bits of h (no division). */
static double pick(const cc_type_t *t, uint64_t h, double r)
{
    if (r < 1)
        return 0;
    uint64_t span = (uint64_t)r, range = t->is_signed ? 2 * span + 1 : span + 1;
    uint64_t v = (uint64_t)(((unsigned __int128)h * range) >> 64);
    return t->is_signed ? (double)(int64_t)v - (double)span : (double)v;
}

static double prod_value(const cc_type_t *t, int nranks, int rank, size_t idx, uint64_t h)
{
    /* one rank doubles, the next halves (ints: 1), the rest are 1: partials in [1/2, 2] */
    int k = (int)((idx * 7) % (size_t)nranks);
    double v = 1;
    if (rank == k)
        v = 2;
    else if (nranks > 1 && rank == (k + 1) % nranks)
        v = t->is_float ? 0.5 : 1;
    if (t->is_signed && (h & 1))
        v = -v;
    return v;
}

double cc_value(int type, cc_val_t fam, int nranks, int rank, size_t idx, uint32_t salt,
                double scalar)
{
    const cc_type_t *t = &cc_types[type];
    idx %= CC_PERIOD;
    uint64_t h = mix(((uint64_t)salt << 40) ^ ((uint64_t)(unsigned)rank << 32) ^ idx ^
                     0x5851f42d4c957f2dull);
    double n = nranks, s = fabs(scalar);
    switch (fam) {
    case CC_VAL_ANY:
        return pick(t, h, t->exact);
    case CC_VAL_SUM:
        return pick(t, h, floor(t->exact / n));
    case CC_VAL_AVG:
        return t->is_float ? n * pick(t, h, floor(t->exact / n)) : pick(t, h, floor(t->exact / n));
    case CC_VAL_PROD:
        return prod_value(t, nranks, rank, idx, h);
    case CC_VAL_PMS:
        if (floor(t->exact / (n * s)) >= 1)
            return pick(t, h, floor(t->exact / (n * s)));
        /* sparse: one rank per element holds a value, so every partial is s*x or 0 */
        return (size_t)rank == idx % (size_t)nranks ? pick(t, h, floor(t->exact / s)) : 0;
    }
    return 0;
}

void cc_fill(int type, cc_val_t fam, int nranks, int rank, uint32_t salt, double scalar,
             void *buf, size_t n)
{
    size_t es = cc_types[type].size, first = n < CC_PERIOD ? n : CC_PERIOD;
    for (size_t i = 0; i < first; i++)
        cc_encode(type, cc_value(type, fam, nranks, rank, i, salt, scalar), (char *)buf + i * es);
    cc_repeat(buf, first * es, n * es);
}

void cc_repeat(void *buf, size_t have, size_t total)
{
    while (have > 0 && have < total) {
        size_t chunk = have < total - have ? have : total - have;
        memcpy((char *)buf + have, buf, chunk);
        have += chunk;
    }
}

uint64_t cc_hash(const void *buf, size_t bytes)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ ((const unsigned char *)buf)[i]) * 0x100000001b3ull;
    return h;
}

/* ---- buffers ------------------------------------------------------------------------- */

void *cc_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "coll_check: out of memory for %zu bytes\n", bytes);
        exit(99);
    }
    return p;
}

void cc_buf_alloc(cc_buf_t *b, size_t bytes)
{
    b->base = cc_xmalloc(bytes + 2 * GUARD_BYTES);
    memset(b->base, GUARD_BYTE, bytes + 2 * GUARD_BYTES);
    b->data = b->base + GUARD_BYTES;
    b->bytes = bytes;
    cc_dev_register(b, bytes + 2 * GUARD_BYTES);
}

void cc_buf_free(cc_buf_t *b)
{
    cc_dev_unregister(b);
    free(b->base);
    b->base = b->data = NULL;
}

static int guard_intact(const char *p)
{
    for (int i = 0; i < GUARD_BYTES; i++)
        if ((unsigned char)p[i] != GUARD_BYTE)
            return 0;
    return 1;
}

int cc_buf_guards_ok(const cc_buf_t *b, const cc_case_t *c, int rank)
{
    int ok = 1;
    if (!guard_intact(b->base)) {
        cc_fail(NULL, c, rank, 0, "bytes written before the buffer", "guard intact");
        ok = 0;
    }
    if (!guard_intact(b->data + b->bytes)) {
        cc_fail(NULL, c, rank, b->bytes / cc_types[c->type].size, "bytes written past the end",
                "guard intact");
        ok = 0;
    }
    return ok;
}

/* ---- reports ------------------------------------------------------------------------- */

static atomic_long failures;
static const char *_Atomic phase = "start";
static const char *mode_name = "?";

long cc_failures(void)
{
    return atomic_load(&failures);
}

void cc_set_phase(const char *p)
{
    atomic_store(&phase, p);
}

const char *cc_phase(void)
{
    return atomic_load(&phase);
}

void cc_fail(const cc_world_t *w, const cc_case_t *c, int rank, size_t idx, const char *got,
             const char *expected)
{
    if (w != NULL)
        mode_name = w->mode;
    atomic_fetch_add(&failures, 1);
    fprintf(stderr, "FAIL mode=%s what=%s type=%s op=%s count=%zu root=%d inplace=%d rank=%d "
            "index=%zu got=%s expected=%s\n", mode_name, c->what,
            c->type >= 0 ? cc_types[c->type].name : "-", c->op >= 0 ? cc_op_names[c->op] : "-",
            c->count, c->root, c->inplace, rank, idx, got, expected);
}

static void fmt_value(int type, double v, char *buf, size_t len)
{
    if (cc_types[type].is_float)
        snprintf(buf, len, "%.9g", v);
    else
        snprintf(buf, len, "%.0f", v);
}

size_t cc_check_values(const cc_world_t *w, const cc_case_t *c, int rank, const void *buf,
                       const double *expect, size_t n, size_t idx0)
{
    size_t es = cc_types[c->type].size, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double got = cc_decode(c->type, (const char *)buf + i * es);
        if (got == expect[i] || (isnan(got) && isnan(expect[i])))
            continue;   /* NaN: a garbage gap that must stay garbage */
        if (bad++ < REPORT_MAX) {
            char g[64], e[64];
            fmt_value(c->type, got, g, sizeof(g));
            fmt_value(c->type, expect[i], e, sizeof(e));
            cc_fail(w, c, rank, idx0 + i, g, e);
        }
    }
    if (bad > REPORT_MAX)
        fprintf(stderr, "FAIL mode=%s what=%s type=%s rank=%d: %zu more mismatches not shown\n",
                w->mode, c->what, cc_types[c->type].name, rank, bad - REPORT_MAX);
    return bad;
}

int cc_check_unchanged(const cc_world_t *w, const cc_case_t *c, int rank, const void *buf,
                       const void *saved, size_t bytes)
{
    if (bytes == 0 || memcmp(buf, saved, bytes) == 0)
        return 1;
    size_t i = 0;
    while (((const char *)buf)[i] == ((const char *)saved)[i])
        i++;
    char what[128];
    snprintf(what, sizeof(what), "%s(input)", c->what);
    cc_case_t ci = *c;
    ci.what = what;
    cc_fail(w, &ci, rank, i / cc_types[c->type].size, "input modified", "input unchanged");
    return 0;
}

void cc_nccl_fatal(const cc_world_t *w, const char *what, ncclResult_t r, const char *file,
                   int line)
{
    fprintf(stderr, "FAIL mode=%s what=%s: returned %d (%s) at %s:%d; last error: %s\n",
            w != NULL ? w->mode : "?", what, (int)r, ncclGetErrorString(r), file, line,
            ncclGetLastError(NULL));
    fflush(stderr);
    exit(1);
}

void cc_group_start(const cc_world_t *w)
{
    CC_NCCL(w, "ncclGroupStart", ncclGroupStart());
}

void cc_group_end(const cc_world_t *w, const char *what)
{
    CC_NCCL(w, what, ncclGroupEnd());
}

int cc_counts(const cc_world_t *w, size_t *counts)
{
    int n = 0;
    counts[n++] = 0;
    counts[n++] = 1;
    counts[n++] = 7;
    counts[n++] = 1001;
    if (!w->quick)
        counts[n++] = CC_LARGE_COUNT;
    return n;
}

void cc_section_done(const cc_world_t *w, const char *section, long cases)
{
    if (cases <= 0) {
        cc_case_t c = { section, -1, -1, 0, -1, 0 };
        cc_fail(w, &c, w->ranks[0], 0, "no case ran", "at least one case");
    }
    if (w->ranks[0] == 0)
        printf("coll_check %s: %s: %ld cases\n", w->mode, section, cases);
}
