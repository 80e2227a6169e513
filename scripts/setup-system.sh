#!/usr/bin/env bash
# Install the system packages isobench needs, where they are missing.
# Idempotent: does nothing (and needs no network) when all are present.
# Run as root on Debian or Ubuntu; elsewhere it says what to install.
set -euo pipefail

# command-or-file -> Debian package that provides it
declare -A NEED=(
  [meson]=meson
  [ninja]=ninja-build
  [pkg-config]=pkg-config
  [cc]=gcc
)

missing=()
for cmd in "${!NEED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
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
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${missing[*]}"
