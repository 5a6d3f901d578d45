/*
 * perf_data: element types, and the data of the *_perf tools (see perf_common.h).
 *
 * perf_data_value() gives small integers (or powers of two for prod) chosen from a hash of
 * (seed, rank, index); their sums stay within the integers the type holds exactly, so any
 * reduction order gives the same bits and the check can be exact. Only avg over a rank
 * count that is not a power of two (1/n rounds) and rank counts too large for the type's
 * exact range fall back to a tolerance. Integers are compared exactly: the expected value
 * is computed modulo 2^64 and truncated, which every correct reduction order matches.
 */
#include "perf_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- types and ops ---- */

const perf_type_t perf_types[PERF_NTYPES] = {
    { "int8", ncclInt8, 1, 0, 1, 0, 0, 0 },
    { "uint8", ncclUint8, 1, 0, 0, 0, 0, 0 },
    { "int32", ncclInt32, 4, 0, 1, 0, 0, 0 },
    { "uint32", ncclUint32, 4, 0, 0, 0, 0, 0 },
    { "int64", ncclInt64, 8, 0, 1, 0, 0, 0 },
    { "uint64", ncclUint64, 8, 0, 0, 0, 0, 0 },
    { "half", ncclFloat16, 2, 1, 1, 10, 5, 0 },
    { "float", ncclFloat32, 4, 1, 1, 23, 8, 0 },
    { "double", ncclFloat64, 8, 1, 1, 52, 11, 0 },
    { "bfloat16", ncclBfloat16, 2, 1, 1, 7, 8, 0 },
    { "f8e4m3", ncclFloat8e4m3, 1, 1, 1, 3, 4, 1 },
    { "f8e5m2", ncclFloat8e5m2, 1, 1, 1, 2, 5, 0 },
};

static const struct { const char *alias, *name; } perf_type_aliases[] = {
    { "char", "int8" }, { "int", "int32" }, { "float16", "half" }, { "fp16", "half" },
    { "float32", "float" }, { "fp32", "float" }, { "float64", "double" },
    { "fp64", "double" }, { "bf16", "bfloat16" }, { "fp8_e4m3", "f8e4m3" },
    { "fp8_e5m2", "f8e5m2" }, { "e4m3", "f8e4m3" }, { "e5m2", "f8e5m2" },
};

const char *const perf_op_names[PERF_NOPS] = { "sum", "prod", "max", "min", "avg", "mulsum" };

const perf_type_t *perf_type_find(const char *name)
{
    for (int i = 0; i < PERF_NTYPES; i++)
        if (strcmp(name, perf_types[i].name) == 0)
            return &perf_types[i];
    for (size_t i = 0; i < sizeof(perf_type_aliases) / sizeof(perf_type_aliases[0]); i++)
        if (strcmp(name, perf_type_aliases[i].alias) == 0)
            return perf_type_find(perf_type_aliases[i].name);
    return NULL;
}

int perf_op_find(const char *name)
{
    for (int i = 0; i < PERF_NOPS; i++)
        if (strcmp(name, perf_op_names[i]) == 0)
            return i;
    return strcmp(name, "premulsum") == 0 ? PERF_OP_MULSUM : -2;
}

/* ---- element encoding ---- */

/* Small binary floats (half, bf16, fp8): round to nearest even from a double. */
static uint32_t perf_float_encode(const perf_type_t *t, double v)
{
    int bias = (1 << (t->exp_bits - 1)) - 1, emin = 1 - bias, e;
    uint32_t sign = signbit(v) ? 1u << (t->mant + t->exp_bits) : 0;
    uint32_t emax_field = (1u << t->exp_bits) - (t->no_inf ? 1 : 2);
    uint32_t nan = (((1u << t->exp_bits) - 1) << t->mant) | ((1u << t->mant) - 1);
    double a = fabs(v), q;
    if (isnan(v))
        return nan;
    if (a == 0.0)
        return sign;
    (void)frexp(a, &e);
    e = e - 1 < emin ? emin : e - 1;       /* exponent of the leading bit, or subnormal */
    q = nearbyint(ldexp(a, t->mant - e));  /* significand in units of the last place */
    if (q >= ldexp(1.0, t->mant + 1)) {
        q /= 2;
        e++;
    }
    uint32_t field = q < ldexp(1.0, t->mant) ? 0 : (uint32_t)(e + bias);
    uint32_t mant = (uint32_t)q & ((1u << t->mant) - 1);
    if (isinf(v) || field > emax_field || (t->no_inf && field == emax_field &&
                                           mant == (1u << t->mant) - 1))
        return t->no_inf ? sign | nan : sign | ((emax_field + 1) << t->mant);
    return sign | (field << t->mant) | mant;
}

