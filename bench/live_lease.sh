#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/live_lease.sh - what require_live_lease costs per write: fenced PATCHes over HTTP
# (bench/pg_load.c) to two tables that differ only in "require_live_lease", alternating
# between them in one run on one machine. Prints a Markdown table: writes/s and p99 of
# each, and the cost per write of the check (1/rate difference at 1 connection).
#
#   bench/live_lease.sh                 # 3 rounds of 5 s per cell and table
#   DURATION=10 ROUNDS=5 bench/live_lease.sh
#
# Cells: 1 and 8 connections on distinct rows (a random row of 10,000 per write). The
# gateway runs a Release build, log level warn, 8 HTTP threads and 8 Postgres
# connections. Own services: .data/live-bench on ports 21414/22414, HTTP 23414
# (REDIS_PORT, PG_PORT, HTTP_PORT override them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
rounds="${ROUNDS:-3}"
datadir=".data/live-bench"
redis_port="${REDIS_PORT:-21414}"
pg_port="${PG_PORT:-22414}"
http_port="${HTTP_PORT:-23414}"
build="build-live-bench"
rows=10000

# shellcheck source=bench/common.sh
source bench/common.sh
bench_pg_writes_setup

for t in bench_rows bench_live; do
  sql -c "CREATE TABLE $t (id text PRIMARY KEY, n bigint, note text) WITH (fillfactor = 80);
          INSERT INTO $t SELECT g::text, 0, '' FROM generate_series(0, $rows - 1) g;"
done
config="$datadir/gateway.json"
cat >"$config" <<JSON
{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"]},
            "bench_live": {"key": "id", "columns": ["n", "note"], "require_live_lease": true}}}
JSON

bench_gateway FENCEGATE_CONFIG="$config" FENCEGATE_HTTP_THREADS=8 FENCEGATE_PG_POOL_SIZE=8

token=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{"ttl_ms": 3600000}' \
  "http://127.0.0.1:$http_port/v1/locks/bench-live/acquire" | jq -r .token)

echo "| connections | plain writes/s | p99 ms | require_live_lease writes/s | p99 ms | ratio | check per write |"
echo "|---|---|---|---|---|---|---|"
for conns in 1 8; do
  plain_runs=() plain_p99=() live_runs=() live_p99=()
  for _ in $(seq "$rounds"); do
    for t in bench_rows bench_live; do
      out=$("$build/pg_load" "$http_port" "$conns" "$duration" distinct "$rows" "$token" "$t")
      bad=$(awk '{print $3 + $4}' <<<"$out")
      [[ "$bad" == 0 ]] || echo "live_lease: $bad failed requests on $t at $conns" >&2
      rate=$(awk '{print $2}' <<<"$out")
      p99=$(awk '{sub("p99_ms=", "", $5); print $5}' <<<"$out")
      if [[ "$t" == bench_rows ]]; then plain_runs+=("$rate") plain_p99+=("$p99")
      else live_runs+=("$rate") live_p99+=("$p99"); fi
    done
  done
  plain=$(printf '%s\n' "${plain_runs[@]}" | median)
  live=$(printf '%s\n' "${live_runs[@]}" | median)
  pp=$(printf '%s\n' "${plain_p99[@]}" | median)
  lp=$(printf '%s\n' "${live_p99[@]}" | median)
  ratio=$(awk -v a="$live" -v b="$plain" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
  cost=$(awk -v a="$live" -v b="$plain" -v c="$conns" \
    'BEGIN {printf "%.0f µs", (a > 0 && b > 0 ? (c / a - c / b) * 1e6 : 0)}')
  echo "| $conns | $plain | $pp | $live | $lp | $ratio | $cost |"
done
