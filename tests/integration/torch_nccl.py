#!/usr/bin/env python3
"""PyTorch's NCCL backend (torch.distributed, backend "nccl") on braid, on a real GPU.

    LD_PRELOAD=$prefix/lib/braid/libnccl.so.2 torchrun --nproc_per_node=N torch_nccl.py

scripts/gpu_check.sh runs it. PyTorch's pip wheels find their own NCCL through an RPATH,
which LD_LIBRARY_PATH does not override: LD_PRELOAD puts braid first. Ranks share the GPUs
round-robin (braid, unlike NCCL, lets ranks share one). Every rank checks that the NCCL
calls resolve to braid (libbraid.so.0), not to another NCCL; then each collective of
torch.distributed on several sizes and types with values whose results are exact (avg:
for N a power of two), a batched send/receive ring, a DDP step whose gradients must equal
the mean of every rank's gradients computed alone, and (unless TORCH_NCCL_BENCH=0) times a
256 MiB float all-reduce. Prints "torch_nccl: rank R of N: P passed, F failed" and exits 1
on a failure.
"""
import copy
import ctypes
import os
import sys
import time

import torch
import torch.distributed as dist

failures = []
passed = 0


def check(what, ok, detail=""):
    global passed
    if ok:
        passed += 1
    else:
        failures.append(what)
        print(f"torch_nccl: rank {dist.get_rank()}: FAIL: {what} {detail}", flush=True)


def same(what, got, want):
    got = got.to(torch.float64).cpu()
    want = want.to(torch.float64).cpu()
    bad = (got != want).nonzero()
    detail = ""
    if bad.numel():
        i = bad[0].tolist()
        detail = f"(at {i}: {got[tuple(i)].item()} != {want[tuple(i)].item()})"
    check(what, bad.numel() == 0, detail)


def nccl_provider():
    """The file whose ncclAllReduce the process's global lookup finds, as PyTorch's does."""
    addr = ctypes.cast(ctypes.CDLL(None).ncclAllReduce, ctypes.c_void_p).value
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= addr < hi and len(fields) >= 6:
                return fields[5]
    return "?"


def section(name):
    if dist.get_rank() == 0:
        print(f"torch_nccl: {name}", flush=True)


def collectives(rank, world, dev):
    section("all_reduce")
    ops = {"sum": (dist.ReduceOp.SUM, world * (world + 1) / 2),
           "max": (dist.ReduceOp.MAX, world), "min": (dist.ReduceOp.MIN, 1),
           "avg": (dist.ReduceOp.AVG, (world + 1) / 2)}
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.float64):
        for n in (1, 1000, (1 << 20) + 3):
            for name, (op, want) in ops.items():
                if name == "avg" and not dtype.is_floating_point:
                    continue
                x = torch.full((n,), rank + 1, dtype=dtype, device=dev)
                dist.all_reduce(x, op=op)
                same(f"all_reduce {name} {dtype} n={n}", x, torch.full((n,), want))
    section("premul_sum, broadcast, reduce")
    n = 4099
    x = torch.full((n,), rank + 1.0, device=dev)
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
    same("all_reduce premul_sum 0.5", x, torch.full((n,), world * (world + 1) / 4))
    for root in range(world):
        x = torch.arange(n, dtype=torch.float32, device=dev) + (root * 10 if rank == root else -1)
        dist.broadcast(x, src=root)
        same(f"broadcast root {root}", x, torch.arange(n, dtype=torch.float32) + root * 10)
        x = torch.full((n,), rank + 1.0, device=dev)
        dist.reduce(x, dst=root)
        if rank == root:
            same(f"reduce root {root}", x, torch.full((n,), world * (world + 1) / 2))
    section("all_gather, reduce_scatter, all_to_all")
    for n in (5, 1 << 18):
        mine = torch.arange(n, dtype=torch.float32, device=dev) + rank * n
        out = torch.empty(world * n, device=dev)
        dist.all_gather_into_tensor(out, mine)
        same(f"all_gather_into_tensor n={n}", out, torch.arange(world * n, dtype=torch.float32))
        parts = [torch.empty(n, device=dev) for _ in range(world)]
        dist.all_gather(parts, mine)
        same(f"all_gather (list) n={n}", torch.cat(parts),
             torch.arange(world * n, dtype=torch.float32))
        full = torch.arange(world * n, dtype=torch.float32, device=dev) * (rank + 1)
        shard = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(shard, full)
        want = (torch.arange(n, dtype=torch.float32) + rank * n) * (world * (world + 1) / 2)
        same(f"reduce_scatter_tensor n={n}", shard, want)
        src = torch.arange(world * n, dtype=torch.float32, device=dev) + rank * 1000000
        dst = torch.empty(world * n, device=dev)
        dist.all_to_all_single(dst, src)
        want = torch.cat([torch.arange(n, dtype=torch.float32) + r * 1000000 + rank * n
                          for r in range(world)])
        same(f"all_to_all_single n={n}", dst, want)
    section("batch_isend_irecv, barrier")
    n = 12345
    send = torch.full((n,), rank * 1.0, device=dev)
    recv = torch.empty(n, device=dev)
    ring = [dist.P2POp(dist.isend, send, (rank + 1) % world),
            dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    for req in dist.batch_isend_irecv(ring):
        req.wait()
    same("batch_isend_irecv ring", recv, torch.full((n,), (rank - 1) % world * 1.0))
    dist.barrier()
    check("barrier", True)


def ddp_step(rank, world, dev):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8)).to(dev)
    plain = copy.deepcopy(model)    # the same weights, without DDP
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index],
                                                    bucket_cap_mb=1)
    def batch(r):
        g = torch.Generator().manual_seed(100 + r)
        return torch.randn(32, 64, generator=g).to(dev), torch.randn(32, 8, generator=g).to(dev)
    x, y = batch(rank)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    # the same gradients without DDP: every rank's batch through the copy, then the mean
    for r in range(world):
        x, y = batch(r)
        torch.nn.functional.mse_loss(plain(x), y).backward()
    worst = 0.0
    for p, q in zip(ddp.module.parameters(), plain.parameters()):
        want = q.grad / world
        worst = max(worst, ((p.grad - want).abs().max() / want.abs().max()).item())
    check("DDP gradients equal the mean of every rank's", worst < 1e-5, f"(relative {worst:.2e})")


def bandwidth(rank, world, dev):
    nbytes = 256 << 20
    x = torch.ones(nbytes // 4, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    iters = 20
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / iters
    if rank == 0:
        busbw = 2 * (world - 1) / world * nbytes / dt / 1e9
        print(f"torch_nccl: all_reduce 256 MiB float, {world} ranks: {dt * 1e3:.2f} ms, "
              f"busbw {busbw:.1f} GB/s", flush=True)


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl")
    x = torch.ones(1, device=dev)
    dist.all_reduce(x)          # the communicator is made at the first call
    lib = nccl_provider()
    if rank == 0:
        print(f"torch_nccl: torch {torch.__version__}, NCCL version {torch.cuda.nccl.version()}, "
              f"ncclAllReduce from {lib}", flush=True)
    check("ncclAllReduce is braid's", "libbraid.so" in lib, lib)
    check("first all_reduce", x.item() == world)
    collectives(rank, world, dev)
    section("a DDP step")
    ddp_step(rank, world, dev)
    if os.environ.get("TORCH_NCCL_BENCH", "1") != "0":
        section("256 MiB all-reduce, timed")
        bandwidth(rank, world, dev)
    print(f"torch_nccl: rank {rank} of {world}: {passed} passed, {len(failures)} failed",
          flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
