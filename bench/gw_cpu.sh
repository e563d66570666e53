#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/gw_cpu.sh - the gateway's own CPU per request, two gateway binaries side by side: the
# before/after figure of a change to the request path, measured in the same minutes. Each round
# starts each binary in turn (the order alternates by round) on the same Redis and Postgres and
# drives it with the bench's C clients, one keep-alive connection per thread:
#   - lock pairs: bench/http_pairs.c, acquire then release, one lock name per connection;
#   - fenced writes: bench/pg_load.c, PATCH of a random row of a fence-column table.
# CPU is utime+stime of the gateway process and of Redis from /proc; sleeps and preemptions are the
# voluntary and nonvoluntary context switches of all the gateway's threads (/proc/PID/task/*/status);
# each is read around each timed window and divided by the requests answered in it (a pair is two
# requests). Prints one line per run and the medians.
#
#   bench/gw_cpu.sh BEFORE_BINARY AFTER_BINARY
#   ROUNDS=5 DURATION=4 CONNS=4 LOG_LEVEL=info HTTP_THREADS=4 bench/gw_cpu.sh a/fencegate b/fencegate
#
# Own services: .data/gw-cpu on ports 47379/47432 (BENCH_REDIS_PORT, BENCH_PG_PORT), HTTP 48480
# (BENCH_HTTP_PORT). Must not: build the binaries (give it two), or change a setting between sides.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

[[ $# -eq 2 ]] || { echo "usage: bench/gw_cpu.sh BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
names=(before after)
duration="${DURATION:-4}"
rounds="${ROUNDS:-3}"
conns="${CONNS:-4}"
level="${LOG_LEVEL:-info}"
threads="${HTTP_THREADS:-4}"
datadir=".data/gw-cpu"
redis_port="${BENCH_REDIS_PORT:-47379}"
pg_port="${BENCH_PG_PORT:-47432}"
http_port="${BENCH_HTTP_PORT:-48480}"
build="build-gw-cpu"
rows=1000

# shellcheck source=bench/common.sh
source bench/common.sh
bash scripts/deps.sh bench
mkdir -p "$build/before" "$build/after"
cp "$1" "$build/before/fencegate" # copied: a rebuild during the run does not change a side
cp "$2" "$build/after/fencegate"
bench_c_program http_pairs
bench_c_program pg_load
bench_pg_services

sql -c "CREATE TABLE bench_rows (id text PRIMARY KEY, n bigint, note text, lock_fence bigint);
        INSERT INTO bench_rows SELECT g::text, 0, '' FROM generate_series(0, $rows - 1) g;"
config="$datadir/gateway.json"
echo '{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"], "fence_column": "lock_fence"}}}' >"$config"

# Context switches of all the gateway's threads so far, of one kind ($2): voluntary (a thread went to
# sleep: for a request, a reply or a lock) or nonvoluntary (it was preempted).
switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null | awk -v k="$2_ctxt_switches:" '$1 == k {n += $2} END {print n}'
}

# Runs client command "$@" against the running gateway; prints "<ops/s> <gateway µs per request>
# <Redis µs per request> <gateway sleeps per request> <gateway preemptions per request>" with $per_op
# requests per operation.
measure() {
  local before redis_before sleeps_before preempted_before after redis_after sleeps_after
  local preempted_after out rate
  before=$(cpu_ticks "$bench_gateway_pid")
  redis_before=$(cpu_ticks "$redis_pid")
  sleeps_before=$(switches "$bench_gateway_pid" voluntary)
  preempted_before=$(switches "$bench_gateway_pid" nonvoluntary)
  out=$("$@")
  after=$(cpu_ticks "$bench_gateway_pid")
  redis_after=$(cpu_ticks "$redis_pid")
  sleeps_after=$(switches "$bench_gateway_pid" voluntary)
  preempted_after=$(switches "$bench_gateway_pid" nonvoluntary)
  rate=$(awk '{print ($1 == "WRITES" ? $2 : $1)}' <<<"$out")
  awk -v r="$rate" -v d="$duration" -v t=$((after - before)) -v rt=$((redis_after - redis_before)) \
    -v sl=$((sleeps_after - sleeps_before)) -v pr=$((preempted_after - preempted_before)) \
    -v hz="$(getconf CLK_TCK)" -v k="$per_op" \
    'BEGIN {n = r * d * k; if (n == 0) n = 1
            printf "%.0f %.1f %.1f %.2f %.2f\n", r, t / hz * 1e6 / n, rt / hz * 1e6 / n, sl / n, pr / n}'
}

run_side() { # index round
  build="build-gw-cpu/${names[$1]}"
  bench_gateway FENCEGATE_CONFIG="$config" FENCEGATE_HTTP_THREADS="$threads" FENCEGATE_LOG_LEVEL="$level"
  build="build-gw-cpu"
  local token
  token=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{"ttl_ms": 3600000}' \
    "http://127.0.0.1:$http_port/v1/locks/gw-cpu-pg-$2-$1/acquire" | jq -r .token)
  per_op=2
  local pairs writes
  pairs=$(measure "$build/http_pairs" "$http_port" "$conns" "$duration" distinct "gw-cpu-$2-$1")
  per_op=1
  writes=$(measure "$build/pg_load" "$http_port" "$conns" "$duration" distinct "$rows" "$token")
  kill "$bench_gateway_pid" && wait "$bench_gateway_pid" 2>/dev/null || true
  bench_gateway_pid=""
  echo "${names[$1]} $pairs $writes" | tee -a "$datadir/runs"
}

echo "load before: $(uptime)"
: >"$datadir/runs"
redis_pid=$(cat "$datadir/redis.pid")
echo "side pairs/s µs/request redis-µs/request sleeps/request preemptions/request PATCH/s µs/request" \
  "redis-µs/request sleeps/request preemptions/request"
for round in $(seq "$rounds"); do
  if ((round % 2)); then order=(0 1); else order=(1 0); fi
  for side in "${order[@]}"; do run_side "$side" "$round"; done
done
echo "load after: $(uptime)"
echo "| build | pairs/s | gateway µs/request | Redis µs/request | gateway sleeps/request |" \
  "gateway preemptions/request | PATCH/s | gateway µs/request | Redis µs/request |" \
  "gateway sleeps/request | gateway preemptions/request |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for name in "${names[@]}"; do
  cols=()
  for col in $(seq 2 11); do
    cols+=("$(awk -v n="$name" -v c="$col" '$1 == n {print $c}' "$datadir/runs" | median)")
  done
  printf '| %s ' "$name" "${cols[@]}"
  echo '|'
done
