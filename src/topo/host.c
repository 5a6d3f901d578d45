/*
 * Host identity (see host.h): hash of hostname + boot id, or of NCCL_HOSTID.
 */
#include "topo/host.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"

#define HOST_BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_name[256];
static uint64_t host_hash;      /* hash of hostname and boot id */
static uint64_t machine_hash;   /* hash of the boot id */

uint64_t braid_host_fnv1a(uint64_t hash, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

/* The boot id without its newline, or "" where /proc is not there. */
static void host_boot_id_read(char *buf, size_t len)
{
    FILE *f = fopen(HOST_BOOT_ID_PATH, "re");
    buf[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(buf, (int)len, f) == NULL)
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
}

static void host_init(void)
{
    char boot_id[64];
    if (gethostname(host_name, sizeof(host_name) - 1) != 0 || host_name[0] == '\0')
        snprintf(host_name, sizeof(host_name), "unknown");
    host_name[sizeof(host_name) - 1] = '\0';
    host_boot_id_read(boot_id, sizeof(boot_id));
    host_hash = braid_host_fnv1a(BRAID_FNV1A_INIT, host_name, strlen(host_name));
    host_hash = braid_host_fnv1a(host_hash, boot_id, strlen(boot_id));
    machine_hash = braid_host_fnv1a(BRAID_FNV1A_INIT, boot_id, strlen(boot_id));
}

uint64_t braid_host_id(void)
{
    const char *override = braid_param_str(BRAID_P_HOSTID);
    uint64_t id;
    pthread_once(&host_once, host_init);
    if (override != NULL && override[0] != '\0')
        id = braid_host_fnv1a(BRAID_FNV1A_INIT, override, strlen(override));
    else
        id = host_hash;
    return id != 0 ? id : 1;
}

uint64_t braid_machine_id(void)
{
    pthread_once(&host_once, host_init);
    return machine_hash != 0 ? machine_hash : 1;
}

const char *braid_host_name(void)
{
    pthread_once(&host_once, host_init);
    return host_name;
}
