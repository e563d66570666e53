#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/auth.sh - what API keys cost: lock acquire+release pairs per second
# through two gateways on the same Redis and Postgres, one with auth off and
# one with auth required (10 keys configured, each call presenting one), in
# one run on one machine. Runs alternate within a cell (and which side goes
# first alternates by round); the table shows the medians and the difference.
#
#   bench/auth.sh                        # 3 rounds of 5 s per cell and side
#   DURATION=10 ROUNDS=5 bench/auth.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
rounds="${ROUNDS:-3}"
datadir=".data/bench-auth"
redis_port="${BENCH_REDIS_PORT:-17381}"
pg_port="${BENCH_PG_PORT:-17434}"
http_port="${BENCH_HTTP_PORT:-18482}"
auth_port=$((http_port + 1))
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build
cc -O2 -D_GNU_SOURCE -o "$build/http_pairs" bench/http_pairs.c -lpthread
# shellcheck disable=SC2046 # pkg-config prints several flags
cc -O2 -D_GNU_SOURCE -Isrc -o "$build/auth_check" bench/auth_check.c src/auth/keys.c \
  src/auth/scope.c src/util/published.c src/util/error.c \
  $(pkg-config --cflags --libs jansson libcrypto) -lpthread

bench_services
bench_gateway
off_pid=$bench_gateway_pid

# Ten keys, as a deployment would have; the benchmark presents the last one.
key="fgk_bench_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
{
  echo "["
  for i in $(seq 9); do
    printf '{"id": "other-%d", "sha256": "%s", "scopes": ["lock:other-%d:*"]},\n' "$i" \
      "$(printf 'other-key-%d' "$i" | sha256sum | cut -d' ' -f1)" "$i"
  done
  printf '{"id": "bench", "sha256": "%s", "scopes": ["lock:bench-*"]}\n]\n' \
    "$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)"
} >"$datadir/keys.json"
http_port=$auth_port bench_gateway FENCEGATE_AUTH_MODE=required \
  FENCEGATE_AUTH_KEYS_FILE="$datadir/keys.json"
on_pid=$bench_gateway_pid
trap 'kill "$off_pid" "$on_pid" 2>/dev/null; wait 2>/dev/null; bench_cleanup' EXIT

echo "| connections | auth off pairs/s | auth required pairs/s | difference |"
echo "|---|---|---|---|"
for conns in 1 16; do
  off_runs=()
  on_runs=()
  run_off() { "$build/http_pairs" "$http_port" "$conns" "$duration" distinct "bench-off-$conns-$1"; }
  run_on() {
    BENCH_KEY="$key" "$build/http_pairs" "$auth_port" "$conns" "$duration" distinct \
      "bench-on-$conns-$1"
  }
  for round in $(seq "$rounds"); do
    # Which side goes first alternates, so a drift in the machine's load favours neither.
    if ((round % 2)); then
      off_runs+=("$(run_off "$round" | awk '{print $1}')")
      on_runs+=("$(run_on "$round" | awk '{print $1}')")
    else
      on_runs+=("$(run_on "$round" | awk '{print $1}')")
      off_runs+=("$(run_off "$round" | awk '{print $1}')")
    fi
  done
  off=$(printf '%s\n' "${off_runs[@]}" | median)
  on=$(printf '%s\n' "${on_runs[@]}" | median)
  diff=$(awk -v a="$off" -v b="$on" 'BEGIN { printf "%+.1f %%", (b - a) * 100 / a }')
  echo "| $conns | $off | $on | $diff |"
done
echo
for n in 1 10 100; do
  echo "key check alone: $("$build/auth_check" "$n" 200000)"
done
