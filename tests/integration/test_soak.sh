#!/bin/sh
# make check's soak run: scripts/soak.sh for 50 s of collectives (a minute of wall time),
# one rank of 4 killed on the way. BRAID_TEST_QUICK=1 (the sanitizer build) runs 20 s, the
# heap judged as the sanitizer's allocator counts it (tests/integration/soak.c).
# Exit status as automake reads it: 0 pass, 1 fail, 99 hard error.
src=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ "${BRAID_TEST_QUICK:-0}" = 1 ]; then
    echo "test_soak.sh: BRAID_TEST_QUICK=1: 20 s"
    exec "$src/scripts/soak.sh" 20s
fi
exec "$src/scripts/soak.sh" 50s
