#!/bin/sh
# Run the MPK test (mpk_init) as /init of a QEMU TCG guest.
#
# usage: run-mpk.sh MPK_INIT [CACHE_DIR [ISOB [LEAKY]]]
#
# QEMU's software emulator with `-cpu max` implements protection keys, which
# the machines isobench is developed on lack.  The guest kernel is a Debian
# cloud kernel, fetched once with apt-get into CACHE_DIR (default build/vm)
# and reused from there.  Exit 0 when every check passed, 1 when one failed
# or the guest gave no verdict, 77 (a skip, for meson) when QEMU or a kernel
# with pkeys cannot be had.  ISOB, a static isob, goes into the guest as
# /isob, where mpk_init runs `isob switch` on both mpk mechanisms; timings
# inside TCG mean nothing, so their medians are printed only as evidence
# that the benchmark runs, and labelled so.  LEAKY, mpk_init linked with the
# leaky window build, goes in as /mpk_init_leaky for the window checks.
set -u

init=${1:?usage: run-mpk.sh MPK_INIT [CACHE_DIR [ISOB [LEAKY]]]}
cache=${2:-build/vm}
isob=${3:-}
leaky=${4:-}
# Seconds the guest may run, only to turn a hung guest into a failure: the
# whole run took 253 s under TCG on a 2-vCPU machine at load 20, and 120 s
# was not enough there.  ISOB_TIME_SCALE (Makefile) multiplies it.
VM_TIMEOUT_S=${ISOB_VM_TIMEOUT_S:-$(awk "BEGIN { print int(1500 * ${ISOB_TIME_SCALE:-1}) }")}
# The Debian metapackage that names the current cloud kernel package.
KERNEL_META=linux-image-cloud-amd64
# The line mpk_init ends with: "MPK-VM-RESULT: N passed, M failed".
RESULT_TAG=MPK-VM-RESULT:

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

command -v qemu-system-x86_64 >/dev/null 2>&1 ||
    skip "qemu-system-x86_64 not found (Debian: apt-get install qemu-system-x86)"
command -v cpio >/dev/null 2>&1 || skip "cpio not found (Debian: apt-get install cpio)"
[ -x "$init" ] || fail "no test binary at $init"
[ -z "$isob" ] || [ -x "$isob" ] || fail "no isob binary at $isob"
[ -z "$leaky" ] || [ -x "$leaky" ] || fail "no leaky test binary at $leaky"
mkdir -p "$cache" || fail "cannot create $cache"
cache=$(cd "$cache" && pwd)
kdir=$cache/kernel

# The real kernel package behind the metapackage, e.g.
# linux-image-6.1.0-56-cloud-amd64; empty when apt knows none.
resolve_kernel() {
    apt-cache depends "$KERNEL_META" 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n 1
}

# Download the kernel package and keep only its /boot (the modules are not
# needed: the guest loads none).  Runs under a lock, as two test runs in one
# build tree may start at once.
fetch_kernel() {
    command -v apt-get >/dev/null 2>&1 || return 1
    pkg=$(resolve_kernel)
    if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
        apt-get update -qq >/dev/null 2>&1
        pkg=$(resolve_kernel)
    fi
    [ -n "$pkg" ] || { echo "# apt-cache knows no package behind $KERNEL_META"; return 1; }
    tmp=$(mktemp -d "$cache/fetch.XXXXXX") || return 1
    if ! (cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>&1); then
        echo "# apt-get download $pkg failed"
        rm -rf "$tmp"
        return 1
    fi
    deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
    mkdir -p "$tmp/x" &&
        dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" ./boot &&
        dpkg-deb -f "$deb" Package Version | tr '\n' ' ' | sed 's/Package: //; s/Version: //; s/ *$//' \
            >"$tmp/x/package" &&
        mv "$tmp/x" "$kdir"
    rc=$?
    rm -rf "$tmp"
    return $rc
}

if [ ! -d "$kdir" ]; then
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$cache/.lock"
        flock 9
    fi
    [ -d "$kdir" ] || fetch_kernel ||
        skip "no Debian cloud kernel ($KERNEL_META) could be downloaded"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -n 1)
config=$(ls "$kdir"/boot/config-* 2>/dev/null | head -n 1)
[ -n "$vmlinuz" ] || skip "no vmlinuz in $kdir/boot"
[ -n "$config" ] && grep -q '^CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS=y' "$config" ||
    skip "kernel $(basename "$vmlinuz") lacks CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS=y"
echo "# kernel package: $(cat "$kdir/package" 2>/dev/null || basename "$vmlinuz")"

run=$(mktemp -d "$cache/run.XXXXXX") || fail "cannot create a run directory in $cache"
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/root/dev" "$run/root/proc" "$run/root/sys" &&
    cp "$init" "$run/root/init" &&
    { [ -z "$isob" ] || cp "$isob" "$run/root/isob"; } &&
    { [ -z "$leaky" ] || cp "$leaky" "$run/root/mpk_init_leaky"; } &&
    (cd "$run/root" && find . | cpio -o -H newc --quiet) >"$run/initrd.cpio" ||
    fail "cannot build the initramfs"

timeout -k 5 "$VM_TIMEOUT_S" qemu-system-x86_64 -accel tcg -cpu max -m 512 \
    -nographic -no-reboot -kernel "$vmlinuz" -initrd "$run/initrd.cpio" \
    -append "console=ttyS0 panic=-1 quiet" </dev/null >"$run/console.log" 2>&1
qemu_rc=$?
tr -d '\r' <"$run/console.log" >"$run/console.txt"

# The guest's own lines, for the test log.
grep -a -E "^(ok |not ok |# |1\.\.|$RESULT_TAG)" "$run/console.txt"
result=$(grep -a "^$RESULT_TAG" "$run/console.txt" | tail -n 1)
if [ -z "$result" ]; then
    if grep -a -q '^# mpk unavailable: CPU has no PKU' "$run/console.txt"; then
        skip "this QEMU's -cpu max does not emulate PKU"
    fi
    echo "# last lines of the console:"
    tail -n 30 "$run/console.txt" | sed 's/^/#   /'
    [ "$qemu_rc" = 124 ] && fail "the guest did not finish within $VM_TIMEOUT_S s"
    fail "the guest printed no $RESULT_TAG line (qemu exit $qemu_rc)"
fi
set -- $result
passed=$2 failed=$4
if grep -a -q '^# mpk unavailable: CPU has no PKU' "$run/console.txt"; then
    skip "this QEMU's -cpu max does not emulate PKU"
fi
[ "$failed" = 0 ] && [ "$passed" -gt 0 ] || fail "$failed of $((passed + failed)) checks failed"
echo "PASS: $passed checks"
