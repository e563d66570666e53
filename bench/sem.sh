#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/sem.sh - the classic distributed-semaphore scenario against a Release gateway:
# 3 client processes x 10 workers over keep-alive HTTP, limit 5, 600 jobs holding a slot for 20 ms
# (bench/sem_bench.py does the work and the arithmetic; see its docstring). Starts its own Redis and
# Postgres (.data/bench-sem) and gateway, runs the scenario RUNS times (default 3), stops everything.
# After each run: the CPU per job of the gateway and Redis (/proc), and the client processes' CPU.
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

redis_pid=$(cat "$datadir/redis.pid")

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
status=0
TIMEFORMAT="%U %S"
for i in $(seq "$runs"); do
  echo "--- run $i"
  gateway_before=$(cpu_ticks "$bench_gateway_pid")
  redis_before=$(cpu_ticks "$redis_pid")
  { time python3 bench/sem_bench.py --url "http://127.0.0.1:$http_port" "$@" >"$datadir/run.out" \
      2>&1; } 2>"$datadir/run.cpu" || status=1
  cat "$datadir/run.out"
  read -r client_user client_sys <"$datadir/run.cpu"
  # CPU per job (each job is one slot turnover: a release, a grant and a queueing acquire) of the
  # gateway and Redis, from /proc; the client processes' whole CPU from the shell's `time` (their
  # start-up and the wait for the common start included: compare a run with --jobs 30).
  awk -v g=$(($(cpu_ticks "$bench_gateway_pid") - gateway_before)) \
    -v r=$(($(cpu_ticks "$redis_pid") - redis_before)) -v cu="$client_user" -v cs="$client_sys" \
    -v hz="$(getconf CLK_TCK)" -v jobs="$(sed -n 's/.*limit [0-9]*, \([0-9]*\) jobs.*/\1/p' "$datadir/run.out")" \
    'BEGIN { printf "CPU             gateway %.0f us per job, Redis %.0f us per job; clients %.2f s in all\n",
             g * 1e6 / hz / jobs, r * 1e6 / hz / jobs, cu + cs }'
done
exit "$status"
