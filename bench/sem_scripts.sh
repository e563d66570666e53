#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/sem_scripts.sh - what one semaphore script costs Redis in the seed scenario (3 processes x 10
# workers, limit 5, jobs of 20 ms: bench/sem_bench.py), two ways, in one run:
#
#  1. through the gateway: the scenario (JOBS jobs, default 600) against a Release gateway on its own
#     Redis and Postgres; INFO commandstats, reset just before, gives Redis's own time per script call
#     (usec_per_call of FCALL) and the commands the scripts ran per call.
#  2. exactly: the same scenario (CALLGRIND_JOBS jobs, default 150) against a second gateway whose
#     redis-server runs under callgrind, counting only inside luaCallFunction: instructions per script
#     call, which no load on the machine changes, and the functions that took the most of them
#     (callgrind_annotate).
#
#   bench/sem_scripts.sh
#   BUILD=<another Release build dir> bench/sem_scripts.sh   # that build's gateway, for before/after
# Ports: BENCH_REDIS_PORT, BENCH_PG_PORT, BENCH_HTTP_PORT (part 2 uses the Redis and HTTP ports + 1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

jobs="${JOBS:-600}"
callgrind_jobs="${CALLGRIND_JOBS:-150}"
datadir=".data/bench-sem-scripts"
redis_port="${BENCH_REDIS_PORT:-17386}"
pg_port="${BENCH_PG_PORT:-17439}"
http_port="${BENCH_HTTP_PORT:-18487}"
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given

bench_services
bench_gateway
# The scenario against the gateway on port $1 with $2 jobs; its figures as one JSON line (a missed
# target of its own is no failure here).
scenario() { python3 bench/sem_bench.py --url "http://127.0.0.1:$1" --jobs "$2" --json || true; }

rcli "$redis_port" CONFIG RESETSTAT >/dev/null
figures=$(scenario "$http_port" "$jobs")
calls=$(script_stat "$redis_port" calls)
usec=$(script_stat "$redis_port" usec)
inner=$(inner_calls "$redis_port")
echo "load: $(uptime | sed 's/.*load average: //')"
echo "seed scenario through the gateway, $jobs jobs: $figures"
awk -v c="$calls" -v u="$usec" -v i="$inner" \
  'BEGIN { printf "  %d script calls; Redis time per script (commandstats): %.1f us; commands per script: %.1f\n", c, u / c, i / c }'

cg_port=$((redis_port + 1))
cg_dir="$datadir/callgrind"
callgrind_redis "$cg_port" "$cg_dir"
kill "$bench_gateway_pid"
wait "$bench_gateway_pid" 2>/dev/null || true
http_port=$((http_port + 1))
bench_gateway_wait=600
redis_port_saved=$redis_port
redis_port=$cg_port
bench_gateway
redis_port=$redis_port_saved
rcli "$cg_port" CONFIG RESETSTAT >/dev/null
scenario "$http_port" "$callgrind_jobs" >/dev/null
kill "$bench_gateway_pid"
wait "$bench_gateway_pid" 2>/dev/null || true
bench_gateway_pid=""
echo -n "the scenario, $callgrind_jobs jobs, Redis under callgrind: "
callgrind_redis_report "$cg_port" "$cg_dir"
echo "  the functions that took the most instructions themselves (callgrind_annotate):"
callgrind_annotate "$cg_dir/out" 2>/dev/null | sed -n '/^Ir/,$p' | sed -n '3,17p' | cut -c1-150
