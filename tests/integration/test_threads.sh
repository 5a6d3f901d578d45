#!/bin/bash
# The runs of coll_check in which ranks are threads of one process, for the ThreadSanitizer
# build (scripts/test.sh runs it there with test_device.sh, test_plan.sh and abort_thread;
# run_coll.sh runs the same modes, and more, in the other builds): 3 threads with a rank
# each on every section but api, debug and narrow; again with peers' buffers read in place
# from every size (BRAID_SHM_CMA_MIN=0), and with every message through the FIFOs
# (BRAID_SHM_CMA=0); 4 ranks driven by one thread. coll_check -q always: the large counts
# only repeat the same code, 5-15 times slower under ThreadSanitizer.
#
# Environment: BRAID_BUILD_DIR (set by make check; default: this script's build tree).
# Exit status as automake reads it: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
build=${BRAID_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check=$build/tests/integration/coll_check
[ -x "$check" ] || { echo "test_threads.sh: $check is not built" >&2; exit 99; }
if [ ! -w /dev/shm ]; then
    echo "test_threads.sh: /dev/shm is not writable: shared-memory transport unavailable" >&2
    exit 77
fi
# A hang is a bug: the library gives up long before the watchdog (-w) does.
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-60} BRAID_BOOTSTRAP_TIMEOUT=${BRAID_BOOTSTRAP_TIMEOUT:-60}
args=(-q -w 240)
status=0
run() {   # description, then the command
    local what=$1 t0=$SECONDS rc
    shift
    "$@"
    rc=$?
    printf 'test_threads.sh: %-32s rc=%d  %d s\n' "$what" "$rc" $((SECONDS - t0))
    if [ "$rc" = 99 ]; then
        status=99
    elif [ "$rc" != 0 ] && [ "$status" != 99 ]; then
        status=1
    fi
}
run "-T 3" "$check" -T 3 "${args[@]}"
run "-T 3 in place from every size" env BRAID_SHM_CMA_MIN=0 "$check" -T 3 "${args[@]}" \
    -o reduce,move,random,v
run "-T 3 through the FIFOs" env BRAID_SHM_CMA=0 "$check" -T 3 "${args[@]}" -o reduce,move
run "-t 4 (one thread)" "$check" -t 4 "${args[@]}" -o reduce,group,nonblocking
exit $status
