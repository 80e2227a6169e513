#!/usr/bin/env bash
# Install the system packages isobench needs, where they are missing.
# Idempotent: does nothing (and needs no network) when all are present.
# Run as root on Debian or Ubuntu; elsewhere it says what to install.
#
# usage: setup-system.sh [--runtime | --test | --all]
#        setup-system.sh --list runtime|test
#
#   --runtime  what `make run` needs: the compiler and meson, the mechanisms'
#              build tools and libraries, memcached and its load generator
#   --test     what `make test` needs besides: emulators, the arm64 cross
#              compiler, the fuzzer's runtime, sshd, LaTeX, poppler
#   --all      both (the default, as for .ci/run)
#   --list     print a set's packages, one a line, and exit
#
# Nothing it installs starts a daemon: packages install under a policy-rc.d
# that refuses every service start, and the services of those that ship one
# (openssh-server, memcached) are disabled afterwards.  isobench starts its
# own memcached, and the tests their own sshd on loopback
# (tests/python/sshd_hosts.py); neither needs the system's.
set -euo pipefail

# A command on PATH, or an absolute file path -> the Debian package with it.
# Keep one line per need, with why it is needed.
declare -A RUNTIME=(
  [meson]=meson                               # native build
  [ninja]=ninja-build                         # native build
  [pkg-config]=pkg-config                     # native build: feature detection
  [cc]=gcc                                    # native build
  [clang]=clang                               # wasm mechanism: C -> wasm32
  [wasm-ld]=lld                               # wasm mechanism: linking wasm32
  [wasm2c]=wabt                               # wasm mechanism: wasm -> C
  [/usr/include/seccomp.h]=libseccomp-dev     # seccomp mechanism
  [/usr/include/tirpc/rpc/rpc.h]=libtirpc-dev # oslat: ONC RPC over UDP and TCP (glibc has none)
  [/usr/include/openssl/evp.h]=libssl-dev     # lwc-sign and the key-isolation tests: Ed25519 through libcrypto; serve --tls and tlsload: libssl
  [memcached]=memcached                       # kv-server benchmark: the reference server
  [memcaslap]=libmemcached-tools              # kv-server benchmark: the load generator
)

declare -A TEST=(
  [/usr/lib/clang/14/lib/linux/libclang_rt.fuzzer-x86_64.a]=libclang-rt-14-dev  # protocol fuzzer: libFuzzer runtime (a Recommends of clang)
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
  TEST+=(
    [aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu                 # arm64 build: the cross compiler
    [/usr/aarch64-linux-gnu/lib/crt1.o]=libc6-dev-arm64-cross     # arm64 build: the C library to link with (a Recommends of the compiler)
    [qemu-aarch64]=qemu-user                                      # arm64 tests: the user-mode emulator
    [/lib/ld-linux-aarch64.so.1]=libc6:arm64                      # arm64 tests: the C library the emulated programs load
    [/usr/lib/aarch64-linux-gnu/libseccomp.a]=libseccomp-dev:arm64  # arm64 build: the seccomp mechanism, linked statically
  )
fi

# Packages that ship a system service, and its units: installed, each is
# disabled (and stopped, should anything have started it).
declare -A SERVICES=(
  [openssh-server]="ssh.service ssh.socket"
  [memcached]="memcached.service"
)

# Where Debian's invoke-rc.d and deb-systemd-invoke look for the policy that
# may refuse a service start (policy-rc.d(8)), where systemd runs, and
# where SysV init scripts are.
POLICY_RC_D=${POLICY_RC_D:-/usr/sbin/policy-rc.d}
SYSTEMD_RUNNING_DIR=${SYSTEMD_RUNNING_DIR:-/run/systemd/system}
INIT_D=${INIT_D:-/etc/init.d}

# The policy in place while packages install: exit 101, "action forbidden",
# for every service and action.
POLICY_TEXT='#!/bin/sh
# isobench setup-system.sh: no service starts while packages install.
exit 101'

# Install the packages named, without starting or enabling any service.
# An existing policy-rc.d is put back as it was afterwards.
install_without_daemons() {
  local saved=""
  if [ -e "$POLICY_RC_D" ]; then
    saved=$(mktemp)
    cp -p "$POLICY_RC_D" "$saved"
  fi
  # shellcheck disable=SC2064  # the paths are fixed now, on purpose
  trap "restore_policy '$saved'" EXIT
  printf '%s\n' "$POLICY_TEXT" >"$POLICY_RC_D"
  chmod 755 "$POLICY_RC_D"
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  restore_policy "$saved"
  trap - EXIT
  local pkg unit
  for pkg in "$@"; do
    for unit in ${SERVICES[$pkg]:-}; do
      disable_service "$unit"
    done
  done
}

restore_policy() {
  if [ -n "$1" ]; then
    mv -f "$1" "$POLICY_RC_D"
  else
    rm -f "$POLICY_RC_D"
  fi
}

# Neither enabled at boot nor running: through systemd where it is the init
# (and its unit files where it is installed), else the SysV links.
disable_service() {
  local unit=$1
  if command -v systemctl >/dev/null 2>&1; then
    if [ -d "$SYSTEMD_RUNNING_DIR" ]; then
      systemctl disable --now --quiet "$unit" 2>/dev/null || true
    else
      systemctl disable --quiet "$unit" 2>/dev/null || true
    fi
  fi
  local name=${unit%.*}
  if [ -e "$INIT_D/$name" ] && command -v update-rc.d >/dev/null 2>&1; then
    update-rc.d "$name" disable >/dev/null 2>&1 || true
  fi
}

usage() {
  echo "usage: setup-system.sh [--runtime | --test | --all] | --list runtime|test" >&2
  exit 2
}

main() {
  local sets=()
  case "${1:---all}" in
    --runtime) sets=(RUNTIME) ;;
    --test) sets=(TEST) ;;
    --all) sets=(RUNTIME TEST) ;;
    --list)
      case "${2:-}" in
        runtime) printf '%s\n' "${RUNTIME[@]}" | sort ;;
        test) printf '%s\n' "${TEST[@]}" | sort ;;
        *) usage ;;
      esac
      return 0
      ;;
    *) usage ;;
  esac
  [ $# -le 1 ] || usage

  local missing=() set need
  for set in "${sets[@]}"; do
    local -n table=$set
    for need in "${!table[@]}"; do
      if [[ "$need" == /* ]]; then
        [ -e "$need" ] || missing+=("${table[$need]}")
      else
        command -v "$need" >/dev/null 2>&1 || missing+=("${table[$need]}")
      fi
    done
    unset -n table
  done

  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi

  echo "setup: missing system packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: error: install them with your package manager (needs root and apt-get here)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local pkg
  for pkg in "${missing[@]}"; do
    if [[ "$pkg" == *:arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
      dpkg --add-architecture arm64
    fi
  done
  apt-get update -qq
  install_without_daemons "${missing[@]}"
  echo "setup: installed ${missing[*]}"
}

# Sourced (tests/python/test_setup.py), it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
