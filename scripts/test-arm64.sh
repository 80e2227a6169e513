#!/usr/bin/env bash
# The native core cross-compiled for arm64 (aarch64), its C tests run under
# qemu-user: `make test-arm64`, part of `make test`.  Where a tool is
# missing it says SKIP with the reason and succeeds; scripts/setup-system.sh
# installs them all on Debian.
#
# Usage: scripts/test-arm64.sh [BUILD_DIR]   (default build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-arm64}
cross=scripts/cross/aarch64-linux-gnu.ini

skip() {
  echo "test-arm64: SKIP: $*"
  exit 0
}

case "$(uname -m)" in
  aarch64 | arm64) skip "this machine is arm64 itself: the native build (make test-c) is the arm64 build" ;;
esac
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 ||
  skip "no cross compiler aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu)"
[ -e /usr/aarch64-linux-gnu/lib/crt1.o ] ||
  skip "no arm64 C library to link with (Debian: libc6-dev-arm64-cross)"
command -v qemu-aarch64 >/dev/null 2>&1 || skip "no qemu-aarch64 to run the tests (Debian: qemu-user)"
[ -e /lib/ld-linux-aarch64.so.1 ] ||
  skip "no arm64 C library for the emulated tests to load (Debian: libc6:arm64)"
[ -e /usr/lib/aarch64-linux-gnu/libseccomp.a ] ||
  skip "no static arm64 libseccomp for the seccomp mechanism (Debian: libseccomp-dev:arm64)"

# A configured build directory regenerates itself when meson.build or the
# cross file changes; only a missing one is set up here.
if [ ! -f "$build/build.ninja" ]; then
  meson setup --cross-file "$cross" "$build" >/dev/null
fi
ninja -C "$build"
echo "test-arm64: the aarch64 build's C tests under qemu-user: they check function only;" \
  "a time they print is the emulator's, never a timing of arm64"
# Emulation runs the tests several times slower: their meson time-outs
# (hang guards) ARM64_TIME_SCALE times longer, times ISOB_TIME_SCALE
# (both from the Makefile).
meson test -C "$build" --print-errorlogs \
  -t "$(awk "BEGIN { print ${ARM64_TIME_SCALE:-4} * ${ISOB_TIME_SCALE:-1} }")"
