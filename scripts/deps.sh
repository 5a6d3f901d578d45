#!/bin/sh
# Install what building and testing braid needs on Debian 12 (run as root; a no-op when
# everything is there already).
set -eu
# hipcc, libamdhip64-dev and rocm-device-libs (Debian's ROCm 5.2) build the HIP kernels and
# test the run-time compile; they are large (an LLVM), hence --no-install-recommends below.
# clang and libclang-rt-dev (libFuzzer's runtime, only recommended by clang, so not installed
# under --no-install-recommends) build the fuzz harnesses (tests/fuzz/run.sh); libtsan2 is
# the ThreadSanitizer runtime of the --enable-tsan build (gcc's -dev package pulls it in
# today; named so that it stays).
pkgs="build-essential autoconf automake libtool pkg-config libcmocka-dev libfabric-dev libucx-dev
      libhwloc-dev iproute2 python3 hipcc libamdhip64-dev rocm-device-libs clang libclang-rt-dev
      libtsan2"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages:$missing; run as root or: apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends $missing
