#!/bin/sh
# Build braid and run a 4-rank all-reduce bandwidth test on this host (4 processes started
# by braidrun, host memory, 8 B to 128 MiB: -f 4 multiplies the size by 4 each row).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/deps.sh"
"$src/scripts/build.sh" "$src/build"
cd "$src/build"
exec ./braidrun -n 4 ./all_reduce_perf -b 8 -e 128M -f 4 -n 20 -w 5
