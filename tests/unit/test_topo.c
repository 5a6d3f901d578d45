/*
 * The communicator layout (src/topo/topo.c) against a reference built independently, for
 * even and uneven hosts, interleaved host ids and 1 to 33 ranks; link classes with and
 * without NUMA nodes; and this host's hardware as hwloc sees it.
 */
#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "topo/topo.h"

/* Every property of the table for the given host ids, checked from first principles. */
static void check_layout(int n, const uint64_t *ids, const int *numa)
{
    braid_topo_t t;
    assert_int_equal(braid_topo_build(&t, n, ids, numa), BRAID_OK);
    assert_int_equal(t.nranks, n);
    int seen_hosts = 0;
    for (int r = 0; r < n; r++) {
        int first = r;      /* the lowest rank of r's host */
        for (int q = 0; q < r; q++)
            if (ids[q] == ids[r]) {
                first = q;
                break;
            }
        if (first == r)
            assert_int_equal(t.host_of[r], seen_hosts++);   /* hosts by lowest rank */
        else
            assert_int_equal(t.host_of[r], t.host_of[first]);
        int local = 0;
        for (int q = 0; q < r; q++)
            local += ids[q] == ids[r];
        assert_int_equal(t.local_rank[r], local);
        int h = t.host_of[r];
        assert_int_equal(t.host_ranks[t.host_first[h] + local], r);
        for (int b = 0; b < n; b++) {
            braid_link_t want = r == b ? BRAID_LINK_SELF
                                : ids[r] != ids[b] ? BRAID_LINK_NET
                                : numa && numa[r] >= 0 && numa[r] == numa[b] ? BRAID_LINK_NUMA
                                : BRAID_LINK_HOST;
            assert_int_equal(braid_topo_link(&t, r, b), want);
        }
    }
    assert_int_equal(t.nhosts, seen_hosts);
    assert_int_equal(t.host_first[0], 0);
    assert_int_equal(t.host_first[t.nhosts], n);
    int even = 1;
    for (int h = 0; h < t.nhosts; h++)
        even &= braid_topo_nlocal(&t, h) == braid_topo_nlocal(&t, 0);
    assert_int_equal(braid_topo_uniform(&t), even ? braid_topo_nlocal(&t, 0) : 0);
    braid_topo_free(&t);
}

static void test_fixed_layouts(void **state)
{
    (void)state;
    const uint64_t one[] = { 7 };
    const uint64_t four[] = { 5, 5, 5, 5 };
    const uint64_t uneven[] = { 9, 4, 9, 9 };          /* 3 on one host, 1 on another */
    const uint64_t blocks[] = { 1, 1, 2, 2, 3, 3 };
    const int numa[] = { 0, 1, 0, -1 };
    braid_topo_t t;

    check_layout(1, one, NULL);
    check_layout(4, four, NULL);
    check_layout(4, four, numa);
    check_layout(4, uneven, NULL);
    check_layout(6, blocks, NULL);

    assert_int_equal(braid_topo_build(&t, 4, uneven, numa), BRAID_OK);
    assert_int_equal(t.nhosts, 2);
    assert_int_equal(braid_topo_nlocal(&t, 0), 3);
    assert_int_equal(braid_topo_nlocal(&t, 1), 1);
    assert_int_equal(t.host_of[1], 1);
    assert_int_equal(t.local_rank[3], 2);
    assert_int_equal(braid_topo_uniform(&t), 0);
    assert_int_equal(braid_topo_link(&t, 0, 2), BRAID_LINK_NUMA);   /* both on node 0 */
    assert_int_equal(braid_topo_link(&t, 0, 3), BRAID_LINK_HOST);   /* 3's node unknown */
    assert_int_equal(braid_topo_link(&t, 0, 1), BRAID_LINK_NET);
    braid_topo_free(&t);
    braid_topo_free(&t);    /* safe twice */
}

static void test_random_layouts(void **state)
{
    (void)state;
    uint64_t ids[33];
    int numa[33];
    srand(12345);
    for (int n = 1; n <= 33; n++) {
        for (int trial = 0; trial < 20; trial++) {
            int hosts = 1 + rand() % n;
            for (int r = 0; r < n; r++) {
                ids[r] = 1000 + (uint64_t)(rand() % hosts);
                numa[r] = rand() % 3 - 1;
            }
            check_layout(n, ids, trial % 2 ? numa : NULL);
        }
    }
}

static void test_link_names(void **state)
{
    (void)state;
    assert_string_equal(braid_link_name(BRAID_LINK_SELF), "self");
    assert_string_equal(braid_link_name(BRAID_LINK_NUMA), "numa");
    assert_string_equal(braid_link_name(BRAID_LINK_HOST), "host");
    assert_string_equal(braid_link_name(BRAID_LINK_NET), "net");
    assert_string_equal(braid_link_name(BRAID_LINK_NCLASSES), "?");
}

