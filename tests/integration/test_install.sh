#!/bin/sh
# shellcheck disable=SC2016   # lines for the README's shell are single-quoted on purpose
# The README's way from an installed braid to a program of one's own, run as it is written.
#
#     tests/integration/test_install.sh BUILD_DIR     (or BRAID_BUILD_DIR=BUILD_DIR)
#
# README.md marks its blocks with a comment line "<!-- test_install: NAME -->" before the
# fence: install.sh (build and install to a prefix), env.sh (the variables to set after
# install), prog.c (a two-rank all-reduce), run-*.sh (compile prog.c and start it with
# braidrun, one way per block) and output.txt (what each run prints, in any order).
#
# install.sh itself is not run: it is a second full build (the GPU kernels too), minutes
# on the CI machine. The test installs BUILD_DIR instead, with `make install
# DESTDIR=STAGE`, and points the README's prefix ($HOME/...) there: HOME is a scratch
# directory where that path is a link to STAGE's copy of the configured prefix, and
# PKG_CONFIG_SYSROOT_DIR=STAGE makes pkg-config answer with the staged paths. Then env.sh
# and each run-*.sh run verbatim in one sh, in a directory holding prog.c. Checks: the
# staged install has the files the README names; install.sh's --prefix is the prefix
# env.sh uses; prog.c compiles warning-free; each run exits 0 and prints output.txt;
# braidrun and libbraid.so.0 come from the prefix; a prog linked with -lnccl from
# $prefix/lib/braid needs libnccl.so.2 and gets the prefix's braid. In a sanitizer build
# the ASan runtime is preloaded into braidrun's ranks (the program is not built with it).
# Exit status: 0 all checks passed, 1 a check failed, 77 (automake SKIP) no C compiler or
# pkg-config, or a build with its own bindir/libdir/includedir, 99 setup error (no build,
# install failed).

BUILD_DIR=${1:-${BRAID_BUILD_DIR:-}}
SRC_DIR=${BRAID_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ -z "$BUILD_DIR" ] || [ ! -f "$BUILD_DIR/Makefile" ]; then
    echo "usage: $0 BUILD_DIR (or set BRAID_BUILD_DIR): a configured and built braid" >&2
    exit 99
fi
for tool in cc pkg-config; do
    command -v $tool >/dev/null 2>&1 && continue
    echo "SKIP: no $tool, which the README's commands use (scripts/deps.sh installs it)"
    exit 77
done
T="timeout 120"
. "$SRC_DIR/tests/integration/checks.sh"
STAGE=$TMP/stage WORK=$TMP/work HOME_DIR=$TMP/home
mkdir -p "$WORK" "$HOME_DIR" "$TMP/readme" || exit 99

# ---- the README's blocks ----

