/*
 * The emulated HIP runtime of ROCm 5 (emu/rocm5/libamdhip64.so.5) as a program compiled
 * against ROCm's own hip_runtime_api.h sees it (Debian's ROCm 5.2 headers): so the struct
 * layouts and enum values it presents are checked against the real ones, and linking
 * checks that it exports the names, with the symbol versions, a ROCm 5 program asks for.
 *
 * Checks: the runtime's version; devices and hipGetDeviceProperties (name, memory,
 * multiprocessors, wavefront size, gcnArchName, read through the header's struct) and
 * attributes; memory: hipMalloc of 0, copies and memsets, pointer attributes of device,
 * host and unknown memory, hipGetLastError giving the last call's error once; streams:
 * hipStreamWaitValue32 compares under its mask as plain numbers (a value "behind" the word
 * by wrap-around is not reached, as on ROCm), released by hipStreamWriteValue32 from another
 * stream; events; hipIpcOpenMemHandle refusing CUDA's flag value (0 is ROCm 5's); code
 * objects: braid's bundle (kernels/gpu/kernels.hipfb of BRAID_BUILD_DIR, where braid was
 * built with hipcc) loads on the default gfx90a,
 * a bundle without it and an ELF for another processor do not (hipErrorNoBinaryForGpu),
 * an ELF for gfx90a does, anything else is hipErrorInvalidImage; a launch whose packed
 * arguments have the wrong size is refused. Then all of it again in a second process, in
 * strict mode.
 * Prints a line per check; exits 1 on any failure, 77 where ROCm's headers are missing.
 */
#if !__has_include(<hip/hip_runtime_api.h>)
#include <stdio.h>

int main(void)
{
    puts("emu_hip: ROCm's hip/hip_runtime_api.h was not found (libamdhip64-dev): skipped");
    return 77;
}
#else

#include <hip/hip_runtime_api.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/gpu/kargs.h"

#define NBYTES 4096
#define SETTLE_MS 200           /* how long a check gives what must not happen to happen */
#define WAIT_MS 30000

static int checks, failures;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    checks++;
    failures += !ok;
}

#define HIP(call) check((call) == hipSuccess, "%s", #call)
#define HIP_ERR(call, want) check((call) == (want), "%s gives %s", #call, #want)

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* Wait up to ms for hipStreamQuery(s) to give want; does it? */
static int wait_stream(hipStream_t s, hipError_t want, int ms)
{
    for (int t = 0; t < ms; t += 5) {
        if (hipStreamQuery(s) == want)
            return 1;
        sleep_ms(5);
    }
    return hipStreamQuery(s) == want;
}

static void check_devices(void)
{
    int version = 0, n = 0, v = 0;
    hipDeviceProp_t prop;
    HIP(hipRuntimeGetVersion(&version));
    check(version / 10000000 == 5, "hipRuntimeGetVersion says ROCm 5 (%d)", version);
    HIP(hipGetDeviceCount(&n));
    check(n >= 1, "a device (%d)", n);
    memset(&prop, 0x5a, sizeof(prop));
    HIP(hipGetDeviceProperties(&prop, 0));
    check(strncmp(prop.gcnArchName, "gfx90a", 6) == 0, "gcnArchName is gfx90a... (\"%.32s\")",
          prop.gcnArchName);
    check(prop.name[0] != '\0' && prop.totalGlobalMem > 0 && prop.multiProcessorCount > 0 &&
              prop.warpSize == 64 && prop.major == 9,
          "hipDeviceProp_t: name \"%.32s\", %zu bytes, %d CUs, wavefront %d, %d.%d", prop.name,
          prop.totalGlobalMem, prop.multiProcessorCount, prop.warpSize, prop.major, prop.minor);
    HIP(hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, 0));
    check(v == prop.multiProcessorCount, "the attribute agrees on the CUs (%d)", v);
    HIP_ERR(hipSetDevice(n), hipErrorInvalidDevice);
    HIP(hipSetDevice(0));
}

