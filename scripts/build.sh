#!/bin/sh
# Configure and build braid out of tree: scripts/build.sh BUILD_DIR [configure options...]
# (scripts/build.sh --help says more). A build directory configured before is configured
# again only when the options differ from the ones its config.status recorded.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    cat <<EOF
usage: scripts/build.sh BUILD_DIR [CONFIGURE_OPTION...]

Builds braid from $src in BUILD_DIR (created if missing):
  1. runs 'autoreconf -fi' in the checkout if it has no configure script (a fresh clone:
     configure is generated, not kept in git);
  2. runs configure in BUILD_DIR with --enable-werror and the options given, unless
     BUILD_DIR was already configured with exactly these options (and the same CC,
     CFLAGS, PKG_CONFIG_PATH, ... in the environment); other options configure it again;
  3. runs make -j$(nproc).

Configure options pass through, for example:
  --prefix=DIR               where 'make -C BUILD_DIR install' puts braid (default /usr/local)
  --enable-sanitizers        build with AddressSanitizer and UBSan
  --enable-tsan              build with ThreadSanitizer (not with --enable-sanitizers; leaves
                             out UCX, whose memory hooks crash it)
  --without-ucx, --without-ofi   leave out a network provider
  CC=clang CFLAGS='-O0 -g'   compiler and flags
'$src/configure --help' lists them all (after step 1).

Examples:
  scripts/build.sh build
  scripts/build.sh build --prefix=\$HOME/braid && make -C build install
EOF
}

# configure's precious variables (CC, CFLAGS, PKG_CONFIG_PATH, ...), one per line
precious_vars() {
    sed -n "/^ *ac_precious_vars='/,/'\$/{s/^ *ac_precious_vars='//;s/'\$//;p;}" \
        "$src/configure"
}

# What config.status --config will print for configure run with "$@", one word per line:
# the options, then each precious variable set in the environment but not as an option.
wanted_config() {
    printf '%s\n' "$@"
    for v in $(precious_vars); do
        eval "[ -n \"\${$v+set}\" ]" || continue
        for a in "$@"; do
            case $a in "$v="*) continue 2 ;; esac
        done
        eval "printf '%s\n' \"$v=\$$v\""
    done
}

# The words BUILD_DIR's config.status recorded, one per line (it prints them shell-quoted).
recorded_config() {
    cfg=$(./config.status --config) || return 1
    eval "printf '%s\n' $cfg"
}

for a in "$@"; do
    case $a in -h | --help) usage; exit 0 ;; esac
done
case ${1:-} in
'') usage >&2; exit 2 ;;
-*) echo "build.sh: the first argument is the build directory, not \"$1\" (see --help)" >&2
    exit 2 ;;
esac
build=$1
shift

[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi)
mkdir -p "$build"
cd "$build"
if [ -f Makefile ] && [ -x config.status ]; then
    want=$(wanted_config --enable-werror "$@")
    had=$(recorded_config) || had="(config.status --config failed)"
    if [ "$want" != "$had" ]; then
        echo "build.sh: $build was configured with: $(printf "%s" "$had" | tr '\n' ' ')"
        echo "build.sh: configuring it again with: $(printf "%s" "$want" | tr '\n' ' ')"
        "$src/configure" --enable-werror "$@"
    fi
else
    "$src/configure" --enable-werror "$@"
fi
make -j"$(nproc)"
