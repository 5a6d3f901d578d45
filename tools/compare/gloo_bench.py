#!/usr/bin/env python3
"""gloo_bench: the comparison bench's Gloo side, through torch.distributed (backend gloo).

    gloo_bench.py -c allreduce -n 2 -b 8 -e 64M -f 4      sweep, JSON lines on stdout
    gloo_bench.py -c allreduce -n 2 --serve               sizes read from stdin

Starts N worker processes of itself (as torchrun would: one thread of intra-op work each,
OMP_NUM_THREADS=1), which meet through init_method tcp://127.0.0.1:PORT on the loopback
device (GLOO_SOCKET_IFNAME=lo unless set).

Sizes, timing, check and output follow mpi_bench.c (and nccl-tests): per size, `warmup`
calls, barrier, `iters` timed calls; time = average per call, max over ranks; then the
inputs are filled again with a new seed, the outputs poisoned (NaN), one more call made and
every received element compared exactly with the expected one. Inputs are small integers
(-4..4, the same recipe as mpi_bench.c), so float sums are exact in any order.

torch.distributed's all_reduce and reduce only work in place; they are timed in place
(the library's own way, which saves the copy an out-of-place call makes). torch 1.13's
gloo backend has no reduce-scatter: that collective answers {"error": "unsupported"}.

--serve (used by braid-compare to interleave libraries): this launcher reads lines
"SIZE [ITERS [WARMUP]]" on stdin and hands each to every worker (they block reading it,
so an idle bench takes no CPU); rank 0 answers each with one JSON line. "quit" or end of
input ends. Exit status: 0, 1 if a worker failed, 2 for bad usage.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

COLLS = ("allreduce", "allgather", "reducescatter", "bcast", "reduce", "alltoall",
         "gather", "scatter", "sendrecv")
ROOTED = ("bcast", "reduce", "gather", "scatter")
CHUNK = 1 << 22   # elements per step when filling and checking (bounds the temporaries)


def parse_size(text):
    """A byte count with an optional K/M/G suffix (powers of 1024)."""
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
    digits = text[:-1] if mult > 1 else text
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"bad size '{text}': want digits and K, M or G")
    return int(digits) * mult


def coll_sizes(coll, nbytes, n):
    """(send, recv, param, bytes) element counts as nccl-tests' getCollByteCount."""
    count = nbytes // 4
    base = count // n // 4 * 4   # per-rank blocks rounded down to 16 bytes, as nccl-tests
    send, recv, param = count, count, count
    if coll in ("allgather", "gather"):
        send, recv, param = base, base * n, base
    elif coll in ("reducescatter", "scatter"):
        send, recv, param = base * n, base, base
    elif coll == "alltoall":
        send, recv, param = base * n, base * n, base
    return send, recv, param, max(send, recv) * 4


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in ("allgather", "reducescatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


# ---- worker side (imports torch) ------------------------------------------------------

class Worker:
    """One rank: runs sizes of one collective and, on rank 0, prints their JSON lines."""

    def __init__(self, args, rank):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        self.a, self.rank, self.n = args, rank, args.nranks
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                                rank=rank, world_size=self.n)
        self.seed = 1
        self.version = f"torch {torch.__version__} gloo"

    # -- data: element idx of rank's input; rank and idx may be int64 tensors --
    def values(self, seed, rank, idx):
        h = (idx * 0x9E3779B1 + (rank + 1) * 0x85EBCA77 + seed * 0xC2B2AE3D) & 0xFFFFFFFF
        h = h ^ (h >> 15)
        h = (h * 0x2C1B3C6D) & 0xFFFFFFFF
        h = h ^ (h >> 12)
        return (h % 9 - 4).to(self.torch.float32)

    def fill(self, buf, seed, rank):
        torch = self.torch
        for off in range(0, buf.numel(), CHUNK):
            k = min(CHUNK, buf.numel() - off)
            buf[off:off + k] = self.values(seed, rank, torch.arange(off, off + k))

    def expected(self, seed, i, c):
        """Expected receive elements at indices i (int64 tensor); None: nothing to check."""
        coll, r, n, root = self.a.coll, self.rank, self.n, self.a.root
        blk, off = (i // c, i % c) if c > 0 else (i * 0, i)
        if coll in ("allreduce", "reduce"):
            if coll == "reduce" and r != root:
                return None
            return sum(self.values(seed, q, i) for q in range(n))
        if coll == "bcast":
            return None if r == root else self.values(seed, root, i)
        if coll in ("allgather", "gather"):
            return None if coll == "gather" and r != root else self.values(seed, blk, off)
        if coll == "scatter":
            return self.values(seed, root, r * c + i)
        if coll == "alltoall":
            return self.values(seed, blk, r * c + off)
        return self.values(seed, (r + n - 1) % n, i)   # sendrecv

    def count_wrong(self, recv, seed, c):
        torch, wrong = self.torch, 0
        for off in range(0, recv.numel(), CHUNK):
            k = min(CHUNK, recv.numel() - off)
            want = self.expected(seed, torch.arange(off, off + k), c)
            if want is not None:
                wrong += int((recv[off:off + k] != want).sum())
        return wrong

    # -- one call --
    def call(self, send, recv, c):
        dist, coll, r, n, root = self.dist, self.a.coll, self.rank, self.n, self.a.root
        if coll in ("allreduce", "reduce"):   # in place on recv (see the module comment)
            if coll == "allreduce":
                dist.all_reduce(recv)
            else:
                dist.reduce(recv, dst=root)
        elif coll == "bcast":
            dist.broadcast(send if r == root else recv, src=root)
        elif coll == "allgather":
            dist.all_gather([recv[j * c:(j + 1) * c] for j in range(n)], send)
        elif coll == "gather":
            views = [recv[j * c:(j + 1) * c] for j in range(n)] if r == root else None
            dist.gather(send, gather_list=views, dst=root)
        elif coll == "scatter":
            views = [send[j * c:(j + 1) * c] for j in range(n)] if r == root else None
            dist.scatter(recv, scatter_list=views, src=root)
        elif coll == "alltoall":
            dist.all_to_all_single(recv, send)
        else:
            reqs = [dist.isend(send, (r + 1) % n), dist.irecv(recv, (r + n - 1) % n)]
            for q in reqs:
                q.wait()

    def prepare(self, send, recv, seed):
        """Inputs for a call: in-place collectives take theirs in recv."""
        self.fill(send, seed, self.rank)
        recv.fill_(float("nan"))
        if self.a.coll in ("allreduce", "reduce"):
            self.fill(recv, seed, self.rank)

    def time_calls(self, send, recv, c, iters, warmup):
        for _ in range(warmup):
            self.call(send, recv, c)
        self.dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self.call(send, recv, c)
        return (time.perf_counter() - t0) * 1e6 / iters

    def run_size(self, nbytes, iters, warmup):
        torch, dist = self.torch, self.dist
        seed, self.seed = self.seed, self.seed + 2
        ns, nr, c, size = coll_sizes(self.a.coll, nbytes, self.n)
        base = {"library": "gloo", "version": self.version, "collective": self.a.coll,
                "nranks": self.n, "asked": nbytes, "size": size, "count": c}
        if self.a.coll == "reducescatter":
            return dict(base, error="unsupported",
                        note="torch %s's gloo backend has no reduce_scatter" % torch.__version__)
        if ns == 0 or nr == 0:   # gloo dies of SIGFPE on an empty all-gather
            return dict(base, error="empty", note="no element to move at this size")
        send, recv = torch.empty(ns), torch.empty(nr)
        self.prepare(send, recv, seed)
        usec = self.time_calls(send, recv, c, iters, warmup)
        self.prepare(send, recv, seed + 1)
        self.call(send, recv, c)
        wrong = self.count_wrong(recv, seed + 1, c)
        del send, recv
        stats = torch.tensor([usec, 0.0], dtype=torch.float64)
        total = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        dist.all_reduce(total)
        usec = float(stats[0])
        algbw = size / (usec * 1e-6) / 1e9 if usec > 0 else 0.0
        return dict(base, type="float", redop="sum",
                    root=self.a.root if self.a.coll in ROOTED else -1, iters=iters,
                    time_us=round(usec, 3), algbw=round(algbw, 6),
                    busbw=round(algbw * bus_factor(self.a.coll, self.n), 6),
                    wrong=int(total))

    def emit(self, nbytes, iters, warmup):
        row = self.run_size(nbytes, iters, warmup)
        if self.rank == 0:
            print(json.dumps(row, separators=(",", ":")), flush=True)

    def sweep(self):
        a, b = self.a, self.a.minbytes
        while b <= a.maxbytes:
            self.emit(b, a.iters, a.warmup)
            nxt = b * a.stepfactor if a.stepfactor > 1 else b + a.stepbytes
            if nxt <= b:
                break
            b = nxt

    def serve(self):
        for line in sys.stdin:
            cmd = parse_command(line, self.a)
            if cmd is None:
                break
            if cmd:
                self.emit(*cmd)


def parse_command(line, a):
    """(bytes, iters, warmup) from "SIZE [ITERS [WARMUP]]"; None for quit, () for garbage."""
    f = line.split()[:3]
    if f[:1] == ["quit"]:
        return None
    if not f or not all(x.isdigit() for x in f):
        print(f"gloo_bench: ignoring command '{line.strip()}'; want 'SIZE [ITERS [WARMUP]]'",
              file=sys.stderr)
        return ()
    v = [int(x) for x in f] + [a.iters, a.warmup][len(f) - 1:]
    return (v[0], max(1, v[1]), v[2])


def worker_main(args):
    w = Worker(args, args.worker)
    try:
        w.serve() if args.serve else w.sweep()
    finally:
        w.dist.destroy_process_group()
    return 0


# ---- launcher side (no torch) ---------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, argv):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    port = str(args.port or free_port())
    procs = []
    for r in range(args.nranks):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(r), "--port", port]
        procs.append(subprocess.Popen(cmd + argv, env=env, text=True,
                                      stdin=subprocess.PIPE if args.serve else None,
                                      stdout=None if r == 0 else subprocess.DEVNULL))
    if args.serve:
        threading.Thread(target=forward, args=(procs,), daemon=True).start()
    return reap(procs)


