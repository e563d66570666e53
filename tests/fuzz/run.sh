#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fuzz/run.sh - builds the libFuzzer harness with clang (ASan+UBSan) and
# runs it for a bounded time over a scratch copy of the seed corpus, after
# replaying every regression input (crashes found earlier). Exits non-zero on
# any crash, leak or sanitizer report.
#   tests/fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-fuzz}"
seconds="${2:-30}"

CC=clang cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DFG_FUZZ=ON -DFG_SANITIZE=ON \
  -DFG_TESTS=OFF >/dev/null
cmake --build "$build" --target fuzz_request -j "$(nproc)" >/dev/null
fuzzer="$build/tests/fuzz/fuzz_request"

shopt -s nullglob
regressions=("$root"/tests/fuzz/regressions/*)
if ((${#regressions[@]} > 0)); then
  "$fuzzer" "${regressions[@]}"
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp "$root"/tests/fuzz/corpus/* "$scratch"/
"$fuzzer" -max_total_time="$seconds" -artifact_prefix="$build/" -print_final_stats=1 "$scratch"
echo "fuzz: no crash in ${seconds}s; to keep a crash as a regression, copy its artifact from $build to tests/fuzz/regressions/"