static double perf_float_decode(const perf_type_t *t, uint32_t bits)
{
    int bias = (1 << (t->exp_bits - 1)) - 1;
    uint32_t mant = bits & ((1u << t->mant) - 1);
    uint32_t field = (bits >> t->mant) & ((1u << t->exp_bits) - 1);
    int neg = (bits >> (t->mant + t->exp_bits)) & 1;
    double a;
    if (field == (1u << t->exp_bits) - 1 && (!t->no_inf || mant == (1u << t->mant) - 1))
        a = (mant != 0 || t->no_inf) ? NAN : INFINITY;
    else if (field == 0)
        a = ldexp((double)mant, 1 - bias - t->mant);
    else
        a = ldexp((double)(mant | (1u << t->mant)), (int)field - bias - t->mant);
    return neg ? -a : a;
}

/* Integers are stored from their two's-complement 64-bit pattern, truncated. */
static void perf_int_store(const perf_type_t *t, void *buf, size_t i, uint64_t bits)
{
    uint8_t u8 = (uint8_t)bits;
    uint32_t u32 = (uint32_t)bits;
    switch (t->size) {
    case 1: memcpy((char *)buf + i, &u8, 1); break;
    case 4: memcpy((char *)buf + 4 * i, &u32, 4); break;
    default: memcpy((char *)buf + 8 * i, &bits, 8); break;
    }
}

void perf_type_store(const perf_type_t *t, void *buf, size_t i, double v)
{
    if (!t->is_float) {
        perf_int_store(t, buf, i, (uint64_t)(int64_t)v);
    } else if (t->dt == ncclFloat32) {
        float f = (float)v;
        memcpy((char *)buf + 4 * i, &f, 4);
    } else if (t->dt == ncclFloat64) {
        memcpy((char *)buf + 8 * i, &v, 8);
    } else if (t->size == 2) {
        uint16_t h = (uint16_t)perf_float_encode(t, v);
        memcpy((char *)buf + 2 * i, &h, 2);
    } else {
        ((uint8_t *)buf)[i] = (uint8_t)perf_float_encode(t, v);
    }
}

static int64_t perf_int_load(const perf_type_t *t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + (size_t)t->size * i;
    int8_t i8;
    uint8_t u8;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    switch (t->dt) {
    case ncclInt8: memcpy(&i8, p, 1); return i8;
    case ncclUint8: memcpy(&u8, p, 1); return u8;
    case ncclInt32: memcpy(&i32, p, 4); return i32;
    case ncclUint32: memcpy(&u32, p, 4); return u32;
    default: memcpy(&i64, p, 8); return i64;
    }
}