def reap(procs):
    """Wait for every worker; when one fails, stop the others (they would wait forever)."""
    status = 0
    while any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs):
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            status = 1
        time.sleep(0.1)
    return 1 if status or any(p.returncode != 0 for p in procs) else 0


def forward(procs):
    """Hand every stdin line to every worker until quit or end of input."""
    for line in sys.stdin:
        try:
            for p in procs:
                p.stdin.write(line)
                p.stdin.flush()
        except BrokenPipeError:
            break
        if line.split()[:1] == ["quit"]:
            break
    for p in procs:
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="gloo_bench.py", description="torch.distributed gloo bench, JSON lines out")
    p.add_argument("-c", "--coll", required=True, choices=COLLS)
    p.add_argument("-n", "--nranks", type=int, default=2, help="ranks (default 2)")
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=2)
    p.add_argument("-i", "--stepbytes", type=parse_size, default=1 << 20)
    p.add_argument("--iters", type=int, default=20, help="timed calls per size (default 20)")
    p.add_argument("-w", "--warmup", type=int, default=5, help="untimed calls (default 5)")
    p.add_argument("-r", "--root", type=int, default=0)
    p.add_argument("-S", "--serve", action="store_true",
                   help="read 'SIZE [ITERS [WARMUP]]' lines on stdin")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (default: a free one)")
    p.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.nranks < 1 or not 0 <= a.root < a.nranks or a.iters < 1 or a.warmup < 0 \
            or a.stepfactor < 1 or a.minbytes > a.maxbytes \
            or (a.coll == "sendrecv" and a.nranks < 2):
        p.error("bad -n, -r, --iters, -w, -f or size range (sendrecv needs 2 ranks)")
    return a


def main(argv):
    args = parse_args(argv)
    if args.worker >= 0:
        return worker_main(args)
    return launch(args, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