static void check_memory(void)
{
    void *d = (void *)1, *h = NULL;
    unsigned char buf[NBYTES];
    char host[64];
    hipPointerAttribute_t a;
    HIP(hipMalloc(&d, 0));
    check(d == NULL, "hipMalloc of 0 bytes gives NULL");
    HIP(hipFree(NULL));
    HIP(hipMalloc(&d, NBYTES));
    HIP(hipMemset(d, 0x3c, NBYTES));
    memset(buf, 0, sizeof(buf));
    HIP(hipMemcpy(buf, d, NBYTES, hipMemcpyDefault));
    check(buf[0] == 0x3c && buf[NBYTES - 1] == 0x3c, "memset then copy back");
    HIP(hipPointerGetAttributes(&a, (char *)d + 8));
    check(a.memoryType == hipMemoryTypeDevice && a.device == 0 &&
              a.devicePointer == (char *)d + 8,
          "device memory: hipMemoryTypeDevice (%d), device %d", (int)a.memoryType, a.device);
    HIP(hipHostMalloc(&h, NBYTES, hipHostMallocMapped));
    HIP(hipPointerGetAttributes(&a, h));
    check(a.memoryType == hipMemoryTypeHost && a.hostPointer == h && a.devicePointer != NULL,
          "host memory: hipMemoryTypeHost (%d), mapped", (int)a.memoryType);
    HIP_ERR(hipPointerGetAttributes(&a, host), hipErrorInvalidValue);
    HIP_ERR(hipGetLastError(), hipErrorInvalidValue);
    HIP_ERR(hipGetLastError(), hipSuccess);
    HIP(hipHostFree(h));
    HIP(hipFree(d));
}

