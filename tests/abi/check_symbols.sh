#!/bin/sh
# Compare the dynamic symbols a braid library exports with NVIDIA's libnccl.so.2.
#
# Usage: check_symbols.sh [--nccl-only] [BRAID_LIB]
#   BRAID_LIB      the braid library (default: $BRAID_LIB, else .libs/libbraid.so, i.e. run
#                  from the top build directory after `make`)
#   --nccl-only    do not require RCCL's extra entry points (used to check NVIDIA's
#                  library against itself: `check_symbols.sh --nccl-only $NCCL_REF_LIB`)
# Environment:
#   NCCL_REF_LIB   the reference library (default /usr/local/cuda/lib/libnccl.so.2)
#   READELF        readelf to use (default readelf)
#
# Checks:
#   1. every nccl*/pnccl* symbol the reference exports is exported by BRAID_LIB: defined,
#      default visibility, same type and the same binding (nccl* weak, pnccl* global);
#   2. RCCL's ncclAllToAll, ncclAllToAllv, mscclLoadAlgo, mscclRunAlgo, mscclUnloadAlgo
#      are exported weak and their p-twins global (skipped with --nccl-only);
#   3. each exported pX with an exported X sits at X's address (it is an alias of X);
#   4. BRAID_LIB exports nothing outside nccl*, pnccl*, mscc*, pmscc* and braid's public
#      braidXxx names (no leaked internals: braid_<module>_* is internal and must stay
#      hidden; the linker's own _init/_fini/_edata/_end/__bss_start are tolerated);
#   5. the names applications load, libnccl.so.2 and librccl.so.1 in BRAID_LIBDIR (default:
#      braid/ beside BRAID_LIB), carry those sonames, are filters on libbraid.so.0, and
#      export BRAID_LIB's names with the same type, binding and visibility (a p-twin at
#      its twin's address); without BRAID_LIBDIR, skipped where they are not there (a
#      library checked by path).
# Exit status: 0 pass, 1 mismatch (each problem is printed), 77 skip (no reference
# library or no readelf), 99 BRAID_LIB missing.

set -u

nccl_only=0
if [ "${1:-}" = "--nccl-only" ]; then
    nccl_only=1
    shift
fi
lib=${1:-${BRAID_LIB:-.libs/libbraid.so}}
ref=${NCCL_REF_LIB:-/usr/local/cuda/lib/libnccl.so.2}
readelf=${READELF:-readelf}

if [ ! -e "$ref" ]; then
    echo "check_symbols: SKIP: reference library $ref not found (set NCCL_REF_LIB)"
    exit 77
fi
if ! command -v "$readelf" >/dev/null 2>&1; then
    echo "check_symbols: SKIP: $readelf not found (install binutils or set READELF)"
    exit 77
fi
if [ ! -e "$lib" ]; then
    echo "check_symbols: ERROR: braid library $lib not found (build it, or pass its path)"
    exit 99
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_symbols.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

# Defined dynamic symbols as "name type bind vis value", version suffixes removed.
dynsyms() {
    LC_ALL=C "$readelf" -W --dyn-syms "$1" | awk '
        $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 != "UND" {
            name = $8; sub(/@.*/, "", name)
            if (name != "") print name, $4, $5, $6, $2
        }' | sort -u
}

dynsyms "$ref" >"$tmp/ref" || exit 99
dynsyms "$lib" >"$tmp/lib" || exit 99
if [ ! -s "$tmp/lib" ]; then
    echo "check_symbols: FAIL: $lib exports no symbols at all"
    exit 1
fi

# Required symbols: "name type bind".
awk '$1 ~ /^p?nccl/ { print $1, $2, $3 }' "$tmp/ref" >"$tmp/req"
if [ "$nccl_only" = 0 ]; then
    for f in ncclAllToAll ncclAllToAllv mscclLoadAlgo mscclRunAlgo mscclUnloadAlgo; do
        echo "$f FUNC WEAK"
        echo "p$f FUNC GLOBAL"
    done >>"$tmp/req"
