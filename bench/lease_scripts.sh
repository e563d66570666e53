#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/lease_scripts.sh - what one lease script costs Redis, two ways, in one run:
#
#  1. through the gateway: bench/http_pairs.c drives lock acquire+release pairs on distinct names
#     (CONNECTIONS connections, DURATION s) against a Release gateway on its own Redis and Postgres;
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
# Ports: BENCH_REDIS_PORT, BENCH_PG_PORT, BENCH_HTTP_PORT (part 2 uses the Redis port + 1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
connections="${CONNECTIONS:-4}"
callgrind_seconds="${CALLGRIND_SECONDS:-3}"
datadir=".data/bench-scripts"
redis_port="${BENCH_REDIS_PORT:-17383}"
pg_port="${BENCH_PG_PORT:-17436}"
http_port="${BENCH_HTTP_PORT:-18484}"
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
if [[ -n "${BUILD:-}" ]]; then
  build="$BUILD"
else
  bench_build
fi
bench_pair_clients

bench_services
bench_gateway
rcli() { redis-cli -p "$1" "${@:2}" | tr -d '\r'; }

# Field $2 (calls, usec) of the script command's line of INFO commandstats on port $1.
script_stat() {
  rcli "$1" INFO commandstats | grep -E '^cmdstat_(fcall|evalsha):' |
    sed -E "s/.*[:,]$2=([0-9.]+),.*/\\1/" | head -n 1
}
# Calls of every other command (the ones the scripts ran) on port $1.
inner_calls() {
  rcli "$1" INFO commandstats | grep -vE '^cmdstat_(fcall|evalsha|function|script|config|info|set)[:|]' |
    sed -nE 's/^cmdstat_[^:]+:calls=([0-9]+),.*/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}
redis_pid=$(cat "$datadir/redis.pid")
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

"$build/http_pairs" "$http_port" "$connections" 1 distinct warm >/dev/null
rcli "$redis_port" CONFIG RESETSTAT >/dev/null
before=$(cpu_ticks "$redis_pid")
pairs=$("$build/http_pairs" "$http_port" "$connections" "$duration" distinct pairs | awk '{ print $1 }')
after=$(cpu_ticks "$redis_pid")
calls=$(script_stat "$redis_port" calls)
usec=$(script_stat "$redis_port" usec)
inner=$(inner_calls "$redis_port")
echo "load: $(uptime | sed 's/.*load average: //')"
echo "through the gateway, $connections connections, $duration s: $pairs pairs/s, $calls script calls"
awk -v c="$calls" -v u="$usec" -v i="$inner" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "  Redis time per script (commandstats): %.1f us; commands per script: %.1f\n", u / c, i / c
           printf "  Redis CPU per script (/proc, I/O included): %.1f us\n", t * 1e6 / hz / c }'

[[ -n "${BUILD:-}" ]] && exit 0
cg_port=$((redis_port + 1))
cg_dir="$datadir/callgrind"
rm -rf "$cg_dir"
mkdir -p "$cg_dir"
valgrind --tool=callgrind --toggle-collect=luaCallFunction --callgrind-out-file="$cg_dir/out" \
  redis-server --port "$cg_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$cg_dir" \
  >"$cg_dir/log" 2>&1 &
cg_pid=$!
until rcli "$cg_port" PING 2>/dev/null | grep -q PONG; do sleep 0.2; done
rcli "$cg_port" SET fg:fence 1 >/dev/null
rcli "$cg_port" SET fg:fence_limit 1000000000000000 >/dev/null
"$build/raw_pairs" "$cg_port" 1 "$callgrind_seconds" distinct >/dev/null
cg_calls=$(script_stat "$cg_port" calls)
cg_inner=$(inner_calls "$cg_port")
rcli "$cg_port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$cg_pid" || true
instructions=$(sed -n 's/^summary: //p' "$cg_dir/out")
echo "raw_pairs under callgrind, 1 connection, $callgrind_seconds s: $cg_calls script calls"
awk -v c="$cg_calls" -v n="$instructions" -v i="$cg_inner" \
  'BEGIN { printf "  instructions per script: %d; commands per script: %.1f\n", n / c, i / c }'
