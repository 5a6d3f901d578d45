#!/bin/sh
# Configure and build braid out of tree: scripts/build.sh BUILD_DIR [configure options...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$1
shift
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi)
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$src/configure" --enable-werror "$@"
make -j"$(nproc)"