fi

# One line per problem.
awk -v reqfile="$tmp/req" '
    BEGIN {
        while ((getline line < reqfile) > 0) {
            split(line, f, " "); want_type[f[1]] = f[2]; want_bind[f[1]] = f[3]; n++
        }
    }
    { type[$1] = $2; bind[$1] = $3; vis[$1] = $4; addr[$1] = $5 }
    END {
        for (s in want_type) {
            if (!(s in type)) { print "missing: " s " (" want_bind[s] " " want_type[s] ")"; continue }
            if (vis[s] != "DEFAULT") print "visibility: " s " is " vis[s] ", expected DEFAULT"
            if (bind[s] != want_bind[s]) print "binding: " s " is " bind[s] ", expected " want_bind[s]
            if (type[s] != want_type[s]) print "type: " s " is " type[s] ", expected " want_type[s]
        }
        for (s in type) {
            if (s ~ /^(nccl|pnccl|mscc|pmscc|braid[A-Z])/) {
                if (s ~ /^p(nccl|mscc)/ && (substr(s, 2) in type) && addr[s] != addr[substr(s, 2)])
                    print "alias: " s " is not at the address of " substr(s, 2)
                continue
            }
            if (s ~ /^(_init|_fini|_edata|_end|__bss_start)$/) continue
            print "leaked: " s " (" bind[s] " " type[s] ") is exported but is not API"
        }
    }' "$tmp/lib" | sort >"$tmp/problems"

nreq=$(wc -l <"$tmp/req")
nlib=$(wc -l <"$tmp/lib")
if [ -s "$tmp/problems" ]; then
    cat "$tmp/problems"
    echo "check_symbols: FAIL: $(wc -l <"$tmp/problems") problem(s) in $lib" \
         "($nlib exported symbols; $nreq required, from $ref)"
    exit 1
fi
echo "check_symbols: PASS: $lib exports all $nreq required symbols with NCCL's bindings" \
     "and nothing else outside the API ($nlib exported symbols)"

status=0
libdir=${BRAID_LIBDIR:-$(dirname "$lib")/braid}
cut -d' ' -f1-4 "$tmp/lib" >"$tmp/names"
for name in libnccl.so.2 librccl.so.1; do
    f=$libdir/$name
    if [ ! -e "$f" ]; then
        [ -z "${BRAID_LIBDIR:-}" ] && continue
        echo "check_symbols: FAIL: $f is not there (BRAID_LIBDIR names that folder)"
        status=1
        continue
    fi
    problems=
    dyn=$(LC_ALL=C "$readelf" -d "$f")
    case $dyn in *"(SONAME)"*"[$name]"*) ;; *) problems="$problems; its soname is not $name" ;; esac
    case $dyn in
    *"(FILTER)"*"[libbraid.so.0]"*) ;;
    *) problems="$problems; it is not a filter on libbraid.so.0" ;;
    esac
    dynsyms "$f" >"$tmp/filter"
    cut -d' ' -f1-4 "$tmp/filter" | diff "$tmp/names" - >"$tmp/diff" ||
        problems="$problems; its names differ from $lib's (< $lib, > $name): $(tr '\n' ' ' <"$tmp/diff")"
    twins=$(awk '{ addr[$1] = $5 }
                 END { for (s in addr) if (s ~ /^p(nccl|mscc)/ && (substr(s, 2) in addr) &&
                                           addr[s] != addr[substr(s, 2)]) print s }' "$tmp/filter")
    [ -z "$twins" ] || problems="$problems; not at their twins' addresses: $twins"
    if [ -n "$problems" ]; then
        echo "check_symbols: FAIL: $f: ${problems#; }"
        status=1
    else
        echo "check_symbols: PASS: $f: soname $name, a filter on libbraid.so.0 with its names"
    fi
done
exit $status
