#!/usr/bin/env python3
"""Checks the library's include graph against its layers.

Each source folder belongs to a layer; a file may include headers of its own layer or of
a lower one, never of a higher one:

    api -> core -> algorithms -> exec -> transports / kernels / device -> topo -> base

(exec, the executor and the schedule format, sits below the algorithms that build and
simulate schedules and above the transports and kernels that it drives). A seam's folder
and its subfolders are one unit for cycles: transports/transport.h is the interface its
implementations (transports/shm, transports/net) include, and transports/transports.c the
table that names them. Folders of one layer may include each other, but no chain of
includes between folders may come back to where it started. Prints every violation with
the file and line, and exits 1 if there is one.

usage: check_layers.py [SRCDIR]
"""
import os
import re
import sys

# folder prefix -> layer (higher includes lower); the longest matching prefix wins
LAYERS = {
    "src/api": 6,
    "src/core": 5,
    "algorithms": 4,
    "src/exec": 3.5,
    "transports": 3,
    "kernels": 3,
    "src/device": 3,
    "emu": 3,
    "src/topo": 2,
    "src/base": 1,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    best = None
    for prefix, rank in LAYERS.items():
        if path == prefix or path.startswith(prefix + "/"):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    return best


def resolve(root, src, name):
    """The repository path an #include "name" in file src refers to, or None (public or
    generated headers: include/, config.h)."""
    for base in (os.path.dirname(src), "", "src"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def sources(root):
    for top in {p.split("/")[0] for p in LAYERS}:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h", ".hip")):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def nested(a, b):
    """Is one of the folders a and b inside the other?"""
    return a.startswith(b + "/") or b.startswith(a + "/")


def find_cycle(graph):
    """One cycle in a graph of folders, as a list, or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = 0
    edges = {}  # folder -> {folder: "file:line"}
    nfiles = nincludes = 0
    for src in sorted(sources(root)):
        mine = layer_of(src)
        if mine is None:
            continue
        nfiles += 1
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, src, m.group(1))
                if target is None:
                    continue
                theirs = layer_of(target)
                if theirs is None:
                    continue
                nincludes += 1
                where = "%s:%d" % (src, lineno)
                if theirs[1] > mine[1]:
                    print("%s: %s (layer %s) includes %s (layer %s, higher)"
                          % (where, src, mine[0], target, theirs[0]))
                    bad += 1
                a, b = os.path.dirname(src), os.path.dirname(target)
                if a != b and not nested(a, b):
                    edges.setdefault(a, {}).setdefault(b, where)
    graph = {a: set(bs) for a, bs in edges.items()}
    while True:
        cycle = find_cycle(graph)
        if not cycle:
            break
        print("cycle between folders: %s" % " -> ".join(
            "%s (%s)" % (cycle[i], edges[cycle[i]][cycle[i + 1]])
            for i in range(len(cycle) - 1)) + " -> " + cycle[-1])
        bad += 1
        graph[cycle[-2]].discard(cycle[-1])  # report each cycle once, then look again
    print("check_layers: %d files, %d includes between library files, %d violations"
          % (nfiles, nincludes, bad))
    return 1 if bad or nfiles == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
