#!/bin/sh
# shellcheck disable=SC2016   # commands for the ranks' shells are single-quoted on purpose
# Integration test of the launcher and the bandwidth tools: braidrun and every *_perf.
#
#     tests/integration/test_tools.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)
#
# BUILD_DIR holds braidrun and the tools (directly or in tools/). For each tool: usage and
# exit status 2 on bad flags; the header, the columns and the sizes of a table on 2 ranks,
# as threads (-t 2) and as processes (braidrun), with #wrong 0; every flag; every type, op
# and root on 3 ranks; -J rows as JSON with nccl-tests' size, count and busbw factor; and a
# wrong result counted, through an LD_PRELOAD shim built here from perf_corrupt.c with the
# build's compiler. Exit status: 0 all checks passed, 1 a check failed (or none ran), 77
# (automake SKIP) braidrun or all_reduce_perf is not built.

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
if [ -z "$BUILD_DIR" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR)" >&2
    exit 1
fi
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TOOLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"

find_tool() {
    for d in "$BUILD_DIR/tools" "$BUILD_DIR"; do
        if [ -x "$d/$1" ]; then
            echo "$d/$1"
            return 0
        fi
    done
    return 1
}

# braidrun and the tools are built by make itself: one missing is a broken build (99)
BRAIDRUN=$(find_tool braidrun) || { echo "test_tools.sh: no braidrun in $BUILD_DIR" >&2; exit 99; }
find_tool all_reduce_perf >/dev/null ||
    { echo "test_tools.sh: no all_reduce_perf in $BUILD_DIR" >&2; exit 99; }
# Never hang a CI job: every command gets a wall-clock limit.
T="timeout 120"
. "$SRC_DIR/tests/integration/checks.sh"

# ---- braidrun ----

run "braidrun -h" 0 "$BRAIDRUN" -h && expect_in "braidrun -h prints usage" "$TMP/out" "^usage: braidrun"
run "braidrun --help" 0 "$BRAIDRUN" --help &&
    expect_in "braidrun --help prints usage" "$TMP/out" "^usage: braidrun"
run "braidrun --bogus" 2 "$BRAIDRUN" --bogus -n 1 true &&
    expect_in "braidrun --bogus: named" "$TMP/err" "invalid option: --bogus"
run "braidrun bad flag" 2 "$BRAIDRUN" -x true && expect_in "braidrun bad flag: usage" "$TMP/err" "usage: braidrun"
run "braidrun without -n" 2 "$BRAIDRUN" true && pass "braidrun without -n exits 2"
run "braidrun without a command" 2 "$BRAIDRUN" -n 2 && pass "braidrun without a command exits 2"
run "braidrun -n 0" 2 "$BRAIDRUN" -n 0 true && pass "braidrun -n 0 exits 2"

if run "braidrun environment" 0 "$BRAIDRUN" -n 3 sh -c \
    'echo "env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NCCL_COMM_ID"'; then
    n=$(grep -Ec '^env [0-2] 3 [0-2] 3 127\.0\.0\.1:[0-9]+$' "$TMP/out")
    ids=$(sed -n 's/^env .* //p' "$TMP/out" | sort -u | wc -l)
    if [ "$n" -eq 3 ] && [ "$ids" -eq 1 ]; then pass "braidrun sets RANK, WORLD_SIZE, LOCAL_*, one NCCL_COMM_ID"
    else fail "braidrun environment: $n good lines, $ids distinct NCCL_COMM_ID"; fi
