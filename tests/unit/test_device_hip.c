/*
 * The HIP backend (src/device/hip.c) against whatever ROCm this machine has.
 *
 * Without an AMD GPU (CI: Debian's ROCm 5.2, no GPU) init must succeed with 0 devices,
 * pointers must read as host memory, the calls that need a device must fail cleanly, and
 * hiprtc must compile a kernel for gfx90a (the arch is set with braid_device_hip_test_arch,
 * as no device is there to bind). An arch the installed comgr does not know must be refused
 * before hiprtc sees it (Debian's 5.2 hiprtc crashes on one). With an AMD GPU the memory,
 * stream and event calls run for real. Without libamdhip64 only the clean failure of init is
 * checked, and the test reports SKIP (77).
 *
 * A check that this machine cannot run (no GPU, no hiprtc, no comgr) is skipped with its
 * reason, printed where it is skipped and again at the end; the run passes on the checks
 * that ran, and is SKIP (77) if every check was skipped.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device/device.h"
#include "device/hip_abi.h"

/* ELF facts of AMDGPU code objects: e_machine, and the processor in e_flags' low byte. */
#define ELF_EM_AMDGPU 224
#define ELF_EF_AMDGPU_MACH 0xffu
#define ELF_EF_AMDGPU_MACH_GFX90A 0x3fu

static const braid_device_ops_t *ops = &braid_device_hip;
static int ndev = -1;

/* ---- skips, with their reasons ----------------------------------------------------------- */

#define MAX_SKIPS 16
static struct {
    const char *test, *why;
} skips[MAX_SKIPS];
static int nskips;

/* Skip the running check (cmocka's skip() leaves it), saying why. */
#define SKIP_BECAUSE(_why)                                                                  \
    do {                                                                                    \
        skip_note(__func__, (_why));                                                        \
        skip();                                                                             \
    } while (0)

static void skip_note(const char *test, const char *why)
{
    printf("# skip: %s: %s\n", test, why);
    if (nskips < MAX_SKIPS) {
        skips[nskips].test = test;
        skips[nskips++].why = why;
    }
}

/* The run's end: failures first; then every check skipped is SKIP (77), some skipped a
 * pass on the rest, each skip named with its reason. */
static int skips_report(int failed, int ntests)
{
    for (int i = 0; i < nskips; i++)
        printf("test_device_hip: skipped %s: %s\n", skips[i].test, skips[i].why);
    if (failed != 0)
        return failed;
    if (nskips >= ntests) {
        printf("SKIP: test_device_hip: all %d checks were skipped (reasons above)\n", ntests);
        return 77;
    }
    printf("test_device_hip: %d of %d checks ran and passed%s\n", ntests - nskips, ntests,
           nskips ? "; the others were skipped (reasons above)" : "");
    return 0;
}

static const char kernel_ok[] =
    "extern \"C\" __global__ void braid_k_test(int *p) { p[threadIdx.x] = (int)threadIdx.x; }\n";
static const char kernel_bad[] =
    "extern \"C\" __global__ void braid_k_test(int *p) { p[threadIdx.x] = no_such_name; }\n";

/* A library found stays loaded (as braid keeps it): unloading libamdhip64 loses what its
 * constructors allocated, which the sanitizer build reports as leaks. */
static int lib_loads(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (dlopen(names[i], RTLD_NOW | RTLD_LOCAL) != NULL)
            return 1;
    return 0;
}

static int have_runtime(void)
{
    static const char *const names[] = { "libamdhip64.so.7", "libamdhip64.so.6",
                                         "libamdhip64.so.5", "libamdhip64.so" };
    return lib_loads(names, sizeof(names) / sizeof(names[0]));
}

/* hiprtc inside the runtime (ROCm 5.x, 6.x) or beside it (6.0 and later). */
static int have_hiprtc(void)
{
    static const char *const rtc[] = { "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so" };
    static const char *const hip[] = { "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so" };
    if (lib_loads(rtc, sizeof(rtc) / sizeof(rtc[0])))
        return 1;
    for (size_t i = 0; i < sizeof(hip) / sizeof(hip[0]); i++) {
        void *h = dlopen(hip[i], RTLD_NOW | RTLD_LOCAL);
        if (h != NULL && dlsym(h, "hiprtcCreateProgram") != NULL)
            return 1;
    }
    return 0;
}