double perf_type_load(const perf_type_t *t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + (size_t)t->size * i;
    if (!t->is_float)
        return (double)perf_int_load(t, buf, i);
    if (t->dt == ncclFloat32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (t->dt == ncclFloat64) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    if (t->size == 2) {
        uint16_t h;
        memcpy(&h, p, 2);
        return perf_float_decode(t, h);
    }
    return perf_float_decode(t, *(const uint8_t *)p);
}

/* ---- data recipe ---- */

/* Largest integer n such that every integer in [-n, n] is exact in the type. */
static double perf_type_exact(const perf_type_t *t)
{
    if (t->is_float)
        return ldexp(1.0, t->mant + 1);
    if (t->size == 8)
        return 1e15;
    return ldexp(1.0, 8 * t->size - (t->is_signed ? 1 : 0)) - 1;
}

void perf_data_init(perf_data_t *d)
{
    const perf_type_t *t = d->type;
    int n = d->nranks > 0 ? d->nranks : 1, op = d->op;
    double exact = perf_type_exact(t), u = t->is_float ? ldexp(1.0, -t->mant - 1) : 0;
    double scale = op == PERF_OP_MULSUM ? 2.0 : 1.0;
    double m = floor(exact / (n * scale));
    int pow2_ranks = (n & (n - 1)) == 0;
    int bias = t->is_float ? (1 << (t->exp_bits - 1)) - 1 : 0;

    d->kind = PERF_VALS_RANGE;
    d->tol = 0;
    if (op == PERF_OP_NONE) {
        /* data only moves: every value exact, as many as fit (up to 2^20) */
        d->hi = exact < 1048576.0 ? (int64_t)exact : 1048576;
        d->lo = t->is_signed ? -d->hi : 0;
        return;
    }
    if (op == ncclProd) {
        /* floats: {-1, 1/2, 1, 2} stay exact while 2^n fits; integers wrap exactly */
        d->kind = PERF_VALS_POW2;
        d->lo = t->is_float && n > bias ? 1 : 2; /* 1: only -1 and 1 */
        d->hi = 0;
        return;
    }
    if (op == ncclMax || op == ncclMin) {
        d->lo = t->is_signed ? -100 : 0;
        d->hi = 100 < exact ? 100 : (int64_t)exact;
        return;
    }
    if (m > 100)
        m = 100;
    if (m < 1) {
        m = !t->is_float && op == ncclAvg ? 0 : 1;   /* integer avg must not wrap */
        if (t->is_float)
            d->tol = 2.0 * (n + 2) * u * n * scale;   /* partial sums round */
    }
    d->hi = (int64_t)m;
    d->lo = (t->is_signed && op != ncclAvg) ? -(int64_t)m : 0;
    if (t->is_float && op == ncclAvg && !pow2_ranks)
        d->tol = 2.0 * (n + 2) * u * m;              /* x * (1/n) rounds */
}

double perf_data_scalar(int rank)
{
    return (rank & 1) ? 2.0 : 1.0;
}

static inline uint64_t perf_hash(uint32_t seed, int rank, size_t index)
{
    uint64_t x = (uint64_t)index * 0x9E3779B97F4A7C15ull;
    x ^= ((uint64_t)(unsigned)rank + 1) * 0xC2B2AE3D27D4EB4Full + seed * 0x165667B19E3779F9ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return x;
}

double perf_data_value(const perf_data_t *d, int rank, size_t index)
{
    static const double pow2_vals[4] = { -1.0, 1.0, 0.5, 2.0 };
    uint64_t h = perf_hash(d->seed, rank, index) >> 32;
    if (d->kind == PERF_VALS_POW2) {
        if (!d->type->is_float)   /* integers: -1, 1, 2, 3 (1, 2, 3 unsigned) */
            return d->type->is_signed ? (h % 4 == 0 ? -1.0 : (double)(h % 4))
                                      : (double)(1 + h % 3);
        return pow2_vals[h % (uint64_t)(d->lo == 1 ? 2 : 4)];
    }
    return (double)(d->lo + (int64_t)(h % (uint64_t)(d->hi - d->lo + 1)));
}

void perf_data_fill(const perf_data_t *d, int rank, void *buf, size_t first, size_t count)
{
    for (size_t j = 0; j < count; j++)
        perf_type_store(d->type, buf, j, perf_data_value(d, rank, first + j));
}

/* Integers: modular arithmetic on 64-bit patterns, which truncation keeps exact. */
static uint64_t perf_reduce_int(const perf_data_t *d, size_t index)
{
    int64_t acc = (int64_t)perf_data_value(d, 0, index);
    uint64_t uacc = (uint64_t)acc;
    if (d->op == PERF_OP_MULSUM)
        uacc *= (uint64_t)perf_data_scalar(0);
    for (int r = 1; r < d->nranks; r++) {
        int64_t v = (int64_t)perf_data_value(d, r, index);
        switch (d->op) {
        case ncclProd: uacc *= (uint64_t)v; break;
        case ncclMax: acc = v > acc ? v : acc; uacc = (uint64_t)acc; break;
        case ncclMin: acc = v < acc ? v : acc; uacc = (uint64_t)acc; break;
        case PERF_OP_MULSUM: uacc += (uint64_t)v * (uint64_t)perf_data_scalar(r); break;
        default: uacc += (uint64_t)v; break;
        }
    }
    if (d->op == ncclAvg)   /* inputs are >= 0 and the sum does not wrap */
        uacc /= (uint64_t)d->nranks;
    return uacc;
}

static double perf_reduce_float(const perf_data_t *d, size_t index)
{
    double acc = perf_data_value(d, 0, index);
    if (d->op == PERF_OP_MULSUM)
        acc *= perf_data_scalar(0);
    for (int r = 1; r < d->nranks; r++) {
        double v = perf_data_value(d, r, index);
        switch (d->op) {
        case ncclProd: acc *= v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
        case PERF_OP_MULSUM: acc += v * perf_data_scalar(r); break;
        default: acc += v; break;
        }
    }
    return d->op == ncclAvg ? acc / d->nranks : acc;
}

void perf_data_reduce(const perf_data_t *d, void *buf, size_t first, size_t count)
{
    for (size_t j = 0; j < count; j++) {
        if (d->type->is_float)
            perf_type_store(d->type, buf, j, perf_reduce_float(d, first + j));
        else
            perf_int_store(d->type, buf, j, perf_reduce_int(d, first + j));
    }
}

size_t perf_data_check(const perf_data_t *d, const void *got, const void *expected,
                       size_t count)
{
    size_t wrong = 0, sz = (size_t)d->type->size;
    if (!d->type->is_float || d->tol == 0) {
        /* exact: compare values, so +0 and -0 agree and NaN never does */
        for (size_t j = 0; j < count; j++) {
            if (!d->type->is_float) {
                wrong += memcmp((const char *)got + j * sz, (const char *)expected + j * sz,
                                sz) != 0;
                continue;
            }
            wrong += !(perf_type_load(d->type, got, j) == perf_type_load(d->type, expected, j));
        }
        return wrong;
    }
    for (size_t j = 0; j < count; j++) {
        double g = perf_type_load(d->type, got, j), e = perf_type_load(d->type, expected, j);
        wrong += !(g == e || fabs(g - e) <= d->tol);
    }
    return wrong;
}

/* ---- self-test ---- */

/* x rounded to the type (floats) or wrapped to its width (integers). */
static double perf_round(const perf_type_t *t, double x)
{
    uint64_t tmp = 0;
    if (!t->is_float) {
        perf_int_store(t, &tmp, 0, (uint64_t)(int64_t)x);
        return (double)perf_int_load(t, &tmp, 0);
    }
    perf_type_store(t, &tmp, 0, x);
    return perf_type_load(t, &tmp, 0);
}

/* A reduction the way a library may do it: ranks in `order`, rounding after every step
 * (floats accumulate wider, then store), avg as premul 1/n (floats) or sum then divide. */
static double perf_sim_elem(const perf_data_t *d, size_t i, int reverse, int skip)
{
    const perf_type_t *t = d->type;
    double acc = 0;
    int first = 1;
    for (int k = 0; k < d->nranks; k++) {
        int r = reverse ? d->nranks - 1 - k : k;
        double v = perf_data_value(d, r, i);
        if (r == skip)
            continue;
        if (d->op == PERF_OP_MULSUM)
            v = perf_round(t, v * perf_data_scalar(r));
        else if (d->op == ncclAvg && t->is_float)
            v = perf_round(t, v * (1.0 / d->nranks));
        if (first)
            acc = v;
        else if (d->op == ncclProd)
            acc = perf_round(t, acc * v);
        else if (d->op == ncclMax || d->op == ncclMin)
            acc = (d->op == ncclMax) == (v > acc) ? v : acc;
        else
            acc = perf_round(t, acc + v);
        first = 0;
    }
    return d->op == ncclAvg && !t->is_float ? trunc(acc / d->nranks) : acc;
}

static int perf_selftest_encode(FILE *out)
{
    static const struct { int type; double v; uint32_t bits; } cases[] = {
        { 6, 1.0, 0x3c00 }, { 6, -2.0, 0xc000 }, { 6, 65504.0, 0x7bff }, { 6, 0x1p-24, 0x0001 },
        { 6, 1.0 + 0x1p-11, 0x3c00 }, { 6, 1.0 + 0x3p-11, 0x3c02 }, { 9, 1.0, 0x3f80 },
        { 9, 3.0, 0x4040 }, { 10, 1.0, 0x38 }, { 10, 448.0, 0x7e }, { 10, 0x1p-9, 0x01 },
        { 10, -1.5, 0xbc }, { 11, 1.0, 0x3c }, { 11, 57344.0, 0x7b }, { 11, 0x1p-16, 0x01 },
    };
    int fails = 0;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const perf_type_t *t = &perf_types[cases[k].type];
        uint32_t bits = 0;
        perf_type_store(t, &bits, 0, cases[k].v);
        double back = perf_type_load(t, &bits, 0);
        if (bits != cases[k].bits || back != perf_round(t, cases[k].v)) {
            fprintf(out, "selftest: %s %a encodes to 0x%x (want 0x%x), decodes to %a\n",
                    t->name, cases[k].v, bits, cases[k].bits, back);
            fails++;
        }
    }
    return fails;
}