fi
# Binding. bound NAME PRE [ARGS...]: run `PRE braidrun --report-bindings ARGS sh -c ...`
# (PRE: a command's words, taskset or a wrapper, or ""; each rank prints its CPUs). 0 if
# each of the $n_ranks ranks runs on the CPUs the report names for it, no CPU named twice;
# 2 if the report says the ranks are not bound ($TMP/why: why) and each rank kept
# braidrun's CPUs ($unbound, or this shell's $mask); 1, a failed check, otherwise.
mask=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
unbound=
bound() {
    b_name=$1 b_pre=$2
    shift 2
    # shellcheck disable=SC2086   # b_pre: a command's words
    run "$b_name" 0 $b_pre "$BRAIDRUN" --report-bindings "$@" sh -c \
        'echo "cpus $RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' ||
        return 1
    if sed -n 's/^braidrun: ranks not bound: //p' "$TMP/err" >"$TMP/why" && [ -s "$TMP/why" ]; then
        b_got=$(awk -v m="${unbound:-$mask}" '$1 == "cpus" && $3 != m' "$TMP/out")
        [ -z "$b_got" ] || { fail "$b_name: not bound, but a rank's CPUs changed: $b_got"; return 1; }
        return 2
    fi
    sed -n 's/^braidrun: rank \([0-9]*\) bound to CPUs\{0,1\} \([-,0-9]*\)$/\1 \2/p' \
        "$TMP/err" >"$TMP/bound"
    while read -r b_r b_cpus; do
        b_got=$(sed -n "s/^cpus $b_r //p" "$TMP/out")
        [ "$b_got" = "$b_cpus" ] ||
            { fail "$b_name: rank $b_r bound to CPUs $b_cpus, runs on \"$b_got\""; return 1; }
    done <"$TMP/bound"
    # every CPU of every rank's list, one per line: none twice
    b_got=$(cut -d' ' -f2 "$TMP/bound" | tr ',' '\n' |
            awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | sort | uniq -d)
    [ -z "$b_got" ] || { fail "$b_name: ranks share CPUs $(echo $b_got)"; return 1; }
    b_got=$(wc -l <"$TMP/bound")
    [ "$b_got" -eq "$n_ranks" ] || { fail "$b_name: $b_got ranks bound, of $n_ranks"; return 1; }
}
# not_bound NAME WHY PRE [ARGS...]: the ranks must be left unbound, saying WHY
not_bound() {
    nb_name=$1 nb_why=$2
    shift 2
    bound "$nb_name" "$@"
    case $? in
    0) fail "$nb_name: bound its ranks" ;;
    2) expect_in "$nb_name: not bound, says why" "$TMP/why" "$nb_why" ;;
    esac
}
ncpu=$(nproc)
n_ranks=$(( ncpu < 2 ? ncpu : 2 ))
# -b: each rank on CPUs of braidrun's own, none shared
bound "braidrun -b" "" -n "$n_ranks" -b && pass "braidrun -b binds each rank to CPUs of its own"
# a share is whole cores: one rank's is all of braidrun's CPUs
n_ranks=1
bound "braidrun -b, one rank" "" -n 1 -b && expect_in "braidrun -b, one rank: all the CPUs" \
    "$TMP/err" "^braidrun: rank 0 bound to CPUs? $mask\$"
n_ranks=$(( ncpu < 2 ? ncpu : 2 ))
# By default where 2 ranks fit. Another braidrun of the suite may hold the CPUs for a
# while: this one then says so and binds none. Try again until a moment they are free,
# for up to 2 minutes.
if [ "$ncpu" -ge 2 ]; then
    for _ in $(seq 600); do
        bound "braidrun binds by default" "" -n 2; rc=$?
        [ $rc = 2 ] && grep -q "another braidrun job" "$TMP/why" || break
        sleep 0.2
    done
    case $rc in
    0) pass "braidrun binds 2 ranks by default, each to CPUs of its own" ;;
    2) fail "braidrun, 2 ranks on $ncpu CPUs, not bound by default: $(cat "$TMP/why")" ;;
    esac
    # a job that holds the CPUs (its ranks wait for a file): a second job binds none
    # and says why; with -b it binds all the same
    rm -f "$TMP/go"
    $T "$BRAIDRUN" -n "$ncpu" --report-bindings sh -c \
        "while [ ! -e '$TMP/go' ]; do sleep 0.1; done" 2>"$TMP/holder" &
    holder=$!
    for _ in $(seq 600); do
        [ "$(grep -c 'bound to CPU' "$TMP/holder")" = "$ncpu" ] && break
        grep -q "not bound" "$TMP/holder" && break
        sleep 0.1
    done
    if grep -q "not bound" "$TMP/holder"; then
        echo "note: the CPUs are another braidrun job's, so the held-CPU case is not checked"
    else
        not_bound "braidrun beside a job that holds its CPUs" "run ranks of another braidrun job" \
            "" -n 2
        bound "braidrun -b beside a job that holds its CPUs" "" -n 2 -b &&
            pass "braidrun -b binds beside a job that holds its CPUs"
    fi
    touch "$TMP/go"
    wait $holder
