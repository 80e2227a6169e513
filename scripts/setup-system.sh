#!/usr/bin/env bash
# Install the system packages isobench needs, where they are missing.
# Idempotent: does nothing (and needs no network) when all are present.
# Run as root on Debian or Ubuntu; elsewhere it says what to install.
set -euo pipefail

# A command on PATH, or an absolute file path -> the Debian package with it.
# Keep one line per need, with why it is needed.
declare -A NEED=(
  [meson]=meson                               # native build
  [ninja]=ninja-build                         # native build
  [pkg-config]=pkg-config                     # native build: feature detection
  [cc]=gcc                                    # native build
  [clang]=clang                               # wasm mechanism: C -> wasm32, fuzzers
  [wasm-ld]=lld                               # wasm mechanism: linking wasm32
  [/usr/lib/clang/14/lib/linux/libclang_rt.fuzzer-x86_64.a]=libclang-rt-14-dev  # protocol fuzzer: libFuzzer runtime (a Recommends of clang)
  [wasm2c]=wabt                               # wasm mechanism: wasm -> C
  [/usr/include/seccomp.h]=libseccomp-dev     # seccomp mechanism
  [/usr/include/tirpc/rpc/rpc.h]=libtirpc-dev # oslat: ONC RPC over UDP and TCP (glibc has none)
  [/usr/include/openssl/evp.h]=libssl-dev     # lwc-sign and the key-isolation tests: Ed25519 through libcrypto; serve --tls and tlsload: libssl
  [memcached]=memcached                       # kv-server benchmark: the reference server
  [memcaslap]=libmemcached-tools              # kv-server benchmark: the load generator
  [qemu-system-x86_64]=qemu-system-x86        # MPK tests under TCG emulation
  [cpio]=cpio                                 # MPK tests: the initramfs
  [ssh]=openssh-client                        # campaigns: Ansible reaches hosts over SSH
  [/usr/sbin/sshd]=openssh-server             # campaign tests: two real SSH hosts on loopback
  [pdflatex]=texlive-latex-base               # paper tests: the report's .tex tables compile
  [/usr/share/texlive/texmf-dist/tex/latex/booktabs/booktabs.sty]=texlive-latex-recommended  # paper tests: booktabs, which the .tex tables use
  [pdffonts]=poppler-utils                    # paper tests: every PDF of a report embeds TrueType fonts, no Type 3
)

# The arm64 build (make test-arm64) is cross-compiled on x86-64 hosts and
# its C tests run under qemu-user; its arm64 libraries come from Debian
# multiarch (dpkg --add-architecture arm64, done below when needed).
if [ "$(uname -m)" = x86_64 ]; then
  NEED+=(
    [aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu                 # arm64 build: the cross compiler
    [/usr/aarch64-linux-gnu/lib/crt1.o]=libc6-dev-arm64-cross     # arm64 build: the C library to link with (a Recommends of the compiler)
    [qemu-aarch64]=qemu-user                                      # arm64 tests: the user-mode emulator
    [/lib/ld-linux-aarch64.so.1]=libc6:arm64                      # arm64 tests: the C library the emulated programs load
    [/usr/lib/aarch64-linux-gnu/libseccomp.a]=libseccomp-dev:arm64  # arm64 build: the seccomp mechanism, linked statically
  )
fi

missing=()
for need in "${!NEED[@]}"; do
  if [[ "$need" == /* ]]; then
    [ -e "$need" ] || missing+=("${NEED[$need]}")
  else
    command -v "$need" >/dev/null 2>&1 || missing+=("${NEED[$need]}")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: missing system packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: error: install them with your package manager (needs root and apt-get here)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
for pkg in "${missing[@]}"; do
  if [[ "$pkg" == *:arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
done
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${missing[*]}"
