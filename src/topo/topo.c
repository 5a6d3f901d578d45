/*
 * Topology: a communicator's layout of ranks on hosts (pure, from the bootstrap's table)
 * and this host's hardware (hwloc, with PCI discovery for NICs and GPUs).
 */
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "topo/topo.h"

const char *braid_link_name(braid_link_t l)
{
    static const char *const names[BRAID_LINK_NCLASSES] = { "self", "numa", "host", "net" };
    return (unsigned)l < BRAID_LINK_NCLASSES ? names[l] : "?";
}

void braid_topo_free(braid_topo_t *t)
{
    free(t->host_of);
    free(t->local_rank);
    free(t->host_first);
    free(t->host_ranks);
    free(t->numa);
    memset(t, 0, sizeof(*t));
}

/* The summaries the tuner reads: ranks on the fullest host, ring links leaving a host,
 * the slowest link class. */
static braid_status_t topo_summary(braid_topo_t *t)
{
    int *out = calloc((size_t)t->nhosts, sizeof(int));
    if (out == NULL)
        return braid_err(BRAID_ERR_NOMEM, "topology: out of memory for %d hosts", t->nhosts);
    t->worst = t->nranks > 1 ? BRAID_LINK_NUMA : BRAID_LINK_SELF;
    for (int h = 0; h < t->nhosts; h++)
        if (braid_topo_nlocal(t, h) > t->maxlocal)
            t->maxlocal = braid_topo_nlocal(t, h);
    for (int r = 0; r < t->nranks; r++) {
        int next = (r + 1) % t->nranks;
        braid_link_t l = braid_topo_link(t, r, next);
        if (l == BRAID_LINK_NET && ++out[t->host_of[r]] > t->ring_out)
            t->ring_out = out[t->host_of[r]];
        if (l > t->worst)
            t->worst = l;
    }
    /* a NUMA difference need not show on the ring */
    for (int r = 0; r < t->nranks && t->worst == BRAID_LINK_NUMA; r++)
        if (t->numa[r] < 0 || t->numa[r] != t->numa[0])
            t->worst = BRAID_LINK_HOST;
    free(out);
    return BRAID_OK;
}

braid_status_t braid_topo_build(braid_topo_t *t, int nranks, const uint64_t *host_ids,
                                const int *numa)
{
    size_t n = (size_t)nranks;
    memset(t, 0, sizeof(*t));
    t->nranks = nranks;
    t->host_of = malloc(n * sizeof(int));
    t->local_rank = malloc(n * sizeof(int));
    t->host_first = calloc(n + 1, sizeof(int));
    t->host_ranks = malloc(n * sizeof(int));
    t->numa = malloc(n * sizeof(int));
    if (!t->host_of || !t->local_rank || !t->host_first || !t->host_ranks || !t->numa)
        return braid_err(BRAID_ERR_NOMEM, "topology: out of memory for %d ranks", nranks);
    /* hosts in the order of their lowest rank: a rank takes the host of the first lower
     * rank with its id (quadratic, but once per communicator and only in host count) */
    for (int r = 0; r < nranks; r++) {
        int h = -1;
        for (int q = 0; q < r && h < 0; q++)
            if (host_ids[q] == host_ids[r])
                h = t->host_of[q];
        t->host_of[r] = h >= 0 ? h : t->nhosts++;
        t->local_rank[r] = t->host_first[t->host_of[r] + 1]++;   /* count, for now */
        t->numa[r] = numa != NULL ? numa[r] : -1;
    }
    for (int h = 0; h < t->nhosts; h++)
        t->host_first[h + 1] += t->host_first[h];
    for (int r = 0; r < nranks; r++)
        t->host_ranks[t->host_first[t->host_of[r]] + t->local_rank[r]] = r;
    return topo_summary(t);
}

braid_link_t braid_topo_link(const braid_topo_t *t, int a, int b)
{
    if (a == b)
        return BRAID_LINK_SELF;
    if (t->host_of[a] != t->host_of[b])
        return BRAID_LINK_NET;
    return t->numa[a] >= 0 && t->numa[a] == t->numa[b] ? BRAID_LINK_NUMA : BRAID_LINK_HOST;
}

int braid_topo_uniform(const braid_topo_t *t)
{
    int k = t->nhosts > 0 ? braid_topo_nlocal(t, 0) : 0;
    for (int h = 1; h < t->nhosts; h++)
        if (braid_topo_nlocal(t, h) != k)
            return 0;
    return k;
}

int braid_numa_self(void)
{
    unsigned cpu, node;
    return getcpu(&cpu, &node) == 0 ? (int)node : -1;
}

