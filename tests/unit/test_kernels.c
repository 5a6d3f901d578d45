/*
 * Unit test of the host kernels (kernels/kernels.h).
 *
 * The reference is written here from scratch: narrow float formats are decoded with ldexp
 * from their bit fields and encoded by searching the sorted table of their values for the
 * nearest one (ties to the even code); reductions are computed in double (exactly rounded
 * once to fp32, which equals fp32 arithmetic for + and *) or in exact integer arithmetic.
 * Every case runs on every ISA variant the CPU supports, and the variants must agree bit
 * for bit, NaN payloads included.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <immintrin.h>

#include "kernels/kernels.h"

static const char *const isa_names[] = { "generic", "avx2", "avx512" };
#define NISA 3

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- reference narrow formats ---- */

typedef struct fmt {
    braid_dtype_t dt;
    int ebits, mbits, bias;
    uint32_t maxcode;    /* largest positive finite code */
    uint32_t ovfcode;    /* what overflow gives: inf, or maxcode when saturating */
    int e4m3;            /* only S.1111.111 is NaN, no inf */
    double *vals;        /* vals[0..maxcode+1]: positive values, then the one past max */
} fmt_t;

static fmt_t fmts[] = {
    { BRAID_FP16, 5, 10, 15, 0x7bff, 0x7c00, 0, NULL },
    { BRAID_BF16, 8, 7, 127, 0x7f7f, 0x7f80, 0, NULL },
    { BRAID_FP8_E4M3, 4, 3, 7, 0x7e, 0x7e, 1, NULL },
    { BRAID_FP8_E5M2, 5, 2, 15, 0x7b, 0x7b, 0, NULL },
};
#define NFMT 4

static const fmt_t *fmt_of(braid_dtype_t dt)
{
    for (int i = 0; i < NFMT; i++)
        if (fmts[i].dt == dt)
            return &fmts[i];
    return NULL;
}

/* The value of a code's bit fields, ignoring any special meaning of the top exponent. */
static double ref_fields(const fmt_t *f, uint32_t code)
{
    uint32_t m = code & ((1u << f->mbits) - 1);
    uint32_t e = (code >> f->mbits) & ((1u << f->ebits) - 1);
    double v = e == 0 ? ldexp(m, 1 - f->bias - f->mbits)
                      : ldexp(m + (1u << f->mbits), (int)e - f->bias - f->mbits);
    return (code >> (f->ebits + f->mbits)) & 1 ? -v : v;
}

static double ref_decode(const fmt_t *f, uint32_t code)
{
    uint32_t mmask = (1u << f->mbits) - 1, emax = (1u << f->ebits) - 1;
    uint32_t e = (code >> f->mbits) & emax, m = code & mmask;
    int neg = (code >> (f->ebits + f->mbits)) & 1;
    if (f->e4m3 ? (e == emax && m == mmask) : (e == emax && m != 0))
        return neg ? -NAN : NAN;
    if (!f->e4m3 && e == emax)
        return neg ? -INFINITY : INFINITY;
    return ref_fields(f, code);
}

static uint32_t ref_encode(const fmt_t *f, float x)
{
    uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0, lo = 0, hi = f->maxcode + 1;
    double ax = fabs((double)x);
    if (isnan(x))
        return sign | (f->e4m3 ? 0x7f : (f->maxcode + 2));   /* some NaN */
    if (ax >= f->vals[hi])
        return sign | f->ovfcode;
    while (lo + 1 < hi) {   /* vals[lo] <= ax < vals[hi] */
        uint32_t mid = (lo + hi) / 2;
        if (f->vals[mid] <= ax)
            lo = mid;
        else
            hi = mid;
    }
    uint32_t c = lo;
    if (f->vals[lo] != ax) {
        double dlo = ax - f->vals[lo], dhi = f->vals[lo + 1] - ax;
        c = dlo < dhi ? lo : dhi < dlo ? lo + 1 : (lo & 1 ? lo + 1 : lo);
    }
    return sign | (c == f->maxcode + 1 ? f->ovfcode : c);
}

static float fmt_dec(const fmt_t *f, uint32_t c)
{
    switch (f->dt) {
    case BRAID_FP16: return braid_fp16_to_float((uint16_t)c);
    case BRAID_BF16: return braid_bf16_to_float((uint16_t)c);
    case BRAID_FP8_E4M3: return braid_e4m3_to_float((uint8_t)c);
    default: return braid_e5m2_to_float((uint8_t)c);
    }
}

