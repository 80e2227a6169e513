#!/usr/bin/env bash
# Build the protocol fuzzer with clang (libFuzzer, ASan, UBSan) and run it.
#
#   tests/fuzz/run.sh [SECONDS]     default 10; `make test` runs it briefly,
#                                   run it longer on demand
#
# Exit 0 when no input failed, 1 when one did (the input is kept in
# $ISOB_FUZZ_DIR, default build/fuzz), 77 (SKIP) when clang or its libFuzzer
# runtime is missing (Debian: libclang-rt-14-dev, or the one matching clang).
set -euo pipefail

SECONDS_TO_RUN="${1:-10}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${ISOB_FUZZ_DIR:-$ROOT/build/fuzz}"
CLANG="${CLANG:-clang}"

case "$SECONDS_TO_RUN" in
  ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

if ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "SKIP: $CLANG not found (the fuzzer needs clang with libFuzzer)"
  exit 77
fi

mkdir -p "$OUT/corpus" "$OUT/artifacts"

# Probe for the libFuzzer runtime with an empty target: clang without it
# fails at link time, which is a missing package, not a failure of ours.
probe="$OUT/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$probe" -o "$OUT/probe" 2>"$OUT/probe.log"; then
  echo "SKIP: $CLANG cannot link -fsanitize=fuzzer (libFuzzer runtime missing;" \
       "on Debian install libclang-rt-14-dev): $(head -c 300 "$OUT/probe.log")"
  exit 77
fi

# The code under test, compiled here with the sanitizers: the connection
# state machine, the parser, the executor, the direct mechanism and the
# trusted component it calls (with the work entries and the native host
# calls they make).
cat >"$OUT/isob_config.h" <<'H'
#define ISOB_VERSION "fuzz"
#define ISOB_CC "clang"
#define ISOB_CFLAGS "fuzz"
H
"$CLANG" -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$ROOT/include" -I"$OUT" \
  "$HERE/fuzz_proto.c" \
  "$ROOT/src/serve/proto.c" "$ROOT/src/serve/exec.c" "$ROOT/src/serve/conn.c" \
  "$ROOT/src/serve/http.c" \
  "$ROOT/src/mechanisms/direct.c" "$ROOT/src/mechanisms/common.c" \
  "$ROOT/src/mechanisms/server_close.c" "$ROOT/src/osprobe/tracer.c" \
  "$ROOT/src/harness/pin.c" "$ROOT/src/trusted/trusted.c" "$ROOT/src/trusted/work.c" \
  "$ROOT/src/mechanisms/host.c" \
  -o "$OUT/fuzz_proto"

# Seeds: the checked-in corpus (one input per command and error, and the
# streaming, back-pressure, cap and eviction cases), so the run starts deep.
# What the fuzzer adds stays in $OUT/corpus for the next run.
cp -n "$HERE"/corpus/* "$OUT/corpus/"

cd "$OUT"
set +e
./fuzz_proto -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
  -print_final_stats=1 -artifact_prefix="$OUT/artifacts/" "$OUT/corpus" 2>"$OUT/fuzz.log"
rc=$?
set -e
tail -n 15 "$OUT/fuzz.log"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: the fuzzer found an input that fails (exit $rc); see $OUT/artifacts and $OUT/fuzz.log"
  exit 1
fi
echo "ok: ${SECONDS_TO_RUN}s of fuzzing found nothing"
