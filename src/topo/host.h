/*
 * Host identity: which ranks share a machine (and so may use shared memory and GPU IPC).
 *
 * The id is a 64-bit hash of the hostname and the kernel's boot id, so two containers of one
 * machine with different hostnames count as different hosts, and a rebooted machine gets a
 * new id. NCCL_HOSTID (BRAID_HOSTID) replaces both: tests set it, with network namespaces, to
 * make one machine act as several hosts.
 */
#ifndef BRAID_TOPO_HOST_H
#define BRAID_TOPO_HOST_H

#include <stddef.h>
#include <stdint.h>

/* This process's host id (NCCL_HOSTID hashed when set; re-read on each call). Never 0. */
uint64_t braid_host_id(void);

/* The kernel's boot id hashed, whatever NCCL_HOSTID says: processes with equal ids share
 * one kernel and so its cores (the hosts of network-namespace tests, containers). Never 0. */
uint64_t braid_machine_id(void);

/* The full hostname (gethostname), "unknown" if that fails. Never NULL; do not free. */
const char *braid_host_name(void);

/* FNV-1a 64 of `len` bytes, continuing from `hash` (start with BRAID_FNV1A_INIT). */
#define BRAID_FNV1A_INIT 0xcbf29ce484222325ull
uint64_t braid_host_fnv1a(uint64_t hash, const void *data, size_t len);

#endif
