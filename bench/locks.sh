#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/locks.sh - lock acquire+release pairs per second over HTTP, next to the
# same pairs run directly against Redis with the gateway's own scripts (FCALL), in one
# run on one machine. Prints a Markdown table of both and their ratio.
#
#   bench/locks.sh                       # 3 rounds of 5 s per cell and side
#   DURATION=10 ROUNDS=5 bench/locks.sh
#   BENCH_REDIS_PORT=... BENCH_PG_PORT=... BENCH_HTTP_PORT=... bench/locks.sh   # other ports
#
# Both sides are driven by equally light C clients, one keep-alive connection
# per thread: bench/http_pairs.c over HTTP, bench/raw_pairs.c over RESP. Gateway
# and raw runs alternate within a cell; the table shows the medians, their ratio,
# and the median of the rounds' own ratios (each gateway run over the raw run
# after it), which the machine's drift from round to round moves less.
# Cells: 1, 16 and 64 connections, on distinct lock names (one per connection)
# and on one shared name (acquires queue with wait_ms; raw clients can only try
# once, so their "shared" figure counts successful pairs among busy retries).
# Reference line: redis-benchmark running the acquire script alone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
rounds="${ROUNDS:-3}"
datadir=".data/bench"
redis_port="${BENCH_REDIS_PORT:-17379}"
pg_port="${BENCH_PG_PORT:-17432}"
http_port="${BENCH_HTTP_PORT:-18480}"
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given
bench_pair_clients

bench_services
bench_gateway

rcli() { redis-cli -p "$redis_port" "$@"; }
# The raw client cannot reserve fences in Postgres (lua/lib_lease.lua), so the fence limit is put out
# of reach for both sides; that spares the gateway one Postgres round trip per 10,000 fences. First
# every HTTP thread makes its Redis connection: a connection made while the gateway's first fence
# recovery is under way deletes the limit again (lua/fence_check.lua), and the raw client would then
# stop at the recovered block's end with "nofence", counted as busy.
"$build/http_pairs" "$http_port" 64 1 distinct warm >/dev/null
rcli SET fg:fence_limit 1000000000000000 >/dev/null

echo "| connections | names | gateway pairs/s | raw scripts pairs/s | ratio | paired ratio |"
echo "|---|---|---|---|---|---|"
for conns in 1 16 64; do
  for mode in distinct shared; do
    gateway_runs=()
    raw_runs=()
    for round in $(seq "$rounds"); do
      gateway_runs+=("$("$build/http_pairs" "$http_port" "$conns" "$duration" "$mode" \
        "bench-$conns-$mode-$round" | awk '{print $1}')")
      raw_runs+=("$("$build/raw_pairs" "$redis_port" "$conns" "$duration" "$mode" |
        awk '{print $1}')")
    done
    gateway=$(printf '%s\n' "${gateway_runs[@]}" | median)
    raw=$(printf '%s\n' "${raw_runs[@]}" | median)
    ratio=$(awk -v g="$gateway" -v r="$raw" 'BEGIN { printf "%.2f", (r > 0 ? g / r : 0) }')
    # Each round's gateway run over the raw run right after it, then their median: the machine's
    # drift between rounds moves both sides of a pair alike.
    paired=$(for i in "${!gateway_runs[@]}"; do
      awk -v g="${gateway_runs[$i]}" -v r="${raw_runs[$i]}" 'BEGIN { print (r > 0 ? g / r : 0) }'
    done | median)
    echo "| $conns | $mode | $gateway | $raw | $ratio | $(printf '%.2f' "$paired") |"
  done
done

echo
echo "redis-benchmark, acquire script alone (fresh names, 64 connections):"
# The function, keys and arguments of the gateway's own uncontended acquire (raw_pairs prints them;
# its runs above loaded the function).
mapfile -t acquire_args < <("$build/raw_pairs" acquire-args b__rand_int__ l__rand_int__)
redis-benchmark -p "$redis_port" -c 64 -n 200000 -r 100000000 -q \
  FCALL "${acquire_args[@]}" | tr '\r' '\n' | tail -n 2
