#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/lease_scripts.sh - what one lease script costs Redis, two ways, in one run:
#
#  1. through the gateway: bench/http_pairs.c drives lock acquire+release pairs on distinct names
#     (CONNECTIONS connections, DURATION s) against a Release gateway on its own Redis and Postgres
#     (KIND=semaphore: semaphore pairs, limit LIMIT, 2 by default, instead; NAMES=shared: one name for
#     all connections, whose acquires queue where the holders reach the limit: a lock's always, a
#     semaphore's with a limit above CONNECTIONS never, its name going idle and back; REQUEST_IDS=1:
#     every acquire with a fresh request_id, as the client libraries send; KIND=lockset: lock sets of
#     SET_SIZE locks, 2 by default, acquired and released together, part 1 only; GATEWAYS=2: two
#     gateways on the one Redis, half the connections through each, so that a release on one grants
#     waiters of the other, part 1 only);
#     INFO commandstats, reset just before, gives Redis's own time per script call (usec_per_call of
#     FCALL, or of EVALSHA for a build from before the scripts were functions) and the commands the
#     scripts ran per call; /proc/<redis pid>/stat gives Redis's whole CPU (its network I/O included)
#     per script.
#  2. exactly: bench/raw_pairs.c runs the same scripts with the same keys and arguments, one
#     connection for CALLGRIND_SECONDS, against a redis-server under callgrind that counts only inside
#     luaCallFunction: instructions per script call, which no load on the machine changes.
#
#   bench/lease_scripts.sh
#   DURATION=10 CONNECTIONS=8 CALLGRIND_SECONDS=5 bench/lease_scripts.sh
#   BUILD=<another Release build dir> bench/lease_scripts.sh   # part 1 only, with that build's gateway
#   KIND=semaphore bench/lease_scripts.sh                       # the semaphore scripts
#   BUILD=<build> KIND=semaphore NAMES=shared LIMIT=5 bench/lease_scripts.sh   # one semaphore, 4 clients
#   BUILD=<build> NAMES=shared GATEWAYS=2 bench/lease_scripts.sh   # one lock, 2 clients on each of 2 gateways
# Ports: BENCH_REDIS_PORT, BENCH_PG_PORT, BENCH_HTTP_PORT (part 2 uses the Redis port + 1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
kind="${KIND:-lock}"
names="${NAMES:-distinct}"
gateways="${GATEWAYS:-1}"
connections="${CONNECTIONS:-4}"
callgrind_seconds="${CALLGRIND_SECONDS:-3}"
datadir=".data/bench-scripts"
redis_port="${BENCH_REDIS_PORT:-17383}"
pg_port="${BENCH_PG_PORT:-17436}"
http_port="${BENCH_HTTP_PORT:-18484}"
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given
bench_pair_clients

bench_services
bench_gateway
[[ "$gateways" == 2 ]] && bench_second_gateway
[[ "$kind" == semaphore ]] && export BENCH_SEMAPHORE_LIMIT="${LIMIT:-2}"
[[ "$kind" == lockset ]] && export BENCH_LOCKSET="${SET_SIZE:-2}"
export BENCH_REQUEST_IDS="${REQUEST_IDS:-0}"
redis_pid=$(cat "$datadir/redis.pid")

# Pairs a second through each gateway ($1: warm or pairs, $2: seconds), summed: the connections split
# between the gateways.
pairs_through_gateways() {
  local each=$((connections / gateways)) g out=() pids=()
  for ((g = 0; g < gateways; g++)); do
    out+=("$datadir/pairs-$g.txt")
    "$build/http_pairs" $((http_port + g)) "$each" "$2" "$names" "$1" >"${out[g]}" &
    pids+=($!)
  done
  wait "${pids[@]}"
  awk '{ sum += $1 } END { print sum }' "${out[@]}"
}

pairs_through_gateways warm 1 >/dev/null
rcli "$redis_port" CONFIG RESETSTAT >/dev/null
before=$(cpu_ticks "$redis_pid")
pairs=$(pairs_through_gateways pairs "$duration")
after=$(cpu_ticks "$redis_pid")
calls=$(script_stat "$redis_port" calls)
usec=$(script_stat "$redis_port" usec)
inner=$(inner_calls "$redis_port")
echo "load: $(uptime | sed 's/.*load average: //')"
echo "$kind pairs through $gateways gateway(s), $connections connections, $names names, $duration s:" \
  "$pairs pairs/s, $calls script calls"
awk -v c="$calls" -v u="$usec" -v i="$inner" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
  -v p="$pairs" -v d="$duration" \
  'BEGIN { printf "  Redis time per script (commandstats): %.1f us; commands per script: %.1f\n", u / c, i / c
           printf "  Redis CPU per script (/proc, I/O included): %.1f us\n", t * 1e6 / hz / c
           printf "  per pair: %.2f script calls, Redis CPU %.1f us\n", c / (p * d), t * 1e6 / hz / (p * d) }'

[[ -n "${BUILD:-}" || "$kind" == lockset || "$gateways" != 1 ]] && exit 0
cg_port=$((redis_port + 1))
cg_dir="$datadir/callgrind"
callgrind_redis "$cg_port" "$cg_dir"
rcli "$cg_port" SET fg:fence 1 >/dev/null
rcli "$cg_port" SET fg:fence_limit 1000000000000000 >/dev/null
raw_kind=""
[[ "$kind" == semaphore ]] && raw_kind=semaphore
# shellcheck disable=SC2086 # raw_kind is one word or none
"$build/raw_pairs" "$cg_port" 1 "$callgrind_seconds" distinct $raw_kind >/dev/null
echo -n "raw_pairs under callgrind, 1 connection, $callgrind_seconds s: "
callgrind_redis_report "$cg_port" "$cg_dir"
