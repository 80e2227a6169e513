#!/usr/bin/env bash
# oslat's primitives against `perf bench`, in one run, everything pinned to
# one CPU: oslat's null syscall against `perf bench syscall basic`, oslat's
# pipe round trip (1 byte) against `perf bench sched pipe` (two processes,
# a 4-byte int).  The point is that oslat's measuring adds nothing: its
# time per operation should be within 1.1x (null syscall) and 1.15x (pipe)
# of perf's.
#
# perf reports the mean time per operation over its whole loop; the number
# of oslat's set beside it is its batched estimate ((t(2K) - t(K)) / K,
# which carries no reading cost), with the per-iteration median and mean
# (each less the empty region) shown too.  perf's mean includes every
# time the process was preempted, so on a loaded machine it runs high:
# the load average is printed with the result.  Rounds alternate the two
# tools so that drift over the run favours neither; the ratio is of the
# medians over rounds.
#
# Not part of `make test` or CI: it measures, and needs perf (Debian's
# linux-perf) and a quiet machine.
#
# usage: scripts/bench-oslat-vs-perf.sh [ROUNDS]     (env: CPU, ISOB)
set -euo pipefail

ROUNDS=${1:-3}
ISOB=${ISOB:-build/isob}
# The first CPU this script may run on, unless CPU names one.
CPU=${CPU:-$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')}
SYSCALL_LOOPS=10000000   # perf's default for syscall basic
PIPE_LOOPS=1000000       # perf's default for sched pipe

die() { echo "bench-oslat-vs-perf: error: $*" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a whole number >= 1, not '$ROUNDS'"
command -v perf >/dev/null || die "perf not found (Debian: apt-get install linux-perf)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
[ -x "$ISOB" ] || die "$ISOB not found: run make first"
perf bench syscall basic -l 1000 >/dev/null 2>&1 || die "perf bench syscall basic does not run here"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# usecs/op from perf bench's output.
perf_usecs() { awk '/usecs\/op/ { print $1; exit }'; }

for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="perf oslat"; else order="oslat perf"; fi
  for tool in $order; do
    if [ "$tool" = perf ]; then
      taskset -c "$CPU" perf bench syscall basic -l "$SYSCALL_LOOPS" | perf_usecs >> "$tmp/perf-syscall"
      taskset -c "$CPU" perf bench sched pipe -l "$PIPE_LOOPS" | perf_usecs >> "$tmp/perf-pipe"
    else
      taskset -c "$CPU" "$ISOB" oslat --cpu "$CPU" --placement same-cpu \
        --primitive null-syscall,pipe > "$tmp/oslat-$r.jsonl" || die "isob oslat failed (see $tmp)"
    fi
  done
done

python3 - "$tmp" "$ROUNDS" "$CPU" <<'EOF'
import json, statistics, sys
from pathlib import Path

tmp, rounds, cpu = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
perf = {k: [float(x) for x in (tmp / f"perf-{k}").read_text().split()] for k in ("syscall", "pipe")}
ours = {"syscall": [], "pipe": []}
med = {"syscall": [], "pipe": []}
mean = {"syscall": [], "pipe": []}
for r in range(1, rounds + 1):
    header = None
    for line in (tmp / f"oslat-{r}.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d["type"] == "header":
            header = d
            continue
        p = d["params"]
        key = {"null-syscall": "syscall", "pipe": "pipe"}.get(p.get("primitive"))
        if d["type"] != "result" or key is None or (key == "pipe" and not p.get("work", {}).get("msg_default")):
            continue
        if d["status"] != "ok":
            sys.exit(f"bench-oslat-vs-perf: oslat {p['primitive']} {d['status']}: {d['reason']}")
        # Ticks or cycles to microseconds: the TSC backend's ticks at tsc_hz.
        if d["unit"] == "ns":
            scale = 1e-3
        elif header and header.get("tsc_hz") and d["unit"] == "tsc_ticks":
            scale = 1e6 / header["tsc_hz"]
        else:
            sys.exit(f"bench-oslat-vs-perf: cannot convert {d['unit']} to microseconds")
        if d["batched"] is None:
            sys.exit(f"bench-oslat-vs-perf: oslat {p['primitive']} has no batched estimate")
        ours[key].append(d["batched"] * scale)
        med[key].append((statistics.median(d["samples"]) - d["empty_region"]) * scale)
        mean[key].append((statistics.fmean(d["samples"]) - d["empty_region"]) * scale)

targets = {"syscall": 1.10, "pipe": 1.15}
names = {"syscall": ("null syscall (getppid)", "perf bench syscall basic"),
         "pipe": ("pipe round trip (1 B)", "perf bench sched pipe")}
load = Path("/proc/loadavg").read_text().split()[:3]
print(f"pinned to CPU {cpu}, {rounds} rounds, load average {' '.join(load)}; "
      "microseconds per operation, median over rounds")
print(f"{'':24} {'perf':>10} {'oslat':>10} {'ratio':>7} {'target':>7}  "
      f"{'oslat median':>12} {'oslat mean':>10}")
fail = False
for k in ("syscall", "pipe"):
    pm, om, mm = statistics.median(perf[k]), statistics.median(ours[k]), statistics.median(med[k])
    am = statistics.median(mean[k])
    ratio = om / pm
    ok = ratio <= targets[k]
    fail |= not ok
    print(f"{names[k][0]:24} {pm:10.4f} {om:10.4f} {ratio:7.3f} {targets[k]:7.2f}  {mm:12.4f} {am:10.4f}"
          f"  {'within' if ok else 'OVER'}")
    print(f"{'':24} perf rounds {', '.join(f'{x:.4f}' for x in perf[k])}; "
          f"oslat rounds {', '.join(f'{x:.4f}' for x in ours[k])}")
sys.exit(1 if fail else 0)
EOF
