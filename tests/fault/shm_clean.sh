#!/bin/bash
# Run last: the test suite (kill_rank included) must leave no braid segment in /dev/shm.
#
# A segment is named braid-<nonce>-<pid of the job's rank 0, hex>-<rank>. One whose rank-0
# process still runs may belong to a job in progress (another test, another user): it is
# listed but not counted. One whose rank 0 is gone was left behind: the test fails, and
# removes it so that the next run starts clean.
# BRAID_SHM_DIR names another directory, as for the library.
# Exit status as automake reads it: 0 pass, 1 fail, 77 skip.

set -u
dir=${BRAID_SHM_DIR:-/dev/shm}
if [ ! -d "$dir" ]; then
    echo "shm_clean.sh: $dir does not exist" >&2
    exit 77
fi

leaked=0
live=0
shopt -s nullglob
for f in "$dir"/braid-*; do
    name=${f##*/}
    rest=${name#braid-*-}        # <pid hex>-<rank>
    pidhex=${rest%%-*}
    if [[ ! $pidhex =~ ^[0-9a-fA-F]+$ ]]; then
        echo "shm_clean.sh: unexpected name $f (counted as left behind)" >&2
        leaked=$((leaked + 1))
        continue
    fi
    pid=$((16#$pidhex))
    if kill -0 "$pid" 2>/dev/null; then
        echo "shm_clean.sh: $f belongs to running pid $pid: not counted"
        live=$((live + 1))
    else
        echo "shm_clean.sh: $f was left behind (pid $pid is gone): removing it" >&2
        rm -f -- "$f"
        leaked=$((leaked + 1))
    fi
done

echo "shm_clean.sh: $leaked segment(s) left behind, $live of running jobs"
[ "$leaked" = 0 ]