/* The refusal test hands hiprtc nothing only if comgr can be asked. */
static int have_comgr(void)
{
    static const char *const names[] = { "libamd_comgr.so.3", "libamd_comgr.so.2",
                                         "libamd_comgr.so" };
    return lib_loads(names, sizeof(names) / sizeof(names[0]));
}

/* ---- without the runtime ---------------------------------------------------------------- */

static void test_init_without_runtime(void **state)
{
    int n = 7;
    (void)state;
    assert_int_equal(ops->init(&n), BRAID_ERR_UNSUPPORTED);
    assert_int_equal(n, 0);
    assert_non_null(strstr(braid_err_last(), "libamdhip64"));
}

/* ---- with the runtime ------------------------------------------------------------------- */

static void test_init(void **state)
{
    int again = -1;
    (void)state;
    assert_int_equal(ops->init(&ndev), BRAID_OK);
    assert_true(ndev >= 0);
    assert_int_equal(ops->init(&again), BRAID_OK);   /* a second init only counts again */
    assert_int_equal(again, ndev);
    printf("# HIP runtime sees %d device(s)\n", ndev);
}

static void test_ptr_info_host(void **state)
{
    braid_ptr_info_t info = { BRAID_MEM_DEVICE, 5, NULL };
    int on_stack = 0;
    char *heap = malloc(4096);
    (void)state;
    assert_non_null(heap);
    assert_int_equal(ops->ptr_info(heap, &info), BRAID_OK);
    assert_int_equal(info.kind, BRAID_MEM_HOST);
    assert_int_equal(info.ordinal, -1);
    assert_int_equal(ops->ptr_info(&on_stack, &info), BRAID_OK);
    assert_int_equal(info.kind, BRAID_MEM_HOST);
    free(heap);
}

static void test_table(void **state)
{
    (void)state;
    assert_string_equal(ops->name, "hip");
    assert_non_null(ops->compile);
}

/* With no device, calls that need one fail with a message that names the HIP call. */
static void test_no_device_errors(void **state)
{
    char buf[256];
    void *p = NULL;
    (void)state;
    if (ndev != 0)
        SKIP_BECAUSE("an AMD GPU is here: the calls that need one succeed");
    assert_true(ops->bind(0) < 0);
    printf("# bind(0): %s\n", braid_err_last());
    assert_non_null(strstr(braid_err_last(), "HIP: hip"));
    assert_true(ops->describe(0, buf, sizeof(buf)) < 0);
    assert_true(ops->mem_alloc(4096, &p) < 0);
    assert_null(p);
    printf("# mem_alloc: %s\n", braid_err_last());
    assert_non_null(strstr(braid_err_last(), "hipMalloc"));
}