# Each fenced block after a "<!-- test_install: NAME -->" line into $TMP/readme/NAME.
awk -v dir="$TMP/readme" '
    /^<!-- test_install: [^ ]+ -->$/ { name = $3; next }
    name != "" && /^```/ { if (body) { name = ""; body = 0 } else body = 1; next }
    body { print > (dir "/" name) }
' "$SRC_DIR/README.md"
for f in install.sh env.sh prog.c output.txt; do
    [ -s "$TMP/readme/$f" ] || fail "README.md has no block marked test_install: $f"
done
ls "$TMP/readme"/run-*.sh >/dev/null 2>&1 ||
    fail "README.md has no block marked test_install: run-*.sh"
[ "$FAILS" -eq 0 ] || checks_end
echo "README blocks: $(cd "$TMP/readme" && echo *)"

# The prefix env.sh sets must be the one install.sh installs to.
want=$(sed -n 's/^prefix=//p' "$TMP/readme/env.sh")
got=$(sed -n 's/.*--prefix=\([^ ]*\).*/\1/p' "$TMP/readme/install.sh")
if [ -n "$want" ] && [ "$want" = "$got" ]; then
    pass "install.sh's --prefix is the prefix env.sh sets ($want; install.sh is not run)"
else
    fail "install.sh's --prefix is '$got' but env.sh sets prefix='$want'"
fi
case $want in
'$HOME/'*) PREFIX_DIR=$HOME_DIR/${want#'$HOME/'} ;;
*) fail "env.sh's prefix '$want' is not under \$HOME, where this test can put it"; checks_end ;;
esac

# ---- install ----

# The README's layout is PREFIX/bin, PREFIX/lib and PREFIX/include: a build configured with
# other directories cannot show it.
mk_var() {
    sed -n "s/^$1 = //p" "$BUILD_DIR/Makefile"
}
prefix=$(mk_var prefix)
if [ "$(mk_var exec_prefix)" != '${prefix}' ] ||
   [ "$(mk_var bindir)" != '${exec_prefix}/bin' ] ||
   [ "$(mk_var libdir)" != '${exec_prefix}/lib' ] ||
   [ "$(mk_var includedir)" != '${prefix}/include' ]; then
    echo "SKIP: $BUILD_DIR was configured with its own bindir, libdir or includedir; the"
    echo "README's commands assume PREFIX/bin, PREFIX/lib and PREFIX/include"
    exit 77
fi
# Not the outer make's flags (the jobserver, TESTS=...).
if ! (unset MAKEFLAGS MFLAGS MAKELEVEL
      $T make -C "$BUILD_DIR" install DESTDIR="$STAGE") \
        >"$TMP/install.log" 2>&1; then
    tail -n 30 "$TMP/install.log"
    echo "ERROR: make install DESTDIR=$STAGE failed in $BUILD_DIR (log above)"
    exit 99
fi
echo "installed $BUILD_DIR (prefix $prefix) into $STAGE"
mkdir -p "$(dirname "$PREFIX_DIR")" && ln -s "$STAGE$prefix" "$PREFIX_DIR" || exit 99
for f in bin/braidrun lib/libbraid.so.0 lib/braid/libnccl.so.2 lib/braid/librccl.so.1 \
         include/nccl.h include/nccl_device.h include/rccl/rccl.h include/braid.h \
         lib/pkgconfig/braid.pc lib/braid/emu/libcuda.so.1 lib/braid/emu/rocm5/libamdhip64.so.5 \
         lib/braid/emu/rocm6/libamdhip64.so.6 lib/braid/emu/rocm7/libamdhip64.so.7; do
    [ -e "$PREFIX_DIR/$f" ] || fail "make install did not install \$prefix/$f"
done
[ "$FAILS" -eq 0 ] && pass "make install puts what the README names in \$prefix"

# ---- the README's program ----

cp "$TMP/readme/prog.c" "$WORK/prog.c" || exit 99
sort "$TMP/readme/output.txt" >"$TMP/want"
# A script in the README's environment: HOME holds the prefix, no LD_LIBRARY_PATH of ours.
readme_sh() {
    (cd "$WORK" && unset LD_LIBRARY_PATH &&
     HOME=$HOME_DIR PKG_CONFIG_SYSROOT_DIR=$STAGE $T sh -eu "$@")
}
# the ASan runtime first in the ranks of a sanitizer build (prog is built without ASan)
preload=
if [ -n "${BRAID_TEST_PRELOAD:-}" ]; then
    preload='braidrun() {
        LD_PRELOAD="$BRAID_TEST_PRELOAD${LD_PRELOAD:+ $LD_PRELOAD}" command braidrun "$@"
    }'
fi
export BRAID_TEST_PRELOAD

printf '%s\n' '. ./env.sh' \
    'cc -std=c99 -Wall -Wextra -Werror -Wpedantic -c $(pkg-config --cflags braid) prog.c' \
    >"$WORK/warn.sh"
cp "$TMP/readme/env.sh" "$WORK/env.sh" || exit 99
if readme_sh warn.sh >"$TMP/out" 2>"$TMP/err"; then
    pass "prog.c compiles with -std=c99 -Wall -Wextra -Werror -Wpedantic"
else
    fail "prog.c does not compile warning-free against the installed nccl.h"
fi
printf '%s\n' '. ./env.sh' 'command -v braidrun' >"$WORK/which.sh"
got=$(readme_sh which.sh 2>&1)
if [ "$got" = "$PREFIX_DIR/bin/braidrun" ]; then
    pass "braidrun is the installed one ($got)"
else
    fail "after env.sh, braidrun is '$got', not \$prefix/bin/braidrun"
fi

# The prog a run built finds libbraid.so.0 in the prefix with no LD_LIBRARY_PATH.
check_rpath() {
    lib=$(cd "$WORK" && env -u LD_LIBRARY_PATH ldd ./prog 2>/dev/null |
          awk '$1 == "libbraid.so.0" { print $3 }')
    case $lib in
    "$STAGE$prefix"/lib/*) pass "$1: prog loads $lib through its rpath" ;;
    *) fail "$1: prog loads libbraid.so.0 from '$lib', not from the prefix" ;;
    esac
}

# The prog linked with -lnccl from lib/braid needs libnccl.so.2, as one linked with NVIDIA's
# does, and braid's filter of that name gives it libbraid.so.0 of the prefix.
check_nccl() {
    needed=$(readelf -d "$WORK/prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    case " $needed" in
    *" libnccl.so.2 "*) pass "$1: prog needs libnccl.so.2 ($needed)" ;;
    *) fail "$1: prog does not need libnccl.so.2 (it needs: $needed)" ;;
    esac
    libs=$(cd "$WORK" && LD_LIBRARY_PATH=$PREFIX_DIR/lib/braid ldd ./prog 2>/dev/null |
           awk '$1 ~ /^lib(nccl|braid)\.so/ { print $1, $3 }' | tr '\n' ' ')
    case $libs in
    *"libbraid.so.0 $PREFIX_DIR/lib/braid/../libbraid.so.0 "*"libnccl.so.2 $PREFIX_DIR/lib/braid/libnccl.so.2 "* | \
    *"libnccl.so.2 $PREFIX_DIR/lib/braid/libnccl.so.2 "*"libbraid.so.0 $PREFIX_DIR/lib/braid/../libbraid.so.0 "*)
        pass "$1: libnccl.so.2 and libbraid.so.0 load from the prefix" ;;
    *) fail "$1: the loader gives prog: $libs" ;;
    esac
}

# run-*.sh: the lines as the README prints them, after env.sh; prints output.txt
run_readme() {
    name=$1
    rm -f "$WORK/prog"
    { echo "$preload"; cat "$TMP/readme/env.sh" "$TMP/readme/$name"; } >"$WORK/$name"
    echo "running README's $name:"
    sed 's/^/    /' "$TMP/readme/$name"
    if ! readme_sh "$name" >"$TMP/out" 2>"$TMP/err"; then
        fail "$name: exit status not 0"
        return
    fi
    if sort "$TMP/out" | cmp -s - "$TMP/want"; then
        pass "$name: prints output.txt"
    else
        fail "$name: does not print output.txt ($(tr '\n' '|' <"$TMP/readme/output.txt"))"
    fi
    case $name in
    run-rpath*) check_rpath "$name" ;;
    run-nccl*) check_nccl "$name" ;;
    esac
}
for f in "$TMP/readme"/run-*.sh; do
    run_readme "${f##*/}"
done
checks_end
