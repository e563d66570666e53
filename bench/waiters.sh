#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/waiters.sh - what parked waiters cost a Release gateway (bench/waiters.py does the work: memory
# per waiter, the busy-acquire latency with them queued, how fast they leave when their clients hang
# up). Starts its own Redis and Postgres (.data/bench-waiters) and gateway, with connection limits
# above WAITERS and the descriptor limit raised to the hard limit; stops everything at the end.
#
#   bench/waiters.sh                  # 10,000 waiters, the gateway's default connection buffer
#   BUFFER=2560 bench/waiters.sh      # limits.connection_buffer_bytes 2560
#   WARM=1 bench/waiters.sh           # each waiter's connection has served one request before
#   WAITERS=2000 RUNS=3 bench/waiters.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

waiters="${WAITERS:-10000}"
runs="${RUNS:-1}"
datadir=".data/bench-waiters"
redis_port="${REDIS_PORT:-17382}"  # the ports: REDIS_PORT, PG_PORT, HTTP_PORT
pg_port="${PG_PORT:-17435}"
http_port="${HTTP_PORT:-18483}"
build="build-bench-waiters"

# shellcheck source=bench/common.sh
source bench/common.sh
ulimit -n "$(ulimit -Hn)"
bench_build_or_given
bench_services

config="$datadir/waiters.json"
limit=$((waiters + 1000))
printf '{"limits": {"max_connections": %d, "max_connections_per_ip": %d%s}}\n' "$limit" "$limit" \
  "${BUFFER:+, \"connection_buffer_bytes\": $BUFFER}" >"$config"
bench_gateway FENCEGATE_CONFIG="$config"

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
for i in $(seq "$runs"); do
  echo "--- run $i"
  python3 bench/waiters.py --url "http://127.0.0.1:$http_port" --pid "$bench_gateway_pid" --waiters "$waiters" \
    ${WARM:+--warm}
done