/* s waits on a pinned word under ROCm's rules; t writes it. */
static void check_waits(void)
{
    uint32_t *word = NULL;
    void *dword = NULL;
    hipStream_t s, t;
    hipEvent_t ev;
    HIP(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    HIP(hipStreamCreateWithFlags(&t, hipStreamNonBlocking));
    HIP(hipHostMalloc((void **)&word, sizeof(*word), hipHostMallocMapped));
    HIP(hipHostGetDevicePointer(&dword, word, 0));
    HIP(hipStreamWriteValue32(t, dword, 0x1234, 0));
    HIP(hipStreamSynchronize(t));
    HIP(hipStreamWaitValue32(s, dword, 0x34, hipStreamWaitValueEq, 0xff));
    check(wait_stream(s, hipSuccess, WAIT_MS), "a masked Eq wait passes (0x1234 & 0xff)");
    HIP(hipStreamWriteValue32(t, dword, 5, 0));
    HIP(hipStreamSynchronize(t));
    HIP(hipStreamWaitValue32(s, dword, (uint32_t)5 - 10, hipStreamWaitValueGte, 0xffffffffu));
    sleep_ms(SETTLE_MS);
    check(hipStreamQuery(s) == hipErrorNotReady,
          "a Gte wait for 5 - 10 (wrapped) on 5 does not pass: plain numbers, as on ROCm");
    HIP(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
    HIP(hipEventRecord(ev, s));
    HIP_ERR(hipEventQuery(ev), hipErrorNotReady);
    HIP(hipStreamWriteValue32(t, dword, 0xffffffffu, 0));
    check(wait_stream(s, hipSuccess, WAIT_MS), "it passes once the word is 0xffffffff");
    HIP(hipEventSynchronize(ev));
    HIP(hipEventDestroy(ev));
    HIP(hipStreamDestroy(s));
    HIP(hipStreamDestroy(t));
    HIP(hipHostFree(word));
}

static void check_ipc(void)
{
    void *d = NULL, *p = NULL;
    hipIpcMemHandle_t h;
    HIP(hipMalloc(&d, NBYTES));
    HIP(hipIpcGetMemHandle(&h, d));
    HIP_ERR(hipIpcOpenMemHandle(&p, h, 0x1), hipErrorInvalidValue);   /* ROCm 6's value */
    HIP(hipFree(d));
}

/* ---- code objects ------------------------------------------------------------------------ */

static void put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

/* A bundle of one entry for target, its code object a bare ELF header. */
static size_t make_bundle(unsigned char *b, const char *target)
{
    const char *magic = "__CLANG_OFFLOAD_BUNDLE__";
    size_t tl = strlen(target), off = 24 + 8 + 24 + tl;
    memset(b, 0, 1024);
    memcpy(b, magic, 24);
    put64(b + 24, 1);
    put64(b + 32, off);
    put64(b + 40, 64);
    put64(b + 48, tl);
    memcpy(b + 56, target, tl);
    memcpy(b + off, "\x7f" "ELF", 4);
    return off + 64;
}

/* An AMDGPU HSA code object's ELF header for processor mach (e_flags' low byte). */
static void make_elf(unsigned char *e, unsigned int mach)
{
    uint16_t machine = 224;     /* EM_AMDGPU */
    uint32_t flags = mach;
    memset(e, 0, 64);
    memcpy(e, "\x7f" "ELF", 4);
    e[4] = 2;                   /* 64-bit */
    e[7] = 64;                  /* ELFOSABI_AMDGPU_HSA */
    memcpy(e + 18, &machine, sizeof(machine));
    memcpy(e + 48, &flags, sizeof(flags));
}

static void check_modules(const char *bundle_path)
{
    unsigned char img[1024];
    hipModule_t mod;
    hipFunction_t fn;
    make_bundle(img, "hipv4-amdgcn-amd-amdhsa--gfx908");
    HIP_ERR(hipModuleLoadData(&mod, img), hipErrorNoBinaryForGpu);
    make_bundle(img, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
    HIP_ERR(hipModuleLoadData(&mod, img), hipErrorNoBinaryForGpu);   /* the device: xnack- */
    make_elf(img, 0x30);        /* gfx908 */
    HIP_ERR(hipModuleLoadData(&mod, img), hipErrorNoBinaryForGpu);
    HIP_ERR(hipModuleLoadData(&mod, "not a code object"), hipErrorInvalidImage);
    HIP_ERR(hipModuleLoadData(&mod, BRAID_EMU_IMAGE_MAGIC), hipErrorInvalidImage);
    make_elf(img, 0x3f);        /* gfx90a */
    HIP(hipModuleLoadData(&mod, img));
    HIP(hipModuleGetFunction(&fn, mod, BRAID_KERNEL_COPY));
    char args[8];
    size_t size = sizeof(args);
    void *extra[] = { HIP_LAUNCH_PARAM_BUFFER_POINTER, args, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                      &size, HIP_LAUNCH_PARAM_END };
    HIP_ERR(hipModuleLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra),
            hipErrorInvalidValue);
    HIP(hipModuleUnload(mod));
    make_bundle(img, "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+");
    HIP(hipModuleLoadData(&mod, img));
    HIP(hipModuleUnload(mod));
    FILE *f = fopen(bundle_path, "rb");
    if (f == NULL) {
        printf("skip: braid's code-object bundle (%s) is not there (built without hipcc)\n",
               bundle_path);
        return;
    }
    static unsigned char image[8 << 20];
    size_t n = fread(image, 1, sizeof(image), f);
    fclose(f);
    check(n > 0 && n < sizeof(image), "braid's bundle read (%zu bytes)", n);
    HIP(hipModuleLoadData(&mod, image));
    HIP(hipModuleUnload(mod));
}

/* The checks again, in strict mode, in a child (the runtime reads the setting once). */
static void check_strict(char **argv)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("BRAID_EMU_STRICT", "1", 1);
        execv("/proc/self/exe", argv);
        _exit(99);
    }
    int status = 0;
    check(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "every check passes in strict mode too (a second process)");
}

int main(int argc, char **argv)
{
    char bundle[4096];
    const char *build = getenv("BRAID_BUILD_DIR");
    const char *strict = getenv("BRAID_EMU_STRICT");
    (void)argc;
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(120);
    snprintf(bundle, sizeof(bundle), "%s/kernels/gpu/kernels.hipfb", build != NULL ? build : ".");
    printf("== %s mode\n", strict != NULL && strcmp(strict, "1") == 0 ? "strict" : "lenient");
    check_devices();
    check_memory();
    check_waits();
    check_ipc();
    check_modules(bundle);
    if (strict == NULL || strcmp(strict, "1") != 0)
        check_strict(argv);
    printf("emu_hip: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
#endif
