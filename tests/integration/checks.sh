# The check helpers of the integration test scripts (test_tools.sh, test_compare.sh),
# sourced after they set T, the wall-clock limit put in front of every command run:
#
#   $TMP                        a scratch directory, removed on exit
#   run NAME WANT_STATUS CMD... CMD's stdout and stderr in $TMP/out and $TMP/err; a failed
#                               check (with both shown) unless it exits WANT_STATUS
#   pass MSG, fail MSG          count a check
#   skip MSG                    a part this machine truly lacks (root, a CPU, a library):
#                               said, counted, and the test ends as automake's SKIP (77)
#                               unless a check failed
#   expect_in NAME FILE PATTERN pass if a line of FILE matches the extended regex
#   build_cc ARGS...            compile with the compiler the build used ($BRAID_CC, set by
#                               make check; else $CC, cc or gcc) under $T; output in $TMP/err
#   checks_end                  say how many checks passed and failed, and what was skipped;
#                               exit 1 if one failed or none passed, 77 if a part was
#                               skipped, else 0

TMP=$(mktemp -d "${TMPDIR:-/tmp}/${0##*/}.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILS=0 PASSES=0 SKIPS=0 SKIPPED=

fail() {
    echo "FAIL: $1"
    for f in "$TMP/out" "$TMP/err"; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):"; tail -n 30 "$f"; }
    done
    FAILS=$((FAILS + 1))
}

pass() {
    echo "ok: $1"
    PASSES=$((PASSES + 1))
}

skip() {
    echo "skip: $1"
    SKIPS=$((SKIPS + 1))
    SKIPPED="$SKIPPED
  - $1"
}

build_cc() {
    # shellcheck disable=SC2086   # BRAID_CC may carry flags ("gcc -m32")
    set -- ${BRAID_CC:-${CC:-$(command -v cc || command -v gcc || echo cc)}} "$@"
    $T "$@" >"$TMP/err" 2>&1
}

run() {
    name=$1 want=$2
    shift 2
    $T "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$name: exit status $got, want $want"
        return 1
    fi
    return 0
}

expect_in() {
    if grep -Eq -- "$3" "$2"; then pass "$1"; else fail "$1: no line matches /$3/ in $(basename "$2")"; fi
}

checks_end() {
    echo "${0##*/}: $PASSES check(s) passed, $FAILS failed, $SKIPS part(s) skipped"
    if [ "$FAILS" -ne 0 ]; then
        exit 1
    elif [ "$PASSES" -eq 0 ]; then
        echo "FAIL: no check ran"
        exit 1
    elif [ "$SKIPS" -ne 0 ]; then
        echo "SKIP: this machine lacks what these need:$SKIPPED"
        exit 77
    fi
    exit 0
}