static uint32_t fmt_enc(const fmt_t *f, float x)
{
    switch (f->dt) {
    case BRAID_FP16: return braid_float_to_fp16(x);
    case BRAID_BF16: return braid_float_to_bf16(x);
    case BRAID_FP8_E4M3: return braid_float_to_e4m3(x);
    default: return braid_float_to_e5m2(x);
    }
}

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static int setup_fmts(void **state)
{
    (void)state;
    for (int i = 0; i < NFMT; i++) {
        fmt_t *f = &fmts[i];
        f->vals = malloc((f->maxcode + 2) * sizeof(double));
        for (uint32_t c = 0; c <= f->maxcode + 1; c++)
            f->vals[c] = ref_fields(f, c);
    }
    return 0;
}

static int teardown_fmts(void **state)
{
    (void)state;
    for (int i = 0; i < NFMT; i++)
        free(fmts[i].vals);
    return 0;
}

/* ---- conversions ---- */

/* Expect x to encode to `want` (a NaN want means: any NaN of the same sign). */
static void expect_enc(const fmt_t *f, float x, uint32_t want)
{
    uint32_t got = fmt_enc(f, x);
    if (isnan(ref_decode(f, want))) {
        if (!isnan(ref_decode(f, got)) || (got ^ want) >> (f->ebits + f->mbits))
            fail_msg("%s: %a (0x%08x) gave 0x%x, want a NaN like 0x%x",
                     braid_dtype_name(f->dt), x, fbits(x), got, want);
        return;
    }
    if (got != want)
        fail_msg("%s: %a (0x%08x) gave 0x%x, want 0x%x", braid_dtype_name(f->dt), x, fbits(x),
                 got, want);
}

/* Every code decodes to its exact value; every non-NaN code round-trips (fp8 inf saturates). */
static void test_conv_all_codes(void **state)
{
    (void)state;
    for (int i = 0; i < NFMT; i++) {
        const fmt_t *f = &fmts[i];
        uint32_t ncodes = 1u << (1 + f->ebits + f->mbits);
        for (uint32_t c = 0; c < ncodes; c++) {
            double want = ref_decode(f, c);
            float got = fmt_dec(f, c);
            if (isnan(want)) {
                assert_true(isnan(got) && !signbit(got) == !signbit(want));
                expect_enc(f, got, c);
                continue;
            }
            if (fbits(got) != fbits((float)want))
                fail_msg("%s code 0x%x decoded to %a, want %a", braid_dtype_name(f->dt), c,
                         got, want);
            expect_enc(f, got, isinf(want) ? (c & 1u << (f->ebits + f->mbits)) | f->ovfcode : c);
        }
    }
}

/*
 * Around every positive finite code v (and its negative): v itself, its fp32 neighbours,
 * the exact midpoint to the next code (ties to even) and the midpoint's fp32 neighbours.
 * Past the largest code the "next" value is the first one out of range: fp16 and bf16
 * overflow to inf there, fp8 saturates.
 */
static void test_conv_ties_and_neighbours(void **state)
{
    (void)state;
    for (int i = 0; i < NFMT; i++) {
        const fmt_t *f = &fmts[i];
        uint32_t sbit = 1u << (f->ebits + f->mbits);
        for (uint32_t c = 0; c <= f->maxcode; c++) {
            float v = (float)f->vals[c], mid = (float)((f->vals[c] + f->vals[c + 1]) / 2);
            uint32_t even = c & 1 ? c + 1 : c, up = c + 1;
            even = even > f->maxcode ? f->ovfcode : even;
            up = up > f->maxcode ? f->ovfcode : up;
            assert_true((double)mid == (f->vals[c] + f->vals[c + 1]) / 2);
            for (int s = 0; s < 2; s++) {
                float sg = s ? -1.0f : 1.0f;
                uint32_t sb = s ? sbit : 0;
                expect_enc(f, sg * v, sb | c);
                expect_enc(f, sg * nextafterf(v, INFINITY), sb | c);
                if (c > 0)
                    expect_enc(f, sg * nextafterf(v, 0), sb | c);
                expect_enc(f, sg * mid, sb | even);
                expect_enc(f, sg * nextafterf(mid, 0), sb | c);
                expect_enc(f, sg * nextafterf(mid, INFINITY), sb | up);
            }
        }
    }
}

