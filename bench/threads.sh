#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/threads.sh - how a gateway's connections are spread over its HTTP threads. Against a Release
# gateway on its own Redis and Postgres, ROUNDS times: bench/http_pairs.c opens CONNECTIONS fresh
# connections at once and runs lock acquire+release pairs on distinct names for DURATION s; prints the
# pairs per second and the CPU ticks (1/100 s) each gateway thread used in the round, busiest first.
# A thread that got no connection shows no ticks (threads under 5 ticks are left out, the janitor's
# and the other background threads' included), so an uneven spread shows as fewer, busier threads.
#
#   bench/threads.sh
#   ROUNDS=6 CONNECTIONS=64 FENCEGATE_HTTP_THREADS=4 bench/threads.sh
#   BUILD=<another Release build dir> bench/threads.sh     # that build's gateway and clients
# Ports: BENCH_REDIS_PORT, BENCH_PG_PORT, BENCH_HTTP_PORT.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-4}"
rounds="${ROUNDS:-4}"
connections="${CONNECTIONS:-64}"
datadir=".data/bench-threads"
redis_port="${BENCH_REDIS_PORT:-17385}"
pg_port="${BENCH_PG_PORT:-17438}"
http_port="${BENCH_HTTP_PORT:-18486}"
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given
bench_pair_clients
bench_services
bench_gateway

thread_ticks() {
  for task in /proc/"$bench_gateway_pid"/task/*; do
    echo "${task##*/} $(cpu_ticks "$bench_gateway_pid/task/${task##*/}")"
  done | sort
}

"$build/http_pairs" "$http_port" "$connections" 1 distinct warm >/dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs," \
  "http_threads ${FENCEGATE_HTTP_THREADS:-default}, $connections connections"
for round in $(seq "$rounds"); do
  before=$(thread_ticks)
  pairs=$("$build/http_pairs" "$http_port" "$connections" "$duration" distinct "threads-$round" |
    awk '{ print $1 }')
  ticks=$(join <(echo "$before") <(thread_ticks) | awk '$3 - $2 >= 5 { print $3 - $2 }' |
    sort -rn | tr '\n' ' ')
  echo "round $round: $pairs pairs/s; ticks per busy thread: $ticks"
done
