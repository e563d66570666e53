#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
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

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build

bench_services
bench_gateway

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
status=0
for i in $(seq "$runs"); do
  echo "--- run $i"
  python3 bench/sem_bench.py --url "http://127.0.0.1:$http_port" "$@" || status=1
done
exit "$status"
