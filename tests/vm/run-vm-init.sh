#!/bin/sh
# Run INIT as /init of a QEMU TCG guest booted on the Debian cloud kernel
# (fetched once into CACHE_DIR, as run-mpk.sh does, and shared with it), with
# FILES beside it in the initramfs root, and pass when the console shows
# "TAG pass".
#
# usage: run-vm-init.sh INIT CACHE_DIR TAG [FILE...]
#
# Exit 0 on "TAG pass", 1 on "TAG fail" or no verdict, 77 (a skip, for
# meson) when QEMU, cpio or the kernel cannot be had.
set -u

init=${1:?usage: run-vm-init.sh INIT CACHE_DIR TAG [FILE...]}
cache=${2:?usage: run-vm-init.sh INIT CACHE_DIR TAG [FILE...]}
tag=${3:?usage: run-vm-init.sh INIT CACHE_DIR TAG [FILE...]}
shift 3
# Seconds the guest may run: a hang guard only (about 11 s of an idle
# machine); ISOB_TIME_SCALE (Makefile) multiplies it.
VM_TIMEOUT_S=${ISOB_VM_TIMEOUT_S:-$(awk "BEGIN { print int(1200 * ${ISOB_TIME_SCALE:-1}) }")}
KERNEL_META=linux-image-cloud-amd64

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

command -v qemu-system-x86_64 >/dev/null 2>&1 ||
    skip "qemu-system-x86_64 not found (Debian: apt-get install qemu-system-x86)"
command -v cpio >/dev/null 2>&1 || skip "cpio not found (Debian: apt-get install cpio)"
[ -x "$init" ] || fail "no init binary at $init"
mkdir -p "$cache" || fail "cannot create $cache"
cache=$(cd "$cache" && pwd)
kdir=$cache/kernel

resolve_kernel() {
    apt-cache depends "$KERNEL_META" 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n 1
}

fetch_kernel() {
    command -v apt-get >/dev/null 2>&1 || return 1
    pkg=$(resolve_kernel)
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
[ -n "$vmlinuz" ] || skip "no vmlinuz in $kdir/boot"
echo "# kernel package: $(cat "$kdir/package" 2>/dev/null || basename "$vmlinuz")"

run=$(mktemp -d "$cache/run.XXXXXX") || fail "cannot create a run directory in $cache"
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/root/dev" "$run/root/proc" "$run/root/sys" && cp "$init" "$run/root/init" ||
    fail "cannot build the initramfs"
for f in "$@"; do
    cp "$f" "$run/root/" || fail "cannot copy $f into the initramfs"
done
(cd "$run/root" && find . | cpio -o -H newc --quiet) >"$run/initrd.cpio" ||
    fail "cannot build the initramfs"

timeout -k 5 "$VM_TIMEOUT_S" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1024 \
    -nographic -no-reboot -kernel "$vmlinuz" -initrd "$run/initrd.cpio" \
    -append "console=ttyS0 panic=-1 quiet" </dev/null >"$run/console.log" 2>&1
qemu_rc=$?
tr -d '\r' <"$run/console.log" >"$run/console.txt"
grep -a -E "^(ok |not ok |# |1\.\.|$tag)" "$run/console.txt"
result=$(grep -a "^$tag" "$run/console.txt" | tail -n 1)
case "$result" in
"$tag pass") echo "PASS"; exit 0 ;;
"$tag fail") fail "the guest's checks failed" ;;
esac
echo "# last lines of the console:"
tail -n 30 "$run/console.txt" | sed 's/^/#   /'
[ "$qemu_rc" = 124 ] && fail "the guest did not finish within $VM_TIMEOUT_S s"
fail "the guest printed no $tag line (qemu exit $qemu_rc)"
