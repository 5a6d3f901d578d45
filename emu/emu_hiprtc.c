/*
 * hiprtc in the emulated HIP runtime of ROCm 5 (libamdhip64.so.5 carries it there; from ROCm
 * 6 it is its own libhiprtc, which the .so.6 face does not emulate). Compiling is not
 * emulated: each call goes to the installed ROCm's hiprtc, whose code object the emulated
 * hipModuleLoadData then takes if it is for the device's arch (emu_hip.c). So braid's
 * run-time compile (src/device/hip.c) runs for real where ROCm is installed.
 *
 * Which hiprtc: BRAID_EMU_HIPRTC (a library's path), else the first of ROCm's usual places
 * that has one, never this library itself (it has ROCm 5's soname, so the real one is
 * opened by its path). Where there is none, every call fails with
 * HIPRTC_ERROR_INTERNAL_ERROR, and hiprtcGetErrorString says why.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "device/hip_abi.h"
#include "emu/emu_int.h"

#define EMU_HIPRTC_INTERNAL_ERROR 11     /* HIPRTC_ERROR_INTERNAL_ERROR */

static const char *const emu_hiprtc_paths[] = {
    "/opt/rocm/lib/libamdhip64.so.5", "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5",
    "/usr/lib/aarch64-linux-gnu/libamdhip64.so.5", "/usr/lib64/libamdhip64.so.5",
};

#define X(name, ret, params) ret (*name) params;
static struct {
    BRAID_HIPRTC_ENTRIES(X)
} rtc;
#undef X

static pthread_once_t rtc_once = PTHREAD_ONCE_INIT;
static char rtc_why[256];

/* Is path this very library? */
static int is_self(const char *path)
{
    Dl_info me;
    struct stat a, b;
    if (dladdr((void *)is_self, &me) == 0 || me.dli_fname == NULL)
        return 0;
    return stat(path, &a) == 0 && stat(me.dli_fname, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static int rtc_try(const char *path)
{
    if (is_self(path))
        return 0;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return 0;
#define X(name, ret, params) *(void **)&rtc.name = dlsym(lib, #name);
    BRAID_HIPRTC_ENTRIES(X)
#undef X
#define X(name, ret, params) if (rtc.name == NULL) goto out_close;
    BRAID_HIPRTC_ENTRIES(X)
#undef X
    return 1;
out_close:
    dlclose(lib);
    return 0;
}

static void rtc_load(void)
{
    const char *want = getenv("BRAID_EMU_HIPRTC");
    if (want != NULL && *want != '\0') {
        if (!rtc_try(want))
            snprintf(rtc_why, sizeof(rtc_why), "BRAID_EMU_HIPRTC=%s is not a library with "
                     "hiprtc's entries that loads", want);
        return;
    }
    for (size_t i = 0; i < sizeof(emu_hiprtc_paths) / sizeof(emu_hiprtc_paths[0]); i++)
        if (rtc_try(emu_hiprtc_paths[i]))
            return;
    snprintf(rtc_why, sizeof(rtc_why), "braid's emulated HIP runtime compiles with the "
             "installed ROCm's hiprtc, and found none (set BRAID_EMU_HIPRTC to its library)");
}

static int rtc_ready(void)
{
    pthread_once(&rtc_once, rtc_load);
    return rtc.hiprtcCreateProgram != NULL;
}

EMU_API const char *hiprtcGetErrorString(hiprtcResult r)
{
    if (!rtc_ready())
        return r == EMU_HIPRTC_INTERNAL_ERROR ? rtc_why : "hiprtc is not there";
    return rtc.hiprtcGetErrorString(r);
}

EMU_API hiprtcResult hiprtcCreateProgram(hiprtcProgram *prog, const char *src, const char *name,
                                         int nheaders, const char *const *headers,
                                         const char *const *include_names)
{
    if (!rtc_ready())
        return EMU_HIPRTC_INTERNAL_ERROR;
    return rtc.hiprtcCreateProgram(prog, src, name, nheaders, headers, include_names);
}

/* A program exists only where hiprtc does: the rest need no check. */
EMU_API hiprtcResult hiprtcCompileProgram(hiprtcProgram prog, int nopts, const char *const *opts)
{
    return rtc_ready() ? rtc.hiprtcCompileProgram(prog, nopts, opts) : EMU_HIPRTC_INTERNAL_ERROR;
}

EMU_API hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram prog, size_t *bytes)
{
    return rtc_ready() ? rtc.hiprtcGetProgramLogSize(prog, bytes) : EMU_HIPRTC_INTERNAL_ERROR;
}

EMU_API hiprtcResult hiprtcGetProgramLog(hiprtcProgram prog, char *log)
{
    return rtc_ready() ? rtc.hiprtcGetProgramLog(prog, log) : EMU_HIPRTC_INTERNAL_ERROR;
}

EMU_API hiprtcResult hiprtcGetCodeSize(hiprtcProgram prog, size_t *bytes)
{
    return rtc_ready() ? rtc.hiprtcGetCodeSize(prog, bytes) : EMU_HIPRTC_INTERNAL_ERROR;
}

EMU_API hiprtcResult hiprtcGetCode(hiprtcProgram prog, char *code)
{
    return rtc_ready() ? rtc.hiprtcGetCode(prog, code) : EMU_HIPRTC_INTERNAL_ERROR;
}

EMU_API hiprtcResult hiprtcDestroyProgram(hiprtcProgram *prog)
{
    return rtc_ready() ? rtc.hiprtcDestroyProgram(prog) : EMU_HIPRTC_INTERNAL_ERROR;
}
