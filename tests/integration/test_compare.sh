#!/bin/sh
# Integration test of the comparison bench, tools/compare/braid-compare: one tiny run with
# whatever of Open MPI, MPICH and Gloo is installed (braid's tool always), then the paths
# that need no other library: a wrong result is flagged, a missing library is skipped
# with a note, the tuner against forced algorithms (--algos), two hosts in network
# namespaces (--hosts, --link; skipped without root), bad flags exit 2. Never a speed:
# timings are benchmarks, not tests.
#
#     tests/integration/test_compare.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)
#
# BUILD_DIR holds braidrun and all_reduce_perf (directly or in tools/) and, when configure
# found the MPI compilers, tools/compare/mpi_bench_{ompi,mpich}. Exit status: 0 all checks
# passed, 1 a check failed (or none ran), 77 (automake SKIP) no python3, or no network
# namespaces for --hosts (root and iproute2), 99 braid's tools not built. Without
# matplotlib the bench's note that it drew nothing is checked instead of the PNG.

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
if [ -z "$BUILD_DIR" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR)" >&2
    exit 1
fi
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
COMPARE=$SRC_DIR/tools/compare/braid-compare
PY=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
[ -f "$COMPARE" ] || { echo "test_compare.sh: no $COMPARE" >&2; exit 99; }
for t in braidrun all_reduce_perf; do
    [ -x "$BUILD_DIR/$t" ] || [ -x "$BUILD_DIR/tools/$t" ] ||
        { echo "test_compare.sh: no $t in $BUILD_DIR (make builds it)" >&2; exit 99; }
done

# each run of the bench stays under 50 s (the whole test about 30 s); in the sanitizer build
# (BRAID_TEST_QUICK=1) a run of 12 launches took 75 s on a quiet 2-core VM (issue 21's
# note: cause not found yet), so the hang guard is 150 s there
T="timeout 50"
[ "${BRAID_TEST_QUICK:-0}" = 1 ] && T="timeout 150"
. "$SRC_DIR/tests/integration/checks.sh"

# bench NAME WANT_STATUS ARGS...: run braid-compare ARGS
bench() {
    bname=$1 bwant=$2
    shift 2
    run "$bname" "$bwant" "$PY" "$COMPARE" "$@"
}

# rows: the table's data rows (size first, then one "|" cell per library)
rows() {
    grep -Ec '^ *[0-9]+  \|' "$TMP/out"
}

# ---- a real run: every installed library, 4 sizes, 1 round ----

if bench "tiny run" 0 -c allreduce -n 2 -b 8 -e 4K -f 8 -i 20 -w 2 --rounds 1 \
        --build-dir "$BUILD_DIR" --png "$TMP/out.png" --json "$TMP/out.json"; then
    n=$(rows)
    if [ "$n" -eq 4 ]; then pass "tiny run: one row per size (8 64 512 4096)"
    else fail "tiny run: $n table rows, want 4"; fi
    # braid's column: a "|" follows it unless braid is the only library measured
    expect_in "tiny run: braid measured" "$TMP/out" "^#  +size  \|  +braid  *(\||$)"
    expect_in "tiny run: no wrong results" "$TMP/out" "^# wrong results: 0$"
    if grep -Eq '^ *[0-9]+  \|.*[0-9]!' "$TMP/out"; then fail "tiny run: a cell is marked wrong"
    else pass "tiny run: no cell marked wrong"; fi
    libs=$(sed -n 's/^#  *size  //p' "$TMP/out" | tr -d '|' | tr -s ' ')
    echo "   libraries measured:$libs; skipped: $(grep -c '^# note: .*skipped' "$TMP/out")"
    if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
        # without matplotlib braid-compare says so and goes on: that is what this machine
        # can check (a drawing needs matplotlib)
        expect_in "--png without matplotlib: a note, and the table" "$TMP/out" \
            "^# note: png: skipped"
        echo "   (no python3 with matplotlib here: the drawing itself is not exercised)"
    elif [ "$(head -c 4 "$TMP/out.png" 2>/dev/null | od -An -c | tr -d ' ')" = "211PNG" ]; then
        pass "--png writes a PNG"
    else
        fail "--png wrote no PNG"
    fi
    if "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert len(d["table"]) == 4' \
            "$TMP/out.json" 2>"$TMP/err"; then pass "--json writes the table"
    else fail "--json: no table of 4 sizes"; fi