static void test_compile_gfx90a(void **state)
{
    void *image = NULL;
    size_t size = 0;
    (void)state;
    if (!have_hiprtc())
        SKIP_BECAUSE("no hiprtc (libhiprtc, or hiprtcCreateProgram in libamdhip64)");
    braid_device_hip_test_arch("gfx90a");
    braid_status_t st = ops->compile(kernel_ok, &image, &size);
    braid_device_hip_test_arch(NULL);
    if (st != BRAID_OK)
        fail_msg("compile for gfx90a: %s", braid_err_last());
    assert_non_null(image);
    assert_true(size > 16);
    printf("# gfx90a code object: %zu bytes\n", size);
    /* a code object (ELF) or a clang offload bundle holding one */
    assert_true(memcmp(image, "\177ELF", 4) == 0 ||
                memcmp(image, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0);
    if (memcmp(image, "\177ELF", 4) == 0 && size >= 52) {
        const unsigned char *e = image;
        unsigned machine = e[18] | (unsigned)e[19] << 8;
        unsigned flags = e[48] | (unsigned)e[49] << 8;
        assert_int_equal(machine, ELF_EM_AMDGPU);
        assert_int_equal(flags & ELF_EF_AMDGPU_MACH, ELF_EF_AMDGPU_MACH_GFX90A);
    }
    free(image);
}

static void test_compile_error_has_log(void **state)
{
    void *image = NULL;
    size_t size = 0;
    (void)state;
    if (!have_hiprtc())
        SKIP_BECAUSE("no hiprtc (libhiprtc, or hiprtcCreateProgram in libamdhip64)");
    braid_device_hip_test_arch("gfx90a");
    assert_int_equal(ops->compile(kernel_bad, &image, &size), BRAID_ERR_DEVICE);
    braid_device_hip_test_arch(NULL);
    assert_null(image);
    assert_non_null(strstr(braid_err_last(), "hiprtcCompileProgram"));
    assert_non_null(strstr(braid_err_last(), "no_such_name"));
}

static void test_compile_unknown_arch(void **state)
{
    void *image = NULL;
    size_t size = 0;
    (void)state;
    if (!have_hiprtc())
        SKIP_BECAUSE("no hiprtc (libhiprtc, or hiprtcCreateProgram in libamdhip64)");
    if (!have_comgr())
        SKIP_BECAUSE("no comgr (libamd_comgr) to ask which archs it knows");
    braid_device_hip_test_arch("gfx9999");
    assert_int_equal(ops->compile(kernel_ok, &image, &size), BRAID_ERR_UNSUPPORTED);
    braid_device_hip_test_arch(NULL);
    assert_null(image);
    assert_non_null(strstr(braid_err_last(), "gfx9999"));
}

/* ---- with an AMD GPU -------------------------------------------------------------------- */

static void test_device_memory(void **state)
{
    braid_ptr_info_t info;
    void *d = NULL, *h = NULL, *stream = NULL, *ev = NULL;
    char buf[256];
    braid_status_t st;
    (void)state;
    if (ndev <= 0)
        SKIP_BECAUSE("no AMD GPU: the HIP runtime sees no device");
    assert_int_equal(ops->bind(0), BRAID_OK);
    assert_int_equal(ops->describe(0, buf, sizeof(buf)), BRAID_OK);
    printf("# device 0: %s\n", buf);
    assert_int_equal(ops->mem_alloc(4096, &d), BRAID_OK);
    assert_int_equal(ops->ptr_info(d, &info), BRAID_OK);
    assert_int_equal(info.kind, BRAID_MEM_DEVICE);
    assert_int_equal(info.ordinal, 0);
    assert_int_equal(ops->host_alloc(4096, &h), BRAID_OK);
    assert_int_equal(ops->ptr_info(h, &info), BRAID_OK);
    assert_int_equal(info.kind, BRAID_MEM_PINNED);
    assert_int_equal(ops->stream_create(&stream), BRAID_OK);
    assert_int_equal(ops->event_create(&ev), BRAID_OK);
    memset(h, 0, 4096);
    assert_int_equal(ops->memset_async(d, 0x5a, 4096, stream), BRAID_OK);
    assert_int_equal(ops->copy_async(h, d, 4096, stream), BRAID_OK);
    assert_int_equal(ops->event_record(ev, stream), BRAID_OK);
    while ((st = ops->event_query(ev)) == BRAID_INPROGRESS)
        ;
    assert_int_equal(st, BRAID_OK);
    assert_int_equal(((unsigned char *)h)[4095], 0x5a);
    assert_int_equal(ops->event_destroy(ev), BRAID_OK);
    assert_int_equal(ops->stream_destroy(stream), BRAID_OK);
    assert_int_equal(ops->host_free(h), BRAID_OK);
    assert_int_equal(ops->mem_free(d), BRAID_OK);
}

int main(void)
{
    if (!have_runtime()) {
        const struct CMUnitTest none[] = { cmocka_unit_test(test_init_without_runtime) };
        int failed = cmocka_run_group_tests(none, NULL, NULL);
        if (failed != 0)
            return failed;
        printf("SKIP: test_device_hip: no HIP runtime (libamdhip64) on this machine: only "
               "init's clean failure was checked\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),   /* first: the others need the runtime loaded */
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_ptr_info_host),
        cmocka_unit_test(test_no_device_errors),
        cmocka_unit_test(test_compile_gfx90a),
        cmocka_unit_test(test_compile_error_has_log),
        cmocka_unit_test(test_compile_unknown_arch),
        cmocka_unit_test(test_device_memory),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return skips_report(failed, (int)(sizeof(tests) / sizeof(tests[0])));
}
