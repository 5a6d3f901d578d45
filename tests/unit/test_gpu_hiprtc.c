/*
 * The embedded HIP source (braid_gpu_hip_source, images.h) compiles with hiprtc, with no
 * GPU: the run-time compile path that the device layer can take instead of the embedded
 * code objects. hiprtc is loaded with dlopen (Debian 12's ROCm 5.2 carries it in
 * libamdhip64.so.5, later ROCm in libhiprtc.so); where there is none the test is skipped
 * (exit 77), and so it is under BRAID_TEST_QUICK=1 (the sanitizer suite, where the compile
 * is slowest and hiprtc's own compiler is not instrumented anyway). It asks for gfx90a
 * only: asked for an arch its comgr lacks (gfx942 on 5.2), hiprtc crashes the process
 * (DESIGN.md, section 4).
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/gpu/images.h"
#include "kernels/gpu/kargs.h"

/* hiprtc.h, the part used here (hiprtcResult is an enum, HIPRTC_SUCCESS 0) */
typedef struct hiprtc_prog *hiprtc_prog_t;
typedef struct hiprtc {
    int (*create)(hiprtc_prog_t *prog, const char *src, const char *name, int nheaders,
                  const char **headers, const char **include_names);
    int (*compile)(hiprtc_prog_t prog, int nopts, const char **opts);
    int (*log_size)(hiprtc_prog_t prog, size_t *size);
    int (*log)(hiprtc_prog_t prog, char *log);
    int (*code_size)(hiprtc_prog_t prog, size_t *size);
    int (*code)(hiprtc_prog_t prog, char *code);
    int (*destroy)(hiprtc_prog_t *prog);
} hiprtc_t;

static const char *const hiprtc_libs[] = { "libhiprtc.so.6", "libhiprtc.so.5",
                                           "libamdhip64.so.5" };
static hiprtc_t rtc;
static void *rtc_lib;

static int hiprtc_open(void)
{
    for (size_t i = 0; i < sizeof(hiprtc_libs) / sizeof(hiprtc_libs[0]); i++) {
        void *h = dlopen(hiprtc_libs[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            continue;
        *(void **)&rtc.create = dlsym(h, "hiprtcCreateProgram");
        *(void **)&rtc.compile = dlsym(h, "hiprtcCompileProgram");
        *(void **)&rtc.log_size = dlsym(h, "hiprtcGetProgramLogSize");
        *(void **)&rtc.log = dlsym(h, "hiprtcGetProgramLog");
        *(void **)&rtc.code_size = dlsym(h, "hiprtcGetCodeSize");
        *(void **)&rtc.code = dlsym(h, "hiprtcGetCode");
        *(void **)&rtc.destroy = dlsym(h, "hiprtcDestroyProgram");
        if (rtc.create && rtc.compile && rtc.log_size && rtc.log && rtc.code_size && rtc.code &&
            rtc.destroy) {
            rtc_lib = h;
            return 0;
        }
        dlclose(h);
    }
    return -1;
}

static void test_hiprtc_gfx90a(void **state)
{
    const char *opts[] = { "--offload-arch=gfx90a", "-std=c++17", "-ffp-contract=off",
                           "-fno-gpu-flush-denormals-to-zero" };
    static const char bundle_magic[] = "__CLANG_OFFLOAD_BUNDLE__";
    hiprtc_prog_t prog;
    size_t size = 0;
    char *code;
    int rc;
    (void)state;

    assert_true(strlen(braid_gpu_hip_source) > 0);
    assert_int_equal(rtc.create(&prog, braid_gpu_hip_source, "braid_kernels.hip", 0, NULL,
                                NULL), 0);
    rc = rtc.compile(prog, (int)(sizeof(opts) / sizeof(opts[0])), opts);
    if (rc != 0) {
        char *log;
        assert_int_equal(rtc.log_size(prog, &size), 0);
        log = calloc(1, size + 1);
        assert_non_null(log);
        rtc.log(prog, log);
        print_error("hiprtc log:\n%s\n", log);
        free(log);
        fail_msg("hiprtcCompileProgram returned %d", rc);
    }
    assert_int_equal(rtc.code_size(prog, &size), 0);
    assert_true(size > 4);
    code = malloc(size);
    assert_non_null(code);
    assert_int_equal(rtc.code(prog, code), 0);
    /* a code object (ELF) or a bundle of them, naming both kernels */
    assert_true(memcmp(code, "\177ELF", 4) == 0 ||
                (size > sizeof(bundle_magic) &&
                 memcmp(code, bundle_magic, sizeof(bundle_magic) - 1) == 0));
    assert_non_null(memmem(code, size, BRAID_KERNEL_REDUCE, sizeof(BRAID_KERNEL_REDUCE)));
    assert_non_null(memmem(code, size, BRAID_KERNEL_COPY, sizeof(BRAID_KERNEL_COPY)));
    print_message("hiprtc: gfx90a code object of %zu bytes\n", size);
    free(code);
    rtc.destroy(&prog);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hiprtc_gfx90a),
    };
    const char *quick = getenv("BRAID_TEST_QUICK");

    if (quick != NULL && strcmp(quick, "1") == 0) {
        printf("SKIP: BRAID_TEST_QUICK=1 leaves out the hiprtc compile (10 to 30 s)\n");
        return 77;
    }
    if (hiprtc_open() != 0) {
        printf("SKIP: no hiprtc (libhiprtc.so or libamdhip64.so.5) on this machine\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
