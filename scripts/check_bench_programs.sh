#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check_bench_programs.sh - the C programs of bench/ still build, warning-free, against the
# gateway's sources and generated script table of now: a benchmark whose client no longer compiles
# measures nothing. Builds each with bench/common.sh's bench_c_program, the way the benchmarks do, into
# a scratch folder, with -Wall -Wextra -Werror.
#
# Usage: check_bench_programs.sh BUILD_DIR   (a configured build: its generated/ is used)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
ln -s "$(cd "$1" && pwd)/generated" "$build/generated"
# shellcheck source=bench/common.sh
source bench/common.sh
export FG_BENCH_CFLAGS="-Wall -Wextra -Werror"
for program in bench/*.c; do
  name="$(basename "$program" .c)"
  bench_c_program "$name"
  echo "built $name"
done