fi
n_ranks=$((ncpu + 1))
not_bound "braidrun, more ranks than CPUs" "^$((ncpu + 1)) ranks, $ncpu CPUs?$" "" -n "$n_ranks"
n_ranks=2
not_bound "braidrun --no-bind" "^--no-bind$" "" -n 2 --no-bind
# bound already (taskset): not bound, the user's choice stands; -b binds within it
if [ "$ncpu" -ge 3 ]; then
    unbound=0-1
    not_bound "braidrun under taskset" "runs on 2 of the $ncpu CPUs.*bound it" \
        "taskset -c 0,1" -n 2
    bound "braidrun -b under taskset" "taskset -c 0,1" -n 2 -b &&
        pass "braidrun -b under taskset binds within its CPUs"
fi
unbound=0
not_bound "braidrun under taskset -c 0" "^2 ranks, 1 CPU$" "taskset -c 0" -n 2
unbound=
# a CPU quota (cgroup v1's cpu controller, where this user may make a group): 1 CPU's time
cg=/sys/fs/cgroup/cpu/braid-test.$$
if [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] && [ "$ncpu" -ge 2 ] && mkdir "$cg" 2>/dev/null; then
    printf '%s\n' 'echo $$ > "$CG/cgroup.procs" && exec "$@"' >"$TMP/in_cgroup.sh"
    echo 100000 > "$cg/cpu.cfs_period_us" && echo 100000 > "$cg/cpu.cfs_quota_us" &&
        not_bound "braidrun under a quota of 1 CPU" "a CPU quota of 1 CPU \(cgroup\)" \
            "env CG=$cg sh $TMP/in_cgroup.sh" -n 2
    rmdir "$cg"
else
    echo "note: no cgroup v1 CPU quota can be made here: the quota case is not checked"
fi
run "braidrun -b, more ranks than CPUs" 2 "$BRAIDRUN" -n $((ncpu + 1)) -b true &&
    expect_in "braidrun -b, more ranks than CPUs: says so" "$TMP/err" "binds one rank per CPU"

# A failing rank: its status becomes braidrun's, it is named, the others are stopped. Every
# other rank starts a child (sleep 300) and records its pid and the child's in $TMP/ranks;
# the failing rank fails once all of them have (the state the check needs), by exiting with
# CODE or, for "kill", by SIGKILL. Arguments of the ranks' script: DIR NRANKS BAD CODE.
RANK_SH='d=$1 n=$2 bad=$3 how=$4
if [ "$RANK" = "$bad" ]; then
    until [ "$(ls "$d" | wc -l)" -ge $((n - 1)) ]; do sleep 0.02; done
    [ "$how" = kill ] && kill -9 $$
    exit "$how"
