#!/bin/bash
# Runs coll_check (every collective, every type and op, exact checks) as 2, 3, 4 and 8
# processes, as 4 ranks driven by one thread (-t 4) and as 3 threads with a rank each
# (-T 3). Processes are started by braidrun when it is built, else by coll_check -p.
# Then again with the single-copy algorithms (algorithms/twoshot.c) taken from every size
# (BRAID_SHM_CMA_MIN=0: the quick variant has no count large enough otherwise), between
# processes too (BRAID_SHM_CMA=1: process_vm_readv), and with threads without them
# (BRAID_SHM_CMA=0: threads of one process use them by default). Last with outputs
# written by non-temporal stores from every size (BRAID_STREAM_MIN=1; default 16 MiB). And
# with every message in 4 KiB slices (BRAID_SLICE_SIZE, the tuner's smallest), and in slices
# of 4100 bytes, which 8-byte types round down.
# Last the sections that run only when named (coll_api.c, coll_narrow.c: the rest of the
# API's success paths; fp16, bf16 and fp8 results checked byte for byte) on 2 and 4
# processes and both thread modes, one of them in 4 KiB slices, one with single copy from
# every size; and narrow again under NCCL_ALGO=allreduce:oneshot, which fixes the order in
# which 3+ ranks combine, so that every op is checked there too.
#
# Environment: BRAID_BUILD_DIR (set by make check; default: this script's build tree),
# BRAID_TEST_QUICK=1 for the quick variant (also chosen for --enable-sanitizers builds),
# COLL_CHECK_ARGS extra arguments for every run.
# Exit status as automake reads it: 0 pass, 1 fail, 77 skip, 99 hard error.

set -u

build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check=$build/tests/integration/coll_check
braidrun=$build/braidrun

if [ ! -x "$check" ]; then
    echo "run_coll.sh: $check is not built" >&2
    exit 99
fi
if [ ! -w /dev/shm ]; then
    echo "run_coll.sh: /dev/shm is not writable: shared-memory transport unavailable" >&2
    exit 77
fi

# A hang is a bug: make the library give up long before the watchdog (-w) does.
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60}
export BRAID_BOOTSTRAP_TIMEOUT=${BRAID_BOOTSTRAP_TIMEOUT:-30}

args=(-w 240)
if [ "${BRAID_TEST_QUICK:-0}" = 1 ] ||
   grep -q -- '--enable-sanitizers' "$build/config.status" 2>/dev/null; then
    args+=(-q)
    echo "run_coll.sh: quick (BRAID_TEST_QUICK=1 or a sanitizer build): coll_check -q leaves" \
         "out the large counts"
fi
# shellcheck disable=SC2206
args+=(${COLL_CHECK_ARGS:-})

status=0
run() {
    local what=$1
    shift
    local t0 rc ms
    t0=$(date +%s%N)
    "$@"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    printf 'run_coll.sh: %-26s rc=%d  %d.%03d s\n' "$what" "$rc" $((ms / 1000)) $((ms % 1000))
    if [ "$rc" = 99 ]; then
        status=99
    elif [ "$rc" != 0 ] && [ "$status" != 99 ]; then
        status=1
    fi
}

for n in 2 3 4 8; do
    if [ -x "$braidrun" ]; then
        run "$n processes (braidrun)" "$braidrun" -n "$n" -- "$check" "${args[@]}"
    else
        run "$n processes (fork)" "$check" -p "$n" "${args[@]}"
    fi
done
run "-t 4 (one thread)" "$check" -t 4 "${args[@]}"
run "-T 3 (thread per rank)" "$check" -T 3 "${args[@]}"

single=(env BRAID_SHM_CMA_MIN=0)
for n in 2 3 5; do
    if [ -x "$braidrun" ]; then
        run "$n processes, single copy" "${single[@]}" BRAID_SHM_CMA=1 "$braidrun" -n "$n" -- \
            "$check" "${args[@]}"
    else
        run "$n processes, single copy" "${single[@]}" BRAID_SHM_CMA=1 "$check" -p "$n" \
            "${args[@]}"
    fi
done
run "-t 4 single copy" "${single[@]}" "$check" -t 4 "${args[@]}"
run "-T 3 single copy" "${single[@]}" "$check" -T 3 "${args[@]}"
run "-T 3 no single copy" env BRAID_SHM_CMA=0 "$check" -T 3 "${args[@]}"

stream=(env BRAID_STREAM_MIN=1)
if [ -x "$braidrun" ]; then
    run "3 processes, streaming" "${stream[@]}" "$braidrun" -n 3 -- "$check" "${args[@]}"
else
    run "3 processes, streaming" "${stream[@]}" "$check" -p 3 "${args[@]}"
fi
run "-t 4 streaming" "${stream[@]}" "$check" -t 4 "${args[@]}"

if [ -x "$braidrun" ]; then
    run "3 processes, 4 KiB slices" env BRAID_SLICE_SIZE=4K "$braidrun" -n 3 -- "$check" \
        "${args[@]}"
else
    run "3 processes, 4 KiB slices" env BRAID_SLICE_SIZE=4K "$check" -p 3 "${args[@]}"
fi
run "-t 4, 4100-byte slices" env BRAID_SLICE_SIZE=4100 "$check" -t 4 "${args[@]}"

# procs NAME N ARGS...: N processes of coll_check, by braidrun when it is built
procs() {
    local what=$1 n=$2
    shift 2
    if [ -x "$braidrun" ]; then
        run "$what" "$@" "$braidrun" -n "$n" -- "$check" "${args[@]}" "${named[@]}"
    else
        run "$what" "$@" "$check" -p "$n" "${args[@]}" "${named[@]}"
    fi
}
named=(-o "api,debug,narrow")
procs "2 processes, api etc., 4K" 2 env BRAID_SLICE_SIZE=4K
procs "4 processes, api etc." 4
run "-t 3 api etc., single copy" "${single[@]}" "$check" -t 3 "${args[@]}" "${named[@]}"
run "-T 3 api etc." "$check" -T 3 "${args[@]}" "${named[@]}"
named=(-o narrow)
oneshot=(env NCCL_ALGO=allreduce:oneshot)
procs "3 procs, narrow, oneshot" 3 "${oneshot[@]}"
run "-T 4 narrow, oneshot" "${oneshot[@]}" "$check" -T 4 "${args[@]}" "${named[@]}"

exit $status