/* One (type, op, n): any order matches; a lost rank or a changed element shows. */
static int perf_selftest_case(FILE *out, const perf_type_t *t, int op, int n)
{
    enum { COUNT = 257 };
    uint64_t exp[COUNT], got[COUNT];
    perf_data_t d = { .type = t, .op = op, .nranks = n, .seed = 7 };
    size_t w[4] = { 0, 0, 0, 0 };
    perf_data_init(&d);
    perf_data_reduce(&d, exp, 0, COUNT);
    for (int v = 0; v < 3; v++) {
        for (size_t i = 0; i < COUNT; i++)
            perf_type_store(t, got, i, perf_sim_elem(&d, i, v == 1, v == 2 ? n - 1 : -1));
        w[v] = perf_data_check(&d, got, exp, COUNT);
    }
    memcpy(got, exp, sizeof(exp));
    ((unsigned char *)got)[5 * (size_t)t->size] ^= 1;
    w[3] = perf_data_check(&d, got, exp, COUNT);
    if (w[0] == 0 && w[1] == 0 && (d.tol > 0 || n == 1 || (w[2] > 0 && w[3] == 1)))
        return 0;
    fprintf(out, "selftest: %s %s on %d ranks: %zu and %zu wrong in two orders (want 0), %zu "
            "with a rank lost (want > 0), %zu with one element changed (want 1)\n", t->name,
            perf_op_names[op], n, w[0], w[1], w[2], w[3]);
    return 1;
}