fi

# ---- a fake braid that answers wrong: flagged with '!', exit status 1 ----

mkdir -p "$TMP/fake"
cat >"$TMP/fake/braidrun" <<'EOF'
#!/bin/sh
# fake braidrun + tool: writes one -J row with 3 wrong elements
while [ $# -gt 0 ]; do [ "$1" = -J ] && out=$2; shift; done
echo '{"collective":"all_reduce","nranks":2,"size":8,"count":2,"type":"float","redop":"sum","root":-1,"out_of_place":{"time":1.5,"alg_bw":0.005,"bus_bw":0.005,"nwrong":3},"in_place":{"time":1.5,"alg_bw":0.005,"bus_bw":0.005,"nwrong":0}}' >"$out"
EOF
cp "$TMP/fake/braidrun" "$TMP/fake/all_reduce_perf"
chmod +x "$TMP/fake/braidrun" "$TMP/fake/all_reduce_perf"
if bench "wrong result" 1 -c allreduce -n 2 -b 8 -e 8 --rounds 1 --only braid \
        --build-dir "$TMP/fake"; then
    expect_in "wrong result: cell marked" "$TMP/out" "^ +8  \| +1\.50! +0\.01"
    expect_in "wrong result: named" "$TMP/out" "^# ! braid at 8 B: 3 wrong elements"
    expect_in "wrong result: counted" "$TMP/out" "^# wrong results: 1$"
fi

# ---- a library that is not installed: a note, not an error ----

if bench "missing library" 0 -c allreduce -n 2 -b 8 -e 8 --rounds 1 --only braid,gloo \
        --python "$TMP/no-such-python" --build-dir "$BUILD_DIR"; then
    expect_in "missing library: skipped with a note" "$TMP/out" "^# note: gloo: skipped"
    n=$(rows)
    if [ "$n" -eq 1 ]; then pass "missing library: braid still measured"
    else fail "missing library: $n rows, want 1"; fi
fi

# ---- the tuner against forced algorithms (--algos) ----

if bench "algos" 0 -c allreduce -n 2 -b 8 -e 4K -f 8 -i 20 -w 2 --rounds 1 --only braid \
        --algos ring,rd --build-dir "$BUILD_DIR"; then
    expect_in "algos: a column each" "$TMP/out" "^#  +size  \|  +braid  +\|  +ring  +\|  +rd  +\|.*tuner's choice"
    expect_in "algos: forced by NCCL_ALGO" "$TMP/out" "^# rd +.*NCCL_ALGO=allreduce:rd "
    n=$(grep -Ec '^ *[0-9]+  \|.*\| (ring|rd|oneshot|rabenseifner|tree|twoshot)/[0-9]+[KMG]?$' "$TMP/out")
    if [ "$n" -eq 4 ]; then pass "algos: the tuner's choice on every row"
    else fail "algos: $n rows end with the tuner's choice, want 4"; fi
    # cells are right-aligned numbers: a wide one (a slow run) leaves no space after "|"
    n=$(grep -Ec '^ *[0-9]+  \|.*\| *[0-9.]+ +[0-9.]+  (ring|rd) ' "$TMP/out")
    if [ "$n" -eq 4 ]; then pass "algos: the tuner against the best forced one on every row"
    else fail "algos: $n rows compare the tuner with ring or rd, want 4"; fi
fi
# slice sizes: NAME@SLICE forces both, @SLICE the slice alone; the choice shows the slice
if bench "slices" 0 -c bcast -n 3 -b 64K -e 256K -f 4 -i 10 -w 2 --rounds 1 --only braid \
        --algos chain@64K,@16K --build-dir "$BUILD_DIR"; then
    expect_in "slices: a column each" "$TMP/out" "^#  +size  \|  +braid  +\|  +chain@64K  +\|  +@16K  +\|"
    expect_in "slices: forced by BRAID_SLICE_SIZE" "$TMP/out" \
        "^# chain@64K +.*: NCCL_ALGO=broadcast:chain BRAID_SLICE_SIZE=64K "
    expect_in "slices: the slice alone" "$TMP/out" "^# @16K +braid.*: BRAID_SLICE_SIZE=16K [^ ]*braidrun "
    n=$(grep -Ec '^ *[0-9]+  \|.*\| (chain|binomial)/[0-9]+K$' "$TMP/out")
    if [ "$n" -eq 2 ]; then pass "slices: the tuner's algorithm and slice on every row"
    else fail "slices: $n rows end with ALGORITHM/SLICE, want 2"; fi
fi
# an algorithm that cannot run the collective: that column fails, the others are measured
if bench "algos: one cannot run" 1 -c allreduce -n 2 -b 8 -e 8 -i 5 -w 1 --rounds 1 \
        --only braid --algos chain,ring --build-dir "$BUILD_DIR"; then
    expect_in "algos: the failing one named" "$TMP/out" "^# note: chain: failed and dropped"
    expect_in "algos: the others measured" "$TMP/out" "^ +8  \| *[0-9.]+ +[0-9.]+ \| +- +- \| *[0-9.]+ +[0-9.]+ "
fi

# ---- several hosts in network namespaces (--hosts; root) ----

probe=bcprobe$$
if ! { ip netns add "$probe" && ip netns del "$probe"; } 2>/dev/null; then
    skip "no network namespaces here (root and iproute2 needed): --hosts not checked"
else
    before=$(ip netns list | wc -l)
    if bench "hosts" 0 -c allreduce -n 2 -b 8 -e 512 -f 8 -i 10 -w 2 --rounds 1 --only braid \
            --hosts 2 --link 1gbit --algos ring --build-dir "$BUILD_DIR"; then
        expect_in "hosts: said in the header" "$TMP/out" "^# braid-compare: allreduce, 2 ranks on 2 hosts \(link 1gbit\)"
        expect_in "hosts: the Socket provider" "$TMP/out" "^# ring +.*NCCL_NET=Socket "
        n=$(rows)
        if [ "$n" -eq 3 ]; then pass "hosts: one row per size"; else fail "hosts: $n rows, want 3"; fi
    fi
    if [ "$(ip netns list | wc -l)" -eq "$before" ]; then pass "hosts: namespaces removed"
    else fail "hosts: namespaces left behind: $(ip netns list | tr '\n' ' ')"; fi
fi

# ---- usage ----

bench "bad flag" 2 --no-such-flag && expect_in "bad flag: usage" "$TMP/err" "^usage: braid-compare"
bench "bad collective" 2 -c allsum && expect_in "bad collective: usage" "$TMP/err" "^usage: "
bench "bad library" 2 --only braid,nccl && expect_in "bad library: usage" "$TMP/err" "^usage: "
bench "bad range" 2 -b 1M -e 1K && pass "bad range exits 2"
bench "-h" 0 -h && expect_in "-h prints usage" "$TMP/out" "^usage: braid-compare"
bench "a bare @" 2 --algos ring,@ --only braid && expect_in "a bare @: usage" "$TMP/err" "NAME@SLICE"
bench "algos without braid" 2 --algos ring --only ompi &&
    expect_in "algos without braid: usage" "$TMP/err" "--algos needs braid"
bench "hosts with MPI" 2 --hosts 2 && expect_in "hosts with MPI: usage" "$TMP/err" "add --only braid"
bench "link without hosts" 2 --link 1gbit --only braid &&
    expect_in "link without hosts: usage" "$TMP/err" "--link shapes the link between hosts"

checks_end
