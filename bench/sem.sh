#!/usr/bin/env bash
# bench/sem.sh - the classic distributed-semaphore scenario against a Release gateway:
# 3 client processes x 10 workers over keep-alive HTTP, limit 5, 600 jobs holding a slot for 20 ms
# (bench/sem_bench.py does the work and the arithmetic; see its docstring). Starts its own Redis and
# Postgres (.data/bench-sem) and gateway, runs the scenario RUNS times (default 3), stops everything.
#
#   bench/sem.sh              # 3 runs
#   RUNS=5 bench/sem.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

runs="${RUNS:-3}"
datadir=".data/bench-sem"
redis_port="${REDIS_PORT:-17380}"
pg_port="${PG_PORT:-17433}"
http_port="${HTTP_PORT:-18481}"
build="build-bench-sem"

bash scripts/deps.sh bench
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFG_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null

bash scripts/services.sh wipe "$datadir" "$redis_port" "$pg_port" >/dev/null
bash scripts/services.sh start "$datadir" "$redis_port" "$pg_port" >/dev/null
gateway_pid=""
cleanup() {
  [[ -n "$gateway_pid" ]] && kill "$gateway_pid" 2>/dev/null && wait "$gateway_pid" 2>/dev/null
  bash scripts/services.sh stop "$datadir" "$redis_port" "$pg_port" >/dev/null || true
}
trap cleanup EXIT

FENCEGATE_LISTEN="127.0.0.1:$http_port" \
FENCEGATE_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
FENCEGATE_PG_DSN="postgresql://fencegate@127.0.0.1:$pg_port/fencegate" \
FENCEGATE_LOG_LEVEL=warn \
  "$build/fencegate" 2>"$datadir/gateway.log" &
gateway_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null && break
  sleep 0.1
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
status=0
for i in $(seq "$runs"); do
  echo "--- run $i"
  python3 bench/sem_bench.py --url "http://127.0.0.1:$http_port" "$@" || status=1
done
exit "$status"
