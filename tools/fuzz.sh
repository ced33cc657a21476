#!/bin/bash
# Builds the libFuzzer targets (tests/fuzz) in a clang tree of their own and
# runs each for SECONDS from its seed corpus (tests/fuzz/corpus/TARGET, read,
# never written: new inputs go to a scratch corpus). Exit 1 when a target
# crashed, leaked, hung (a run longer than 10 s) or broke a sanitizer's rule;
# the input that did it is kept in OUT and named on stderr.
#
# usage: tools/fuzz.sh [--seconds N] [--build DIR] [--out DIR] [TARGET...]
#   defaults: 30 s each, build-fuzz/, OUT = the build dir's findings/
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=30 build=build-fuzz out=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(http2_stream hpack http1_stream llm_api h2_redactor ring_record client_hello policy checkpoint bundle control forward elf dns collect)
out=${out:-$build/findings}
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLIGHTREC_FUZZ=ON > "$build.cmake.log" 2>&1 ||
  { cat "$build.cmake.log" >&2; exit 1; }
cmake --build "$build" -j2 --target $(printf 'fuzz_%s ' "${targets[@]}") > "$build.build.log" 2>&1 ||
  { tail -40 "$build.build.log" >&2; exit 1; }
mkdir -p "$out"
failed=0
for t in "${targets[@]}"; do
  scratch=$(mktemp -d)
  # -rss_limit_mb: what one input may make the parser hold; -timeout: a hang.
  if "$build/tests/fuzz/fuzz_$t" "$scratch" "tests/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -max_len=262144 -artifact_prefix="$out/$t-" -print_final_stats=1 > "$out/$t.log" 2>&1; then
    echo "fuzz_$t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$') runs in ${seconds} s, no finding"
  else
    echo "fuzz_$t: FAILED, see $out/$t.log and $out/$t-*" >&2
    grep -m5 -E "ERROR|SUMMARY|runtime error" "$out/$t.log" >&2 || true
    failed=1
  fi
  rm -rf "$scratch"
done
exit $failed