/* Specials by name, and a few million random fp32 inputs against the reference. */
static void test_conv_specials_and_random(void **state)
{
    static const float specials[] = { 0.0f, -0.0f, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX,
                                      FLT_MIN, 0x1p-149f, -0x1p-149f, 1e-30f, 448.0f, 464.0f,
                                      465.0f, 480.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f,
                                      65519.99f, 1e10f, -1e10f };
    (void)state;
    for (int i = 0; i < NFMT; i++) {
        const fmt_t *f = &fmts[i];
        for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); k++)
            expect_enc(f, specials[k], ref_encode(f, specials[k]));
        expect_enc(f, NAN, f->e4m3 ? 0x7f : f->maxcode + 2);
        expect_enc(f, -NAN, ref_encode(f, -NAN));
        for (int k = 0; k < 1000000; k++) {
            uint32_t u = (uint32_t)rng();
            if (k & 1)   /* exponent within reach of the format */
                u = (u & 0x807fffffu) | ((uint32_t)(127 - f->bias - f->mbits - 2 +
                                                    (int)(rng() % (2u << f->ebits))) << 23);
            expect_enc(f, bitsf(u), ref_encode(f, bitsf(u)));
        }
    }
    assert_int_equal(braid_float_to_e4m3(INFINITY), 0x7e);
    assert_int_equal(braid_float_to_e4m3(-INFINITY), 0xfe);
    assert_int_equal(braid_float_to_e5m2(INFINITY), 0x7b);
    assert_int_equal(braid_float_to_fp16(65520.0f), 0x7c00);
    assert_int_equal(braid_float_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(braid_float_to_fp16(-0.0f), 0x8000);
}

/* fp16 agrees bit for bit with the CPU's F16C instructions, NaN payloads included. */
__attribute__((target("f16c"))) static void conv_f16c_compare(void)
{
    for (uint32_t c = 0; c < 65536; c++)
        assert_int_equal(fbits(braid_fp16_to_float((uint16_t)c)), fbits(_cvtsh_ss((uint16_t)c)));
    for (int k = 0; k < 2000000; k++) {
        float x = bitsf((uint32_t)rng());
        if (k < 65536)   /* every NaN-ish payload shape */
            x = bitsf(0x7f800001u | ((uint32_t)k << 7) | (k & 1 ? 0x80000000u : 0));
        assert_int_equal(braid_float_to_fp16(x), _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
    }
}

static void test_conv_f16c(void **state)
{
    (void)state;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("f16c"))
        skip();
    conv_f16c_compare();
}

/* The conversions do not depend on FTZ/DAZ. */
static void test_conv_ftz_daz(void **state)
{
    static float want[NFMT][65536];
    static uint32_t wenc[NFMT][4096];
    float xs[4096];
    unsigned csr = _mm_getcsr();
    (void)state;
    for (int k = 0; k < 4096; k++)
        xs[k] = bitsf(k < 2048 ? (uint32_t)rng() & 0x80ffffffu : (uint32_t)rng());
    for (int i = 0; i < NFMT; i++) {
        uint32_t n = 1u << (1 + fmts[i].ebits + fmts[i].mbits);
        for (uint32_t c = 0; c < n; c++)
            want[i][c] = fmt_dec(&fmts[i], c);
        for (int k = 0; k < 4096; k++)
            wenc[i][k] = fmt_enc(&fmts[i], xs[k]);
    }
    _mm_setcsr(csr | 0x8040);   /* FTZ | DAZ */
    for (int i = 0; i < NFMT; i++) {
        uint32_t n = 1u << (1 + fmts[i].ebits + fmts[i].mbits), bad = 0;
        for (uint32_t c = 0; c < n; c++)
            bad += fbits(fmt_dec(&fmts[i], c)) != fbits(want[i][c]);
        for (int k = 0; k < 4096; k++)
            bad += fmt_enc(&fmts[i], xs[k]) != wenc[i][k];
        if (bad) {
            _mm_setcsr(csr);
            fail_msg("%s: %u conversions changed under FTZ/DAZ", braid_dtype_name(fmts[i].dt), bad);
        }
    }
    _mm_setcsr(csr);
}

/* ---- reference reductions ---- */

static uint64_t elt_get(braid_dtype_t dt, const void *p, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * braid_dtype_size(dt), braid_dtype_size(dt));
    return v;
}

static void elt_set(braid_dtype_t dt, void *p, size_t i, uint64_t v)
{
    memcpy((char *)p + i * braid_dtype_size(dt), &v, braid_dtype_size(dt));
}

static int dt_signed(braid_dtype_t dt)
{
    return dt == BRAID_INT8 || dt == BRAID_INT32 || dt == BRAID_INT64;
}

static double ref_load(braid_dtype_t dt, uint64_t bits)
{
    double d;
    if (dt == BRAID_FP32)
        return (double)bitsf((uint32_t)bits);
    if (dt == BRAID_FP64) {
        memcpy(&d, &bits, 8);
        return d;
    }
    return ref_decode(fmt_of(dt), (uint32_t)bits);
}

/* Round a double result to dt: to fp32 first (the kernels' accumulation type). */
static uint64_t ref_store(braid_dtype_t dt, double v)
{
    uint64_t bits;
    if (dt == BRAID_FP64) {
        memcpy(&bits, &v, 8);
        return bits;
    }
    if (dt == BRAID_FP32)
        return fbits((float)v);
    return ref_encode(fmt_of(dt), (float)v);
}

