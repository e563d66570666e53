#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/large_values.sh - what large fenced Redis values cost everybody else's calls (bench/large_values.py):
# 30 threads PUT, then GET, values of 60,000 and 30,000 bytes through one gateway while a probe does lock pairs
# through it and then through a second gateway on the same Redis, as fast as they can and then at 600 requests a
# second in all, and 64 threads GET 100-byte values (what Redis spends a small read); first a round without
# writers. ROUNDS rounds
# (default 2); with BEFORE and AFTER (two binaries) each round runs both in turn, the order alternating.
#
#   bench/large_values.sh
#   ROUNDS=3 BEFORE=a/fencegate AFTER=b/fencegate bench/large_values.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

rounds="${ROUNDS:-2}"
datadir=".data/bench-large"
redis_port="${BENCH_REDIS_PORT:-17388}"
pg_port="${BENCH_PG_PORT:-17447}"
http_port="${BENCH_HTTP_PORT:-18489}"
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
if bench_before_after bench/large_values.sh; then
  sides=("$BEFORE" "$AFTER")
else
  bench_build_or_given
  sides=("$build/fencegate")
fi
bench_services
printf '{"redis_prefixes": ["app:"]}\n' >"$datadir/large.json"

# One round of every load through binary $1.
measure() {
  build="$(dirname "$1")"
  bench_gateway FENCEGATE_CONFIG="$datadir/large.json"
  bench_second_gateway FENCEGATE_CONFIG="$datadir/large.json"
  local a="http://127.0.0.1:$http_port" b="http://127.0.0.1:$((http_port + 1))"
  echo "--- $1"
  python3 bench/large_values.py --a "$a" --b "$b" --writers 0
  for args in "--size 60000" "--size 60000 --get" "--size 30000 --get" "--size 60000 --rate 600" \
    "--size 60000 --get --rate 600" "--writers 64 --size 100 --get"; do
    # shellcheck disable=SC2086 # args are several words
    python3 bench/large_values.py --a "$a" --b "$b" --redis-port "$redis_port" $args
  done
  kill "$bench_gateway_pid" "$bench_gateway2_pid"
  wait "$bench_gateway_pid" "$bench_gateway2_pid" 2>/dev/null || true
  bench_gateway_pid="" bench_gateway2_pid=""
}

for round in $(seq "$rounds"); do
  echo "=== round $round"
  if ((${#sides[@]} == 2 && round % 2 == 0)); then
    measure "${sides[1]}"; measure "${sides[0]}"
  else
    for side in "${sides[@]}"; do measure "$side"; done
  fi
done