fi
sleep 300 &
echo "$$ $!" >"$d/.$RANK" && mv "$d/.$RANK" "$d/$RANK"
wait'
failing_job() {   # failing_job NAME WANT_STATUS [ENV=VALUE...] -- BRAIDRUN_ARGS... -- N BAD HOW
    fname=$1 fwant=$2
    shift 2
    rm -rf "$TMP/ranks" && mkdir "$TMP/ranks"
    envs=
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    bargs=
    while [ "$1" != -- ]; do bargs="$bargs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    run "$fname" "$fwant" env $envs "$BRAIDRUN" $bargs -n "$1" sh -c "$RANK_SH" sh \
        "$TMP/ranks" "$1" "$2" "$3"
}
# alive PID: the process exists and is not a zombie waiting for its reaper
alive() {
    [ -r "/proc/$1/stat" ] &&
        [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}
# stopped NAME GRACE BAD: braidrun sent SIGTERM, GRACE s after rank BAD failed, to each other
# rank by the pid the rank recorded, and that rank and its child are gone: a process braidrun
# signalled dies as soon as it runs, so the wait for that is bounded (30 s) but never needed
# for the check to pass; one braidrun missed would sleep 300 s.
stopped() {
    miss='' left=''
    for f in "$TMP/ranks"/*; do
        [ -f "$f" ] || { fail "$1: no rank recorded its pid"; return; }
        read -r rpid cpid <"$f"
        said="rank [0-9]+ \(pid $rpid\) still running $2 s after rank $3 failed: sending SIGTERM"
        grep -Eq "$said" "$TMP/err" || miss="$miss $rpid"
        for p in $rpid $cpid; do
            i=0
            while alive "$p" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
            alive "$p" && { left="$left $p"; kill -9 "$p" 2>/dev/null; }
        done
    done
    if [ -n "$miss" ]; then
        fail "$1: braidrun did not say it sent SIGTERM to$miss, $2 s after rank $3 failed"
    elif [ -n "$left" ]; then
        fail "$1: still running after braidrun returned:$left"
    else
        pass "$1: every other rank and its child stopped by braidrun's SIGTERM, $2 s after rank $3 failed"
    fi
}

if failing_job "braidrun failing rank" 3 -- -k 1 -- 3 1 3; then
    expect_in "braidrun names the failed rank" "$TMP/err" "rank 1 \(pid [0-9]+\) exited with status 3"
    stopped "braidrun -k 1 stops the others" 1 1
fi
if failing_job "braidrun killed rank" 137 -- -k 0 -- 2 0 kill; then
    expect_in "braidrun names the killed rank" "$TMP/err" "rank 0 \(pid [0-9]+\) killed by signal 9"
    stopped "braidrun -k 0 stops the others" 0 0
fi
failing_job "braidrun SIGTERM after failure" 5 BRAIDRUN_KILL_AFTER=0 -- -- 2 1 5 &&
    stopped "BRAIDRUN_KILL_AFTER=0 stops the others at once" 0 1

# ---- the bandwidth tools ----

# tool_info NAME: what nccl-tests prints for it. OP: the redop column; ROOT: the root
# column by default; SPLIT: 1 if count is size/nranks (rounded to 16 bytes), 0 if size;
# BUS: busbw/algbw as a function of n; NA: 1 if the in-place #wrong is N/A.
tool_info() {
    case $1 in
    all_reduce)     OP=sum  ROOT=-1 SPLIT=0 BUS="2*(n-1)/n" NA=0 ;;
    all_gather)     OP=none ROOT=-1 SPLIT=1 BUS="(n-1)/n" NA=0 ;;
    reduce_scatter) OP=sum  ROOT=-1 SPLIT=1 BUS="(n-1)/n" NA=0 ;;
    broadcast)      OP=none ROOT=0  SPLIT=0 BUS="1" NA=0 ;;
    reduce)         OP=sum  ROOT=0  SPLIT=0 BUS="1" NA=0 ;;
    alltoall)       OP=none ROOT=-1 SPLIT=1 BUS="(n-1)/n" NA=1 ;;
    gather)         OP=none ROOT=0  SPLIT=1 BUS="(n-1)/n" NA=0 ;;
    scatter)        OP=none ROOT=0  SPLIT=1 BUS="(n-1)/n" NA=0 ;;
    sendrecv)       OP=sum  ROOT=-1 SPLIT=0 BUS="1" NA=1 ;;
    esac
}

# rows N: "ROWS BAD SIZES" of the float table in $TMP/out; a row is bad unless it has 13
# fields, the tool's redop and root, #wrong 0 (N/A in place where nccl-tests prints it)
# and nccl-tests' count for its size on N ranks.
rows() {
    awk -v op="$OP" -v root="$ROOT" -v sp="$SPLIT" -v na="$NA" -v n="$1" '
        !/^#/ && NF > 0 {
            rows++; sizes = sizes " " $1
            inplace = na ? "N/A" : "0"
            count_ok = sp ? $2 * n * 4 == $1 : $2 * 4 == $1
            if (!(NF == 13 && $3 == "float" && $4 == op && $5 == root && $9 == "0" &&
                  $13 == inplace && count_ok)) bad++
        }
        END { printf "%d %d%s\n", rows, bad, sizes }' "$TMP/out"
}

# check_table NAME N SIZES: header, columns, footer and rows of a table on N ranks.
check_table() {
    expect_in "$1: header" "$TMP/out" "^# Collective test starting: ${TOOL}_perf\$"
    expect_in "$1: column titles" "$TMP/out" "^#  +size +count +type +redop +root +(cpu)?time +algbw +busbw +#wrong +(cpu)?time +algbw +busbw +#wrong\$"
    expect_in "$1: footer" "$TMP/out" "^# Avg bus bandwidth +: [0-9.e+-]+"
    expect_in "$1: no wrong values" "$TMP/out" "^# Out of bounds values : 0 OK"
    got=$(rows "$2")
    if [ "$got" = "$3" ]; then pass "$1: rows (size count float $OP $ROOT ...), #wrong 0"
    else fail "$1: rows, bad rows, sizes: got \"$got\", want \"$3\""; fi
}

# check_json NAME FILE N ROWS: -J rows are JSON objects with every field, nccl-tests'
# count and busbw factor, and #wrong 0 (null where N/A).
check_json() {
    if ! command -v python3 >/dev/null 2>&1; then
        n=$(grep -c '^{"collective":"'"$TOOL"'",.*"out_of_place":{"time":.*"in_place":{' "$2")
        if [ "$n" -eq "$4" ]; then pass "$1 (fields by pattern: no python3)"; else fail "$1: $n of $4 rows"; fi
        return
    fi
    if python3 - "$2" "$TOOL" "$3" "$4" "$OP" "$ROOT" "$SPLIT" "$BUS" "$NA" >"$TMP/err" 2>&1 <<'EOF'
import json, sys
path, tool, n, rows, op, root, split, bus, na = sys.argv[1:]
n, rows, root, split, na = int(n), int(rows), int(root), int(split), int(na)
factor = eval(bus, {"n": float(n)})
lines = open(path).read().splitlines()
assert len(lines) == rows, "%d lines, want %d" % (len(lines), rows)
for line in lines:
    r = json.loads(line)
    want = {"collective": tool, "nranks": n, "type": "float", "redop": op, "root": root}
    for k, v in want.items():
        assert r.get(k) == v, "%s: %r, want %r in %s" % (k, r.get(k), v, line)
    assert r["count"] * 4 * (n if split else 1) == r["size"], "size/count: " + line
    for half in ("out_of_place", "in_place"):
        h = r[half]
        assert set(h) == {"time", "alg_bw", "bus_bw", "nwrong"}, half + ": " + line
        assert h["time"] > 0 and h["alg_bw"] > 0, half + ": " + line
        assert abs(h["bus_bw"] / h["alg_bw"] - factor) < 1e-2 * factor, "busbw factor: " + line
        assert h["nwrong"] == (None if half == "in_place" and na else 0), "nwrong: " + line
EOF
    then pass "$1"; else fail "$1"; fi
}

# A shim that flips one received bit of every float collective (see perf_corrupt.c), built
# with the build's compiler.
SHIM=
if build_cc -shared -fPIC -I"${BRAID_INCLUDE:-$SRC_DIR/include}" -o "$TMP/perf_corrupt.so" \
       "$SRC_DIR/tests/integration/perf_corrupt.c" -ldl; then
    SHIM="${BRAID_TEST_PRELOAD:+$BRAID_TEST_PRELOAD }$TMP/perf_corrupt.so"
else
    fail "the corrupting shim does not build from perf_corrupt.c: wrong results not checked"
fi

SIZES_FULL=" 8 16 32 64 128 256 512 1024"
SIZES_SPLIT=" 0 0 32 64 128 256 512 1024"   # 2 ranks: per-rank blocks of 16 bytes
for TOOL in $TOOLS; do
    tool_info "$TOOL"
    if ! PERF=$(find_tool "${TOOL}_perf"); then
        fail "${TOOL}_perf is not built in $BUILD_DIR"
        continue
    fi
    P=${TOOL}_perf
    if [ "$SPLIT" = 1 ]; then SIZES=$SIZES_SPLIT; else SIZES=$SIZES_FULL; fi

    run "$P -h" 0 "$PERF" -h && expect_in "$P -h prints usage" "$TMP/out" "^usage: "
    run "$P bad flag" 2 "$PERF" -q && expect_in "$P bad flag: usage" "$TMP/err" "^usage: "
    if run "braidrun -n 3 $P bad flag" 2 "$BRAIDRUN" -n 3 "$PERF" -q; then
        n=$(grep -c '^usage: ' "$TMP/err")
        if [ "$n" -eq 1 ]; then pass "braidrun -n 3 $P bad flag: the usage once"
        else fail "braidrun -n 3 $P bad flag: the usage $n times, want once (rank 0's)"; fi
    fi
    run "$P bad value" 2 "$PERF" -d notatype && expect_in "$P bad value: usage" "$TMP/err" "^usage: "
    run "$P -g 2" 2 "$PERF" -g 2 && pass "$P -g 2 exits 2"

    run "$P -t 2" 0 "$PERF" -t 2 -b 8 -e 1K -f 2 && check_table "$P -t 2" 2 "8 0$SIZES"
    run "braidrun -n 2 $P" 0 "$BRAIDRUN" -n 2 "$PERF" -b 8 -e 1K -f 2 &&
        check_table "braidrun -n 2 $P" 2 "8 0$SIZES"

    # every flag at once: 3 sizes (-i steps) x 2 cycles (-N) = 6 rows
    run "$P every flag" 0 "$PERF" -t 2 -g 1 -b 512 -e 1536 -i 512 -f 1 -n 3 -w 1 -c 2 \
        -o sum -d float -r 0 -z 1 -a 0 -m 2 -N 2 -p 1 -y 1 -T 60 -G 0 -C 1 -R 1 &&
        check_table "$P every flag" 2 "6 0 512 1024 1536 512 1024 1536"
    run "$P -R 2 -z 2 -a 3" 0 "$PERF" -t 2 -b 1K -e 1K -R 2 -z 2 -a 3 -c 0 &&
        expect_in "$P -R 2 -c 0: #wrong N/A" "$TMP/out" "^ +1024 +[0-9]+ +float .* N/A\$"

    run "$P every type, op and root on 3 ranks" 0 "$PERF" -t 3 -b 96 -e 96 -d all -o all \
        -r -1 -n 1 -w 0 && expect_in "$P every type, op and root: no wrong values" "$TMP/out" \
        "^# Out of bounds values : 0 OK"
    if [ "$ROOT" = 0 ]; then
        run "$P -r -1" 0 "$PERF" -t 2 -b 1K -e 1K -r -1 &&
        if [ "$(awk '!/^#/ && $9 == "0" && $13 == "0" { printf " %s", $5 }' "$TMP/out")" = " 0 1" ]
        then pass "$P -r -1: one row per root, #wrong 0"; else fail "$P -r -1: rows for roots 0 and 1"; fi
        run "$P -r 2 on 2 ranks" 2 "$PERF" -t 2 -r 2 && pass "$P -r 2 on 2 ranks exits 2"
    fi

    run "$P -J" 0 "$PERF" -t 3 -b 96K -e 192K -f 2 -n 2 -w 1 -J "$TMP/rows.jsonl" &&
        check_json "$P -J: JSON Lines with nccl-tests' fields, count and busbw" "$TMP/rows.jsonl" 3 2

    if [ -n "$SHIM" ]; then
        # each rank's check finds the one flipped element: #wrong 2 (in place too, or N/A)
        if [ "$NA" = 1 ]; then inplace="N/A"; else inplace=2; fi
        run "$P with a corrupted result" 1 env BRAID_TEST_CORRUPT_TYPE=7 LD_PRELOAD="$SHIM" \
            "$PERF" -t 2 -b 1K -e 1K -n 1 -w 0 &&
        if [ "$(awk '!/^#/ { print $9, $13 }' "$TMP/out")" = "2 $inplace" ] &&
           grep -Eq '^# Out of bounds values : [12] FAILED' "$TMP/out"
        then pass "$P counts a wrong element per rank (#wrong 2 $inplace), fails"
        else fail "$P with a corrupted result: #wrong not \"2 $inplace\" or no FAILED line"; fi
    fi
done

PERF=$(find_tool all_reduce_perf)
run "all_reduce_perf --selftest" 0 "$PERF" --selftest && pass "all_reduce_perf data self-test"
run "multi-process without NCCL_COMM_ID" 2 env RANK=0 WORLD_SIZE=2 NCCL_COMM_ID= "$PERF" -b 8 -e 8 &&
    expect_in "all_reduce_perf asks for NCCL_COMM_ID" "$TMP/err" "NCCL_COMM_ID"
# An algorithm forced for the measured calls must not reach the tool's own agreement
# between ranks: twoshot declines small calls, so an all-reduce of the driver's would fail.
run "all_reduce_perf with NCCL_ALGO=allreduce:twoshot" 0 env NCCL_ALGO=allreduce:twoshot \
    "$PERF" -t 2 -b 1M -e 1M -c 1 && expect_in "NCCL_ALGO=allreduce:twoshot: a row, checked" \
    "$TMP/out" "^ +1048576 +262144 +float +sum +-1 .* 0 *$"
# SIGINT to braidrun, once the ranks are measuring: they end by it (status 128 + 2), not by
# exit(1) from a handler a library braid links installs as it loads (libinfinipath's).
"$BRAIDRUN" -n 2 "$PERF" -b 1M -e 1M -n 1000000 -w 0 >"$TMP/sig.out" 2>&1 &
sig_pid=$!
for _ in $(seq 600); do
    grep -q "^# Using devices" "$TMP/sig.out" && break
    sleep 0.1
done
if ! grep -q "^# Using devices" "$TMP/sig.out"; then
    kill -KILL $sig_pid 2>/dev/null
    fail "braidrun all_reduce_perf: no ranks measuring after 60 s (cannot test SIGINT)"
    wait $sig_pid
else
    kill -INT $sig_pid
    wait $sig_pid
    rc=$?
    if [ $rc = 130 ] && grep -q "rank 0 (pid [0-9]*) killed by signal 2" "$TMP/sig.out"; then
        pass "SIGINT ends braidrun's ranks by the signal (status 130)"
    else
        cat "$TMP/sig.out"
        fail "SIGINT: braidrun exited $rc, its ranks not killed by signal 2"
    fi
fi
# The other launchers' variables: braidrun's RANK/WORLD_SIZE renamed, then dropped.
TOOL=all_gather
tool_info "$TOOL"
PERF=$(find_tool all_gather_perf) &&
for vars in "OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE" "PMI_RANK PMI_SIZE" \
            "SLURM_PROCID SLURM_NTASKS"; do
    # shellcheck disable=SC2086
    run "all_gather_perf under ${vars% *}" 0 "$BRAIDRUN" -n 2 sh -c 'r=$1 s=$2; shift 2
        export "$r=$RANK" "$s=$WORLD_SIZE"; unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
        exec "$@"' sh $vars "$PERF" -b 1K -e 2K -f 2 &&
    if [ "$(grep -c '^#  Rank  [01] ' "$TMP/out")" = 2 ]; then
        check_table "all_gather_perf under ${vars% *}" 2 "2 0 1024 2048"
    else fail "all_gather_perf under ${vars% *}: not 2 ranks"; fi
done
run "braidrun -n 2 all_gather_perf -t 2" 0 "$BRAIDRUN" -n 2 "$PERF" -t 2 -b 1K -e 2K -f 2 &&
    if [ "$(grep -c '^#  Rank  [0-3] ' "$TMP/out")" = 4 ]; then
        check_table "2 processes x 2 threads" 4 "2 0 1024 2048"
    else fail "braidrun -n 2 all_gather_perf -t 2: not 4 ranks"; fi

# braid-flight: a path that names nothing is said to be missing, not to hold no dump.
if command -v python3 >/dev/null; then
    run "braid-flight /nonexistent" 2 python3 "$SRC_DIR/tools/braid-flight" "$TMP/nonexistent" &&
        expect_in "braid-flight names the missing path" "$TMP/err" \
            "nonexistent: no such file or directory"
fi

# braid-info: this host's topology, a layout of ranks on hosts, a bad layout refused.
if INFO=$(find_tool braid-info); then
    run "braid-info -c" 0 env BRAID_EMU_HIP_ARCH=gfx942 "$INFO" -c &&
        expect_in "braid-info -c: braidrun's and the emulators' settings too" "$TMP/out" \
            "^BRAID_EMU_HIP_ARCH +emulator +gfx942 " &&
        expect_in "braid-info -c: BRAIDRUN_KILL_AFTER" "$TMP/out" "^BRAIDRUN_KILL_AFTER "
    for h in -h --help; do
        run "braid-info $h" 0 "$INFO" $h && expect_in "braid-info $h prints usage" "$TMP/out" "^usage: "
    done
    run "braid-info -l 3,1" 0 "$INFO" -l 3,1 &&
        expect_in "braid-info: this host's cores" "$TMP/out" "this host: [0-9]+ packages, [1-9][0-9]* cores" &&
        expect_in "braid-info: the layout's hosts" "$TMP/out" "layout 3,1: 4 ranks on 2 hosts \\(uneven\\)" &&
        expect_in "braid-info: rank 3 alone on host 1" "$TMP/out" "^  host 1: ranks 3\$" &&
        expect_in "braid-info: rank 0 to 3 is a network link" "$TMP/out" "^    0 self host host  net\$"
    run "braid-info -l 2,0" 2 "$INFO" -l 2,0 &&
        expect_in "braid-info -l 2,0 says what a layout is" "$TMP/err" "give ranks per host"
else
    fail "braid-info is not built"
fi

if [ -n "$SHIM" ] && PERF=$(find_tool gather_perf); then
    TOOL=gather
    run "braidrun gather_perf -r 1 with a corrupted result" 1 "$BRAIDRUN" -n 2 \
        env BRAID_TEST_CORRUPT_TYPE=7 LD_PRELOAD="$SHIM" "$PERF" -b 1K -e 1K -r 1 -n 1 -w 0 &&
        expect_in "processes: a wrong element per rank counted" "$TMP/out" \
            "^ +1024 +128 +float +none +1 .* 2 +[0-9.]+ +[0-9.]+ +[0-9.]+ +2\$"
fi

checks_end
