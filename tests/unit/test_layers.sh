#!/bin/bash
# The include graph keeps its layers (scripts/check_layers.py): no include from a lower layer
# to a higher one, no cycle between folders. Then the check itself must fail on a planted
# upward include, so that a broken checker cannot pass.
src=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v python3 >/dev/null || { echo "test_layers.sh: needs python3: skipped"; exit 77; }
python3 "$src/scripts/check_layers.py" "$src" || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_layers.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
for d in src algorithms transports kernels; do cp -r "$src/$d" "$tmp/"; done
cp "$src/scripts/check_layers.py" "$tmp/"
echo '#include "core/comm.h"' >>"$tmp/src/base/time.c"
out=$(python3 "$tmp/check_layers.py" "$tmp")
if [ $? = 0 ] || [[ "$out" != *"src/base/time.c"*"includes src/core/comm.h"* ]]; then
    echo "FAIL: check_layers.py let src/base include core/comm.h: $out"
    exit 1
fi
echo "ok: a planted upward include fails: $(grep -m1 'src/base/time.c' <<<"$out")"
sed -i '$d' "$tmp/src/base/time.c"
echo '#include "transports/shm/shm.h"' >>"$tmp/transports/net/net.c"
echo '#include "transports/net/net.h"' >>"$tmp/transports/shm/shm.c"
out=$(python3 "$tmp/check_layers.py" "$tmp")
if [ $? = 0 ] || [[ "$out" != *"cycle between folders: transports/"* ]]; then
    echo "FAIL: check_layers.py let transports/net and transports/shm include each other: $out"
    exit 1
fi
echo "ok: a planted cycle fails: $(grep -m1 'cycle' <<<"$out")"
echo "test_layers.sh: 3 checks passed"