/*
 * NICs and GPUs as sysfs shows them, counted the way hwloc attaches them to PCI devices (what
 * braid_host_hw reports): network and InfiniBand devices whose sysfs path lies under a PCI
 * device (not behind USB), and PCI devices of class display (0x03) or processing accelerator
 * (0x12) from NVIDIA or AMD. -1 when sysfs cannot be read.
 */
static int sysfs_pci_children(const char *cls)
{
    char path[PATH_MAX], real[PATH_MAX];
    int n = 0;
    DIR *d = opendir(cls);
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", cls, e->d_name);
        if (realpath(path, real) != NULL && strncmp(real, "/sys/devices/pci", 16) == 0 &&
            strstr(real, "/usb") == NULL)
            n++;
    }
    closedir(d);
    return n;
}

static unsigned sysfs_hex(const char *dev, const char *file)
{
    char path[PATH_MAX];
    unsigned v = 0;
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", dev, file);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%x", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

static int sysfs_gpus(void)
{
    int n = 0;
    DIR *d = opendir("/sys/bus/pci/devices");
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        unsigned cls = sysfs_hex(e->d_name, "class") >> 16, vendor;
        vendor = sysfs_hex(e->d_name, "vendor");
        if (e->d_name[0] != '.' && (cls == 0x03 || cls == 0x12) &&
            (vendor == 0x10de || vendor == 0x1002))
            n++;
    }
    closedir(d);
    return n;
}

/* The listed names: as many as counted (up to BRAID_HW_MAXDEV), each a device that exists
 * (NICs: "NAME" or "NAME (PCI ...)", NAME in /sys/class/net or /sys/class/infiniband; GPUs:
 * "PCI dddd:bb:dd.f NVIDIA|AMD id"), the slots after them empty. */
static void check_devices(const braid_host_hw_t *hw)
{
    char name[BRAID_HW_NAMELEN], path[PATH_MAX], vendor[8];
    unsigned dom, bus, dev, fn, id;
    for (int i = 0; i < BRAID_HW_MAXDEV; i++) {
        int listed = i < hw->nnics;
        assert_int_equal(hw->nics[i][0] != '\0', listed);
        if (!listed)
            continue;
        assert_int_equal(sscanf(hw->nics[i], "%47s", name), 1);
        snprintf(path, sizeof(path), "/sys/class/net/%s", name);
        if (access(path, F_OK) != 0)
            snprintf(path, sizeof(path), "/sys/class/infiniband/%s", name);
        if (access(path, F_OK) != 0)
            fail_msg("NIC %d \"%s\" names no network or InfiniBand device", i, hw->nics[i]);
    }
    for (int i = 0; i < BRAID_HW_MAXDEV; i++) {
        int listed = i < hw->ngpus;
        assert_int_equal(hw->gpus[i][0] != '\0', listed);
        if (listed && (sscanf(hw->gpus[i], "PCI %x:%x:%x.%x %7s %x", &dom, &bus, &dev, &fn,
                              vendor, &id) != 6 ||
                       (strcmp(vendor, "NVIDIA") != 0 && strcmp(vendor, "AMD") != 0)))
            fail_msg("GPU %d is listed as \"%s\", not \"PCI dddd:bb:dd.f VENDOR id\"", i,
                     hw->gpus[i]);
    }
}

static void test_host_hw(void **state)
{
    (void)state;
    braid_host_hw_t a, b;
    assert_int_equal(braid_host_hw(&a), BRAID_OK);
    assert_true(a.npackages >= 1);
    assert_true(a.ncores >= a.npackages);
    assert_true(a.npus >= a.ncores);
    assert_true(a.nnuma >= 1);
    assert_non_null(strstr(a.source, "hwloc"));
    check_devices(&a);
    int nics = sysfs_pci_children("/sys/class/net");
    int ib = sysfs_pci_children("/sys/class/infiniband"), gpus = sysfs_gpus();
    if (nics >= 0)
        assert_int_equal(a.nnics, nics + (ib > 0 ? ib : 0));
    else
        printf("test_topo: no /sys/class/net: the NIC count is not compared with sysfs\n");
    if (gpus >= 0)
        assert_int_equal(a.ngpus, gpus);
    else
        printf("test_topo: no /sys/bus/pci: the GPU count is not compared with sysfs\n");
    /* Discovered once: a second call copies the first one's answer, even where hwloc would
     * now see another machine (a synthetic one of 3 packages). */
    setenv("HWLOC_COMPONENTS", "synthetic", 1);
    setenv("HWLOC_SYNTHETIC", "pack:3 core:2 pu:1", 1);
    assert_int_equal(braid_host_hw(&b), BRAID_OK);
    unsetenv("HWLOC_COMPONENTS");
    unsetenv("HWLOC_SYNTHETIC");
    assert_int_equal(b.npackages, a.npackages);
    assert_memory_equal(&a, &b, sizeof(a));
    int node = braid_numa_self();
    assert_true(node >= -1 && node < a.nnuma);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_layouts),
        cmocka_unit_test(test_random_layouts),
        cmocka_unit_test(test_link_names),
        cmocka_unit_test(test_host_hw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