/* ---- this host's hardware ---------------------------------------------------------------- */

static braid_host_hw_t hw_cached;
static braid_status_t hw_status;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;
/* Kept for the process's life: destroying the last topology unloads hwloc's PCI plugin,
 * and with it what libpciaccess keeps, which LeakSanitizer then reports. Volatile: only
 * written, the store would otherwise be dropped. */
static hwloc_topology_t volatile hw_topo;

/* hwloc components that would start a GPU runtime or a display connection in the
 * application's process: braid finds GPUs by their PCI class instead. */
static const char *const hw_skip[] = { "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero" };

static hwloc_obj_t hw_pci_of(hwloc_obj_t o)
{
    while (o != NULL && o->type != HWLOC_OBJ_PCI_DEVICE)
        o = o->parent;
    return o;
}

static void hw_pci_str(hwloc_obj_t pci, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)pci->attr->pcidev.domain,
             (unsigned)pci->attr->pcidev.bus, (unsigned)pci->attr->pcidev.dev,
             (unsigned)pci->attr->pcidev.func);
}

static void hw_devices(hwloc_topology_t topo, braid_host_hw_t *hw)
{
    char bus[32];
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo, NULL); o != NULL;
         o = hwloc_get_next_osdev(topo, o)) {
        hwloc_obj_osdev_type_t ty = o->attr->osdev.type;
        if (ty != HWLOC_OBJ_OSDEV_NETWORK && ty != HWLOC_OBJ_OSDEV_OPENFABRICS)
            continue;
        hwloc_obj_t pci = hw_pci_of(o);
        if (hw->nnics < BRAID_HW_MAXDEV) {
            if (pci != NULL)
                hw_pci_str(pci, bus, sizeof(bus));
            snprintf(hw->nics[hw->nnics], sizeof(hw->nics[0]), "%s%s%s%s", o->name,
                     pci ? " (PCI " : "", pci ? bus : "", pci ? ")" : "");
        }
        hw->nnics++;
    }
    /* GPUs and accelerators by PCI class (display 0x03, processing accelerator 0x12), so
     * that they are listed without the vendors' runtimes */
    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o != NULL;
         o = hwloc_get_next_pcidev(topo, o)) {
        unsigned cls = o->attr->pcidev.class_id >> 8, vendor = o->attr->pcidev.vendor_id;
        if ((cls != 0x03 && cls != 0x12) || (vendor != 0x10de && vendor != 0x1002))
            continue;
        if (hw->ngpus < BRAID_HW_MAXDEV) {
            hw_pci_str(o, bus, sizeof(bus));
            snprintf(hw->gpus[hw->ngpus], sizeof(hw->gpus[0]), "PCI %s %s %04x", bus,
                     vendor == 0x10de ? "NVIDIA" : "AMD", o->attr->pcidev.device_id);
        }
        hw->ngpus++;
    }
}

static void hw_discover(void)
{
    braid_host_hw_t *hw = &hw_cached;
    hwloc_topology_t topo;
    unsigned v = hwloc_get_api_version();
    if (hwloc_topology_init(&topo) != 0) {
        hw_status = braid_err(BRAID_ERR_SYSTEM, "topology: hwloc_topology_init failed");
        return;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    for (size_t i = 0; i < sizeof(hw_skip) / sizeof(hw_skip[0]); i++)
        (void)hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                            hw_skip[i]);   /* absent ones are no error */
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        hw_status = braid_err(BRAID_ERR_SYSTEM, "topology: hwloc_topology_load failed");
        return;
    }
    snprintf(hw->source, sizeof(hw->source), "hwloc API %u.%u", v >> 16, (v >> 8) & 0xff);
    hw->npackages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    hw->ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hw->npus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hw->nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    hwloc_obj_t l2 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L2CACHE, 0);
    hw->l2 = l2 != NULL && l2->attr != NULL ? (size_t)l2->attr->cache.size : 0;
    hw_devices(topo, hw);
    hw_topo = topo;
    BRAID_INFO(BRAID_SUB_INIT, "topology (%s): %d packages, %d cores, %d PUs, %d NUMA nodes, "
               "%d NICs, %d GPUs", hw->source, hw->npackages, hw->ncores, hw->npus, hw->nnuma,
               hw->nnics, hw->ngpus);
}

braid_status_t braid_host_hw(braid_host_hw_t *hw)
{
    pthread_once(&hw_once, hw_discover);
    if (hw_status == BRAID_OK)
        *hw = hw_cached;
    return hw_status;
}
