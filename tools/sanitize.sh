#!/bin/bash
# Builds flightrec, flightrecd and the unit and runtime tests with
# AddressSanitizer and UndefinedBehaviorSanitizer (clang, a tree of its own)
# and runs the tests there. A leak, a sanitizer report or a failed check
# fails the run; the report is on stderr. The runtime tests need root and
# take longer than in the plain build (~2x).
#
# usage: tools/sanitize.sh [--build DIR] [--unit-only] [-- RUNTIME_TEST_ARGS...]
#   defaults: build-asan/ (FLIGHTREC_SANITIZE=ON); a FLIGHTREC_FUZZ tree
#   serves as well (ctest's unit-sanitized test uses the fuzz run's)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan unit_only=0
runtime_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --unit-only) unit_only=1; shift ;;
    --) shift; runtime_args=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLIGHTREC_SANITIZE=ON \
    > "$build.cmake.log" 2>&1 || { cat "$build.cmake.log" >&2; exit 1; }
fi
targets=(unit_tests)
[ $unit_only = 1 ] || targets+=(runtime_tests)
cmake --build "$build" -j2 --target "${targets[@]}" > "$build.build.log" 2>&1 ||
  { tail -40 "$build.build.log" >&2; exit 1; }
# Every report is fatal: a leak at exit (detect_leaks), UB (halt_on_error).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
"$build/tests/unit_tests"
[ $unit_only = 1 ] && exit 0
"$build/tests/runtime_tests" "${runtime_args[@]}"
