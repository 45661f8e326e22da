#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a while.
#   Fuzz/run.sh [seconds-per-target]          (default 60)
#   FUZZ_RUNS=10000000 Fuzz/run.sh            (a fixed number of executions instead)
# Each target is compiled by swiftc straight from the pure module's sources (OutboxFormat,
# HTTPWire), so there is no nested package whose path depends on the checkout's folder name.
# Crashes land in Fuzz/artifacts/; turn each into a regression test and, for logs, a fixture.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
export PATH="/opt/swift/usr/bin:$PATH"
export SWIFT_BACKTRACE=enable=no   # let libFuzzer write the crash file
seconds="${1:-60}"
build="$here/.build"
mkdir -p "$build" "$here/artifacts"

build_target() {  # name, source dir, target file
  # The linker warns about ASan's local symbols on every build; show its output only on failure.
  if ! swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name "$(echo "$1" | tr -d -)" \
      "$root/Sources/$2"/*.swift "$here/Targets/$3" -o "$build/$1" >"$build/$1.build.log" 2>&1; then
    grep -v 'Cannot export local symbol' "$build/$1.build.log"; exit 1
  fi
}

seed_corpora() {
  mkdir -p "$build/corpus-log" "$build/corpus-http"
  for f in "$root"/Fixtures/*/turns.jsonl; do
    name=$(basename "$(dirname "$f")")
    # Seeds stay small: the fuzzer mutates them, the 1 MiB fixture would only slow it down.
    head -c 8192 "$f" > "$build/corpus-log/$name"
  done
  printf 'GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n' > "$build/corpus-http/get"
  printf 'POST /api/conversations/c1/turns HTTP/1.1\r\nHost: x\r\nIdempotency-Key: t1\r\nContent-Length: 11\r\n\r\n{"text":""}' > "$build/corpus-http/post"
  printf 'PUT /api/blobs/ab HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.0\r\n\r\n' > "$build/corpus-http/chunked-pipelined"
  printf 'POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc' > "$build/corpus-http/expect"
}

build_target fuzz-log OutboxFormat FuzzLog.swift
build_target fuzz-http HTTPWire FuzzHTTP.swift
seed_corpora

limit=(-max_total_time="$seconds")
[ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
for t in fuzz-log fuzz-http; do
  corpus="$build/corpus-${t#fuzz-}"
  echo "== $t (${limit[*]})"
  set +e
  "$build/$t" "${limit[@]}" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$here/artifacts/$t-" -print_final_stats=1 "$corpus" >"$build/$t.log" 2>&1
  status=$?
  set -e
  grep -E '^(stat::number_of_executed_units|stat::peak_rss|==[0-9]+== ?ERROR|SUMMARY|Fatal error|.*[Pp]recondition)' "$build/$t.log" || true
  if [ "$status" -ne 0 ]; then
    echo "$t found a crash (exit $status); input saved under $here/artifacts:"
    ls -1 "$here/artifacts" | grep "^$t-" | tail -n 3
    exit 1
  fi
done
echo "fuzz: both targets ran clean"