/* fmax/fmin semantics with -0 < +0, as documented in kernels/host/fp.h. */
static double ref_maxmin(double x, double y, int is_max)
{
    if (isnan(x) || isnan(y))
        return isnan(y) ? x : y;
    if (x == y)
        return (signbit(x) != 0) == is_max ? y : x;
    return (x > y) == is_max ? x : y;
}

static uint64_t dt_mask(braid_dtype_t dt)
{
    unsigned bits = 8 * (unsigned)braid_dtype_size(dt);
    return bits == 64 ? ~0ull : (1ull << bits) - 1;
}

/* p * x rounded to dt: fp32 and narrow types multiply by (float)p, integers wrap. */
static uint64_t ref_scale(braid_dtype_t dt, uint64_t x, const braid_scalar_t *pm)
{
    if (!braid_dtype_is_float(dt))
        return (x * pm->u) & dt_mask(dt);
    return ref_store(dt, ref_load(dt, x) * (dt == BRAID_FP64 ? pm->f : (double)(float)pm->f));
}

static int64_t sext(braid_dtype_t dt, uint64_t v)
{
    unsigned bits = 8 * (unsigned)braid_dtype_size(dt);
    return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

static uint64_t ref_int(braid_dtype_t dt, braid_opkind_t op, uint64_t a, uint64_t b,
                        const braid_scalar_t *pm)
{
    uint64_t mask = dt_mask(dt);
    int sgn = dt_signed(dt);
    int64_t sa, sb;
    if (pm != NULL)
        b = ref_scale(dt, b, pm);
    sa = sext(dt, a), sb = sext(dt, b);
    switch (op) {
    case BRAID_OP_SUM: return (a + b) & mask;
    case BRAID_OP_PROD: return (a * b) & mask;
    case BRAID_OP_MAX: return (sgn ? sa > sb : a > b) ? a : b;
    default: return (sgn ? sa < sb : a < b) ? a : b;
    }
}

static uint64_t ref_elem(braid_dtype_t dt, braid_opkind_t op, uint64_t a, uint64_t b,
                         const braid_scalar_t *pm)
{
    double x, y;
    if (!braid_dtype_is_float(dt))
        return ref_int(dt, op, a, b, pm);
    x = ref_load(dt, a);
    y = ref_load(dt, b);
    if (pm != NULL)
        y = ref_load(dt, ref_scale(dt, b, pm));
    switch (op) {
    case BRAID_OP_SUM: return ref_store(dt, x + y);
    case BRAID_OP_PROD: return ref_store(dt, x * y);
    case BRAID_OP_MAX: return ref_store(dt, ref_maxmin(x, y, 1));
    default: return ref_store(dt, ref_maxmin(x, y, 0));
    }
}

/* A value of dt, biased towards the interesting ones for the float types. */
static uint64_t gen_elem(braid_dtype_t dt)
{
    static const uint32_t sp32[] = { 0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                     0xffc00001u, 0x7fa00000u, 1, 0x807fffffu, 0x7f7fffffu };
    static const uint64_t sp64[] = { 0, 1ull << 63, 0x7ff0000000000000ull,
                                     0xfff0000000000000ull, 0x7ff8000000000000ull,
                                     0xfff8000000000123ull, 1, 0x7fefffffffffffffull };
    uint64_t r = rng(), k = r % 16;
    if (dt == BRAID_FP32)
        return k == 0 ? sp32[(r >> 8) % 10] : k == 1 ? (uint32_t)(r >> 16)
             : ((r >> 8) & 0x807fffffu) | (uint32_t)(107 + (r >> 40) % 40) << 23;
    if (dt == BRAID_FP64)
        return k == 0 ? sp64[(r >> 8) % 8] : k == 1 ? rng()
             : (rng() & 0x800fffffffffffffull) | (uint64_t)(1003 + (r >> 40) % 40) << 52;
    return (r >> 5) & dt_mask(dt);   /* integers and narrow codes: any bits */
}

static int same_result(braid_dtype_t dt, uint64_t got, uint64_t want)
{
    if (braid_dtype_is_float(dt) && isnan(ref_load(dt, want)))
        return isnan(ref_load(dt, got));
    return got == want;
}

/* ---- reduce, scale and divide on every variant ---- */

enum { ALIAS_NONE, ALIAS_A, ALIAS_B };
#define GUARD 8   /* elements either side of dst that must stay untouched */

typedef struct rcase {
    braid_dtype_t dt;
    braid_opkind_t op;   /* for reduce */
    size_t count, off;   /* off: elements past a 64-byte boundary */
    int alias;
    const braid_scalar_t *pm;
} rcase_t;

/* Run one reduce case on each variant; check against the reference and across variants. */
static void run_reduce_case(const rcase_t *c)
{
    size_t sz = braid_dtype_size(c->dt), n = c->count, span = ((n + 2 * GUARD + 64) * sz + 127) & ~(size_t)63;
    char *a = aligned_alloc(64, span), *b = aligned_alloc(64, span), *d = aligned_alloc(64, span);
    char *first = malloc(n * sz + 1);
    char *ap = a + 64 + c->off * sz, *bp = b + 64 + c->off * sz, *dp = d + 64 + c->off * sz;
    uint64_t *ia = malloc((n + 1) * 8), *ib = malloc((n + 1) * 8);
    int nrun = 0;

    for (size_t i = 0; i < n; i++)
        ia[i] = gen_elem(c->dt), ib[i] = gen_elem(c->dt);
    for (int v = 0; v < NISA; v++) {
        if (braid_kern_select_isa(isa_names[v]) != 0)
            continue;
        memset(d, 0xa5, span);
        for (size_t i = 0; i < n; i++)
            elt_set(c->dt, ap, i, ia[i]), elt_set(c->dt, bp, i, ib[i]);
        char *out = c->alias == ALIAS_A ? ap : c->alias == ALIAS_B ? bp : dp;
        braid_kern_reduce(c->dt, c->op, out, ap, bp, n, c->pm);
        for (size_t i = 0; i < n; i++) {
            uint64_t got = elt_get(c->dt, out, i), want = ref_elem(c->dt, c->op, ia[i], ib[i], c->pm);
            if (!same_result(c->dt, got, want))
                fail_msg("%s %s %s n=%zu off=%zu alias=%d premul=%d: [%zu] a=0x%llx b=0x%llx "
                         "got 0x%llx want 0x%llx", isa_names[v], braid_dtype_name(c->dt),
                         braid_opkind_name(c->op), n, c->off, c->alias, c->pm != NULL, i,
                         (unsigned long long)ia[i], (unsigned long long)ib[i],
                         (unsigned long long)got, (unsigned long long)want);
        }
        if (c->alias == ALIAS_NONE)
            for (size_t g = 1; g <= GUARD; g++)
                assert_true((unsigned char)dp[-(ptrdiff_t)g] == 0xa5 &&
                            (unsigned char)dp[n * sz + g - 1] == 0xa5);
        if (nrun++ == 0)
            memcpy(first, out, n * sz);
        else if (memcmp(first, out, n * sz) != 0)
            fail_msg("%s differs from the first variant: %s %s n=%zu", isa_names[v],
                     braid_dtype_name(c->dt), braid_opkind_name(c->op), n);
    }
    assert_true(nrun >= 1);
    braid_kern_select_isa("auto");
    free(a), free(b), free(d), free(first), free(ia), free(ib);
}

static const size_t counts[] = { 0, 1, 7, 33, 1000, 4099 };
static const size_t offs[] = { 0, 1, 3 };

static braid_scalar_t premul_for(braid_dtype_t dt)
{
    braid_scalar_t s;
    if (braid_dtype_is_float(dt))
        s.f = -0.3;
    else
        s.i = -3;   /* unsigned types see 2^64 - 3: the product wraps */
    return s;
}

static void test_reduce_all(void **state)
{
    (void)state;
    for (int dt = 0; dt < BRAID_NUM_DTYPES; dt++) {
        braid_scalar_t pm = premul_for((braid_dtype_t)dt);
        for (int op = 0; op < BRAID_NUM_OPS; op++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                for (size_t oi = 0; oi < sizeof(offs) / sizeof(offs[0]); oi++)
                    for (int alias = ALIAS_NONE; alias <= ALIAS_B; alias++)
                        for (int p = 0; p < 2; p++) {
                            rcase_t c = { (braid_dtype_t)dt, (braid_opkind_t)op, counts[ci],
                                          offs[oi], alias, p ? &pm : NULL };
                            run_reduce_case(&c);
                        }
    }
}

/* scale against the reference, in place too; a premul sum equals scale then sum. */
static void check_scale(braid_dtype_t dt, const char *src, size_t n, const braid_scalar_t *pm)
{
    size_t sz = braid_dtype_size(dt);
    char *d1 = malloc(n * sz + 8), *d2 = malloc(n * sz + 8), *zero = calloc(n + 1, sz);

    braid_kern_scale(dt, d1, src + sz, n - 1, pm);   /* src + sz: not 64-byte aligned */
    for (size_t i = 0; i + 1 < n; i++) {
        uint64_t x = elt_get(dt, src + sz, i), got = elt_get(dt, d1, i);
        if (!same_result(dt, got, ref_scale(dt, x, pm)))
            fail_msg("scale %s [%zu] 0x%llx gave 0x%llx", braid_dtype_name(dt), i,
                     (unsigned long long)x, (unsigned long long)got);
    }
    memcpy(d2, src, n * sz);
    braid_kern_scale(dt, d2 + sz, d2 + sz, n - 1, pm);
    assert_memory_equal(d1, d2 + sz, (n - 1) * sz);
    braid_kern_reduce(dt, BRAID_OP_SUM, d2, zero, src, n, pm);
    braid_kern_scale(dt, d1, src, n, pm);
    braid_kern_reduce(dt, BRAID_OP_SUM, d1, zero, d1, n, NULL);
    assert_memory_equal(d1, d2, n * sz);
    braid_kern_scale(dt, d1, src, n, NULL);   /* no premul: a copy */
    assert_memory_equal(d1, src, n * sz);
    free(d1), free(d2), free(zero);
}

static void test_scale(void **state)
{
    (void)state;
    for (int t = 0; t < BRAID_NUM_DTYPES; t++) {
        braid_dtype_t dt = (braid_dtype_t)t;
        braid_scalar_t pm = premul_for(dt);
        size_t n = 4099, sz = braid_dtype_size(dt);
        char *src = malloc(n * sz + 8);
        for (size_t i = 0; i < n; i++)
            elt_set(dt, src, i, gen_elem(dt));
        for (int v = 0; v < NISA; v++)
            if (braid_kern_select_isa(isa_names[v]) == 0)
                check_scale(dt, src, n, &pm);
        braid_kern_select_isa("auto");
        free(src);
    }
}

/* Exact integer quotient, truncated toward zero; divisor 0 counts as 1. */
static uint64_t ref_div(braid_dtype_t dt, uint64_t x, uint64_t d)
{
    int64_t s = sext(dt, x);
    d = d ? d : 1;
    if (!dt_signed(dt))
        return x / d;
    if (d > (uint64_t)INT64_MAX)
        return (s == INT64_MIN && d == 1ull << 63 ? ~0ull : 0) & dt_mask(dt);
    return (uint64_t)(s / (int64_t)d) & dt_mask(dt);
}

static void test_divide(void **state)
{
    static const uint64_t divs[] = { 0, 1, 2, 3, 7, 8, 10, 127, 255, 256, 65537, 0x7fffffff,
                                     0x80000000, 0xffffffff, 1ull << 32, (1ull << 32) + 1,
                                     (1ull << 53) + 1, INT64_MAX, 1ull << 63, UINT64_MAX };
    (void)state;
    for (int t = 0; t < BRAID_NUM_DTYPES; t++) {
        braid_dtype_t dt = (braid_dtype_t)t;
        size_t n = 1000, sz = braid_dtype_size(dt);
        uint64_t mask = dt_mask(dt), edges[] = { 0, 1, mask, mask >> 1, (mask >> 1) + 1, 2, mask - 1 };
        char *src = malloc((n + 1) * sz), *dst = malloc((n + 1) * sz), *cp = malloc((n + 1) * sz);
        for (size_t i = 0; i <= n; i++)
            elt_set(dt, src, i, i < 7 ? edges[i] : rng() >> (rng() % 64));
        for (int v = 0; v < NISA; v++) {
            if (braid_kern_select_isa(isa_names[v]) != 0)
                continue;
            for (size_t k = 0; k < sizeof(divs) / sizeof(divs[0]); k++) {
                memcpy(dst, src, (n + 1) * sz);
                memcpy(cp, src, (n + 1) * sz);
                braid_kern_divide(dt, dst + sz, src + sz, n, divs[k]);
                braid_kern_divide(dt, cp + sz, cp + sz, n, divs[k]);   /* in place */
                assert_memory_equal(dst, cp, (n + 1) * sz);
                for (size_t i = 1; i <= n; i++) {
                    uint64_t x = elt_get(dt, src, i), got = elt_get(dt, dst, i);
                    uint64_t want = braid_dtype_is_float(dt) ? x : ref_div(dt, x, divs[k]);
                    if (got != want)
                        fail_msg("%s %s: 0x%llx / %llu gave 0x%llx, want 0x%llx", isa_names[v],
                                 braid_dtype_name(dt), (unsigned long long)x,
                                 (unsigned long long)divs[k], (unsigned long long)got,
                                 (unsigned long long)want);
                }
            }
        }
        braid_kern_select_isa("auto");
        free(src), free(dst), free(cp);
    }
}

/* Copies of odd sizes between odd alignments, around the streaming threshold too. */
static void test_copy(void **state)
{
    static const size_t sizes[] = { 0, 1, 7, 63, 64, 65, 255, 4095, 65536 + 3, (1 << 20) - 1,
                                    1 << 20, (1 << 20) + 1, (3 << 20) + 17 };
    static const size_t soffs[] = { 0, 1, 5, 63 }, doffs[] = { 0, 3, 32, 61 };
    size_t max = ((3 << 20) + 17 + 128 + 63) & ~(size_t)63;   /* aligned_alloc wants a multiple */
    unsigned char *src = aligned_alloc(64, max), *dst = aligned_alloc(64, max);
    (void)state;
    for (size_t i = 0; i < max; i++)
        src[i] = (unsigned char)rng();
    for (int v = 0; v < NISA; v++) {
        if (braid_kern_select_isa(isa_names[v]) != 0)
            continue;
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (size_t so = 0; so < 4; so++)
                for (size_t dof = 0; dof < 4; dof++) {
                    size_t n = sizes[si];
                    memset(dst, 0x5a, max);
                    braid_kern_copy(dst + doffs[dof], src + soffs[so], n);
                    assert_memory_equal(dst + doffs[dof], src + soffs[so], n);
                    for (size_t g = 0; g < doffs[dof]; g++)
                        assert_int_equal(dst[g], 0x5a);
                    for (size_t g = doffs[dof] + n; g < doffs[dof] + n + 64; g++)
                        assert_int_equal(dst[g], 0x5a);
                }
    }
    braid_kern_select_isa("auto");
    free(src), free(dst);
}

/* fp16 and fp8 reductions never touch fp32 subnormals, so FTZ/DAZ leave them unchanged. */
static void test_reduce_ftz_daz(void **state)
{
    static const braid_dtype_t dts[] = { BRAID_FP16, BRAID_FP8_E4M3, BRAID_FP8_E5M2 };
    size_t n = 65536;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *d1 = malloc(n * 2), *d2 = malloc(n * 2);
    braid_scalar_t pm = { .f = -0.3 };
    unsigned csr = _mm_getcsr();
    (void)state;
    for (size_t i = 0; i < n; i++)
        a[i] = (uint16_t)i, b[i] = (uint16_t)rng();
    for (int t = 0; t < 3; t++)
        for (int op = 0; op < BRAID_NUM_OPS; op++) {
            size_t cnt = braid_dtype_size(dts[t]) == 1 ? 2 * n : n;
            braid_kern_reduce(dts[t], (braid_opkind_t)op, d1, a, b, cnt, op ? NULL : &pm);
            _mm_setcsr(csr | 0x8040);
            braid_kern_reduce(dts[t], (braid_opkind_t)op, d2, a, b, cnt, op ? NULL : &pm);
            _mm_setcsr(csr);
            assert_memory_equal(d1, d2, n * 2);
        }
    free(a), free(b), free(d1), free(d2);
}

/* braid_kern_cast between every pair of float types, with and without a scale and an
 * accumulation, against fp32 (or, with fp64 on a side, fp64) arithmetic on the reference
 * decodings, rounded by the reference encoder. */
static const braid_dtype_t float_types[] = { BRAID_FP16, BRAID_BF16, BRAID_FP32, BRAID_FP64,
                                             BRAID_FP8_E4M3, BRAID_FP8_E5M2 };

static double ref_cast(braid_dtype_t ddt, braid_dtype_t sdt, uint64_t sbits, uint64_t dbits,
                       const double *scale, int acc)
{
    int wide = ddt == BRAID_FP64 || sdt == BRAID_FP64;
    double v = ref_load(sdt, sbits), d = ref_load(ddt, dbits);
    if (!wide) {
        float f = (float)v;
        if (scale != NULL)
            f = f * (float)*scale;
        if (acc)
            f = (float)d + f;
        return f;
    }
    if (scale != NULL)
        v = v * *scale;
    return acc ? d + v : v;
}

static void check_cast(braid_dtype_t ddt, braid_dtype_t sdt, const double *scale, int acc)
{
    size_t n = 1000, ds = braid_dtype_size(ddt), ss = braid_dtype_size(sdt);
    char *src = malloc(n * ss), *dst = malloc(n * ds), *before = malloc(n * ds);
    for (size_t i = 0; i < n; i++) {
        elt_set(sdt, src, i, gen_elem(sdt));
        elt_set(ddt, before, i, gen_elem(ddt));
    }
    memcpy(dst, before, n * ds);
    braid_kern_cast(ddt, dst, sdt, src, n, scale, acc);
    for (size_t i = 0; i < n; i++) {
        double want = ref_cast(ddt, sdt, elt_get(sdt, src, i), elt_get(ddt, before, i), scale,
                               acc);
        uint64_t got = elt_get(ddt, dst, i);
        if (ddt == sdt && scale == NULL && !acc) {   /* a copy: bits kept, inf included */
            if (got != elt_get(sdt, src, i))
                fail_msg("cast %s to itself changed element %zu", braid_dtype_name(sdt), i);
            continue;
        }
        if (isnan(want) ? isnan(ref_load(ddt, got)) : got == ref_store(ddt, want))
            continue;
        fail_msg("cast %s -> %s (scale %g, accumulate %d) element %zu: got %#llx, want %#llx "
                 "(%g)", braid_dtype_name(sdt), braid_dtype_name(ddt), scale ? *scale : 1.0,
                 acc, i, (unsigned long long)got, (unsigned long long)ref_store(ddt, want),
                 want);
    }
    free(src), free(dst), free(before);
}

static void test_cast(void **state)
{
    (void)state;
    const double third = 1.0 / 3.0;
    size_t nt = sizeof(float_types) / sizeof(float_types[0]);
    for (int v = 0; v < NISA; v++) {
        if (braid_kern_select_isa(isa_names[v]) != 0)
            continue;
        for (size_t a = 0; a < nt; a++)
            for (size_t b = 0; b < nt; b++)
                for (int acc = 0; acc < 2; acc++) {
                    check_cast(float_types[a], float_types[b], NULL, acc);
                    check_cast(float_types[a], float_types[b], &third, acc);
                }
    }
    braid_kern_select_isa("auto");
}

static void test_names_and_dispatch(void **state)
{
    static const size_t sizes[BRAID_NUM_DTYPES] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
    const char *best;
    (void)state;
    for (int t = 0; t < BRAID_NUM_DTYPES; t++) {
        assert_int_equal(braid_dtype_size((braid_dtype_t)t), sizes[t]);
        assert_int_equal(braid_dtype_is_float((braid_dtype_t)t), t >= BRAID_FP16);
        assert_string_not_equal(braid_dtype_name((braid_dtype_t)t), "invalid");
    }
    assert_string_equal(braid_dtype_name(BRAID_FP32), "float32");
    assert_int_equal(braid_dtype_size(BRAID_NUM_DTYPES), 0);
    assert_string_equal(braid_dtype_name((braid_dtype_t)-1), "invalid");
    assert_string_equal(braid_opkind_name(BRAID_OP_MIN), "min");
    assert_string_equal(braid_opkind_name(BRAID_NUM_OPS), "invalid");

    print_message("host kernel variant in use (BRAID_CPU_ISA may force it): %s\n",
                  braid_kern_isa());
    assert_int_equal(braid_kern_select_isa("generic"), 0);
    assert_string_equal(braid_kern_isa(), "generic");
    assert_int_equal(braid_kern_select_isa("sse9"), -1);
    assert_int_equal(braid_kern_select_isa(NULL), -1);
    assert_string_equal(braid_kern_isa(), "generic");
    assert_int_equal(braid_kern_select_isa("auto"), 0);
    best = braid_kern_isa();   /* the best this cpu runs: every better variant is refused */
    for (int v = NISA - 1; strcmp(isa_names[v], best) != 0; v--)
        assert_int_equal(braid_kern_select_isa(isa_names[v]), -1);
    assert_int_equal(braid_kern_select_isa("auto"), 0);
    print_message("best host kernel variant here: %s\n", best);
}

static void test_scalar_load(void **state)
{
    int8_t i8 = -5;
    uint8_t u8 = 250, e4 = 0xd4, e5 = 0x3c;
    int32_t i32 = -70000;
    uint32_t u32 = 4000000000u;
    int64_t i64 = INT64_MIN;
    uint64_t u64 = UINT64_MAX;
    uint16_t h = 0x3555, bf = 0xc2f7;
    float f = 0.1f;
    double d = -1e300;
    (void)state;
    assert_int_equal(braid_scalar_load(BRAID_INT8, &i8).i, -5);
    assert_int_equal(braid_scalar_load(BRAID_UINT8, &u8).u, 250);
    assert_int_equal(braid_scalar_load(BRAID_INT32, &i32).i, -70000);
    assert_int_equal(braid_scalar_load(BRAID_UINT32, &u32).u, 4000000000u);
    assert_true(braid_scalar_load(BRAID_INT64, &i64).i == INT64_MIN);
    assert_true(braid_scalar_load(BRAID_UINT64, &u64).u == UINT64_MAX);
    assert_true(braid_scalar_load(BRAID_FP16, &h).f == 0x1.554p-2);
    assert_true(braid_scalar_load(BRAID_BF16, &bf).f == -123.5);
    assert_true(braid_scalar_load(BRAID_FP32, &f).f == (double)0.1f);
    assert_true(braid_scalar_load(BRAID_FP64, &d).f == -1e300);
    assert_true(braid_scalar_load(BRAID_FP8_E4M3, &e4).f == -12.0);
    assert_true(braid_scalar_load(BRAID_FP8_E5M2, &e5).f == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_dispatch),
        cmocka_unit_test(test_scalar_load),
        cmocka_unit_test(test_conv_all_codes),
        cmocka_unit_test(test_conv_ties_and_neighbours),
        cmocka_unit_test(test_conv_specials_and_random),
        cmocka_unit_test(test_conv_f16c),
        cmocka_unit_test(test_conv_ftz_daz),
        cmocka_unit_test(test_reduce_all),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_divide),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_reduce_ftz_daz),
    };
    return cmocka_run_group_tests(tests, setup_fmts, teardown_fmts);
}