/* The data of collectives that only move it: stored exactly, and a change shows. */
static int perf_selftest_none(FILE *out, const perf_type_t *t)
{
    enum { COUNT = 257 };
    uint64_t buf[COUNT], copy[COUNT];
    perf_data_t d = { .type = t, .op = PERF_OP_NONE, .nranks = 2, .seed = 7 };
    size_t inexact = 0, w[2];
    perf_data_init(&d);
    perf_data_fill(&d, 1, buf, 0, COUNT);
    for (size_t i = 0; i < COUNT; i++)
        inexact += perf_type_load(t, buf, i) != perf_data_value(&d, 1, i);
    memcpy(copy, buf, sizeof(buf));
    w[0] = perf_data_check(&d, copy, buf, COUNT);
    ((unsigned char *)copy)[7 * (size_t)t->size] ^= 1;
    w[1] = perf_data_check(&d, copy, buf, COUNT);
    if (inexact == 0 && d.tol == 0 && w[0] == 0 && w[1] == 1)
        return 0;
    fprintf(out, "selftest: %s data-movement values: %zu stored inexactly (want 0), %zu and "
            "%zu wrong before and after one change (want 0 and 1)\n", t->name, inexact, w[0],
            w[1]);
    return 1;
}

int perf_data_selftest(FILE *out)
{
    static const int nranks[] = { 1, 2, 3, 4, 5, 8, 16 };
    int fails = perf_selftest_encode(out);
    for (int t = 0; t < PERF_NTYPES; t++)
        fails += perf_selftest_none(out, &perf_types[t]);
    for (int t = 0; t < PERF_NTYPES; t++)
        for (int op = 0; op < PERF_NOPS; op++)
            for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++)
                fails += perf_selftest_case(out, &perf_types[t], op, nranks[k]);
    return fails;
}
