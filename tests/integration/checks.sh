# The check helpers of the integration test scripts (test_tools.sh, test_compare.sh),
# sourced after they set T, the wall-clock limit put in front of every command run:
#
#   $TMP                        a scratch directory, removed on exit
#   run NAME WANT_STATUS CMD... CMD's stdout and stderr in $TMP/out and $TMP/err; a failed
#                               check (with both shown) unless it exits WANT_STATUS
#   pass MSG, fail MSG          count a check
#   expect_in NAME FILE PATTERN pass if a line of FILE matches the extended regex
#   checks_end                  exit 1 if a check failed, else 0

TMP=$(mktemp -d "${TMPDIR:-/tmp}/${0##*/}.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILS=0

fail() {
    echo "FAIL: $1"
    for f in "$TMP/out" "$TMP/err"; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):"; tail -n 30 "$f"; }
    done
    FAILS=$((FAILS + 1))
}

pass() {
    echo "ok: $1"
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
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS check(s) failed"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
