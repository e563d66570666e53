#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/floor.sh - the gateway next to the least any gateway can cost on this machine: bench/floor.c,
# an HTTP server shaped as the gateway is (threads polling keep-alive connections, one blocking
# backend round trip per request) that does nothing else. Same clients, same services, same minutes,
# the sides alternated round by round:
#   - lock pairs (bench/http_pairs.c) at 4 and 64 connections: floor with no backend, floor with one
#     Redis PING per request, the gateway;
#   - writes (bench/pg_load.c, PATCH of a random row of a fence-column table) at 8 and 32 connections:
#     floor with one guarded UPDATE per request, the gateway, and pgbench running that UPDATE itself;
#   - the time one request takes on one connection, back to back and after 20 ms of rest (the
#     seed scenario's rhythm): floor with one Redis PING, the gateway's lock acquire (each followed
#     by a release that is not timed).
# First the machine's own price of a sleep and a wake-up (`perf bench sched pipe`, on all CPUs and on
# one). Prints, per cell and side, the medians of ops/s (pairs or writes), the serving process's CPU per
# HTTP request (utime+stime from /proc; a pair is two requests) and the part of it in user space
# (utime) and, for writes, Postgres's CPU per write (pg_ticks); then the median request times.
#
#   bench/floor.sh
#   ROUNDS=5 DURATION=4 bench/floor.sh
#
# Own services: .data/floor on ports 27379/27432, HTTP 28480 (gateway) and 28490 (floor).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-4}"
rounds="${ROUNDS:-3}"
datadir=".data/floor"
redis_port=27379
pg_port=27432
http_port=28480
floor_port=28490
build="build-floor"
rows=10000

# shellcheck source=bench/common.sh
source bench/common.sh
bench_pg_writes_setup
bench_pair_clients
bench_c_program floor

sql -c "CREATE TABLE bench_rows (id text PRIMARY KEY, n bigint, note text, lock_fence bigint NOT NULL DEFAULT 0)
        WITH (fillfactor = 80);
        INSERT INTO bench_rows SELECT g::text, 0, '' FROM generate_series(0, $rows - 1) g;"
config="$datadir/gateway.json"
echo '{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"], "fence_column": "lock_fence"}}}' >"$config"
printf '\\set key random(0, %d)\n\\set n random(0, 1000000)\n%s\n' $((rows - 1)) \
  'UPDATE bench_rows SET n = :n::bigint, note = $$w$$, lock_fence = :fence WHERE id = :key::text AND lock_fence <= :fence;' \
  >"$datadir/direct.pgbench"
: >"$datadir/runs"
: >"$datadir/latency"

# Runs client command "$@" (it prints ops/s first, or "WRITES <ops/s>") against process $pid serving
# $per_op HTTP requests per operation; appends "<cell> <side> <ops/s> <µs/request> <Postgres µs/op>
# <µs/request in user space>" to the runs file.
measure() {
  local before user_before pg_before out after user_after pg_after
  before=$(cpu_ticks "$pid")
  user_before=$(user_ticks "$pid")
  pg_before=$(pg_ticks)
  out=$("$@")
  after=$(cpu_ticks "$pid")
  user_after=$(user_ticks "$pid")
  pg_after=$(pg_ticks)
  awk -v c="$cell" -v s="$side" -v t=$((after - before)) -v u=$((user_after - user_before)) \
    -v pt=$((pg_after - pg_before)) -v d="$duration" -v hz="$(getconf CLK_TCK)" -v k="$per_op" -v out="$out" \
    'BEGIN {split(out, f, " "); r = (f[1] == "WRITES" ? f[2] : f[1]); n = r * d; if (n == 0) n = 1
            printf "%s %s %.0f %.1f %.1f %.1f\n", c, s, r, t / hz * 1e6 / (n * k), pt / hz * 1e6 / n,
              u / hz * 1e6 / (n * k)}' >>"$datadir/runs"
}

# Starts floor mode $1 with $2 threads; sets pid.
start_floor() {
  local target=""
  [[ "$1" == redis ]] && target="$redis_port"
  [[ "$1" == pg ]] && target="$dsn"
  "$build/floor" "$floor_port" "$2" "$1" "$target" &
  pid=$!
  for _ in $(seq 100); do
    curl -fs -X POST "http://127.0.0.1:$floor_port/" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench/floor.sh: the floor ($1) did not answer" >&2
  return 1
}

stop() { kill "$pid" && wait "$pid" 2>/dev/null || true; }

# One side of cell $cell ($kind pairs|writes at $conns connections, $threads threads).
run_side() {
  local port="$floor_port" client
  case "$side" in
  floor-none | floor-redis | floor-pg) start_floor "${side#floor-}" "$threads" ;;
  gateway)
    bench_gateway FENCEGATE_CONFIG="$config" FENCEGATE_HTTP_THREADS="$threads"
    pid="$bench_gateway_pid"
    port="$http_port"
    ;;
  esac
  if [[ "$kind" == pairs ]]; then
    per_op=2
    client=("$build/http_pairs" "$port" "$conns" "$duration" distinct "floor-$RANDOM")
  else
    per_op=1
    sql -c "UPDATE bench_rows SET lock_fence = 0"
    client=("$build/pg_load" "$port" "$conns" "$duration" distinct "$rows" "$token")
  fi
  if [[ "$side" == pgbench ]]; then
    local pg_before tps
    pg_before=$(pg_ticks)
    tps=$("$pgbin/pgbench" -n -M prepared -c "$conns" -j 2 -T "$duration" -f "$datadir/direct.pgbench" \
      -D fence="$fence" -d "$dsn" 2>/dev/null | awk '/^tps/ {printf "%.0f", $3}')
    awk -v c="$cell" -v r="$tps" -v pt=$(($(pg_ticks) - pg_before)) -v d="$duration" -v hz="$(getconf CLK_TCK)" \
      'BEGIN {printf "%s pgbench %.0f 0 %.1f 0\n", c, r, pt / hz * 1e6 / (r * d)}' >>"$datadir/runs"
    return
  fi
  "${client[@]}" >/dev/null # warm-up: connections, plans, caches
  measure "${client[@]}"
  stop
  [[ "$side" == gateway ]] && bench_gateway_pid=""
  return 0
}

# p50 of a lock acquire's time on one connection to port $1, back to back and after 20 ms of rest
# (bench/lean_http.py, 300 requests each, the first 20 dropped); appends "<side> <back to back ms>
# <rested ms>" to the latency file.
request_times() {
  python3 - "$1" "$side" >>"$datadir/latency" <<'EOF'
import statistics, sys, time
sys.path.insert(0, "bench")
from lean_http import LeanConnection

port, side = int(sys.argv[1]), sys.argv[2]
conn = LeanConnection("127.0.0.1", port)
path = f"/v1/locks/floor-idle-{time.monotonic_ns()}/"


def p50(rest_s):
    times = []
    for _ in range(300):
        start = time.monotonic_ns()
        _, body = conn.call("POST", path + "acquire", {"ttl_ms": 10000})
        times.append((time.monotonic_ns() - start) / 1e6)
        conn.call("POST", path + "release", {"token": body["token"]})
        time.sleep(rest_s)
    return statistics.median(times[20:])


print(side, f"{p50(0):.3f}", f"{p50(0.02):.3f}")
EOF
}

# The fence the writes carry: a lock held for the whole run (the floor's writes carry 1 and pass).
bench_gateway FENCEGATE_CONFIG="$config"
acquired=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{"ttl_ms": 3600000}' \
  "http://127.0.0.1:$http_port/v1/locks/floor-writes/acquire")
token=$(jq -r .token <<<"$acquired")
fence=$(jq -r .fence <<<"$acquired")
kill "$bench_gateway_pid" && wait "$bench_gateway_pid" 2>/dev/null || true
bench_gateway_pid=""

# What a sleep and a wake-up cost on this machine before any server: `perf bench sched pipe`, two
# processes passing a byte back and forth through pipes (every round trip two wake-ups and two
# sleeps), run by "$@" (taskset, or nothing). Prints its time per round trip and the CPU it used.
sched_pipe() {
  local TIMEFORMAT="%U %S" cpu loops=50000
  cpu=$({ time "$@" perf bench sched pipe -l "$loops" >"$datadir/pipe.out" 2>&1; } 2>&1)
  awk -v c="$cpu" -v n="$loops" '/usecs\/op/ {split(c, t, " ")
    printf "%.1f µs per round trip, %.1f µs of CPU", $1, (t[1] + t[2]) * 1e6 / n}' "$datadir/pipe.out"
}

cells=("pairs 4 4 floor-none floor-redis gateway" "pairs 64 8 floor-none floor-redis gateway"
  "writes 8 8 floor-pg gateway pgbench" "writes 32 8 floor-pg gateway pgbench")
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "perf bench sched pipe: $(sched_pipe) on all CPUs; $(sched_pipe taskset -c 0) on one"
for round in $(seq "$rounds"); do
  for spec in "${cells[@]}"; do
    read -r kind conns threads sides <<<"$spec"
    cell="$kind-$conns"
    read -ra order <<<"$sides"
    ((round % 2)) || mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
    for side in "${order[@]}"; do run_side; done
  done
  for side in floor-redis gateway; do
    if [[ "$side" == gateway ]]; then
      bench_gateway FENCEGATE_CONFIG="$config"
      pid="$bench_gateway_pid"
      request_times "$http_port"
      bench_gateway_pid=""
    else
      start_floor redis 8
      request_times "$floor_port"
    fi
    stop
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| cell | side | ops/s | µs of CPU per HTTP request | of it in user space | Postgres µs per write |"
echo "|---|---|---|---|---|---|"
for spec in "${cells[@]}"; do
  read -r kind conns threads sides <<<"$spec"
  for side in $sides; do
    cols=()
    for col in 3 4 6 5; do
      cols+=("$(awk -v c="$kind-$conns" -v s="$side" -v k="$col" '$1 == c && $2 == s {print $k}' \
        "$datadir/runs" | median)")
    done
    printf '| %s connections, %s | %s | %s | %s | %s | %s |\n' "$conns" "$kind" "$side" "${cols[@]}"
  done
done
echo
echo "| one connection | p50 ms, back to back | p50 ms, after 20 ms of rest |"
echo "|---|---|---|"
for side in floor-redis gateway; do
  printf '| %s | %s | %s |\n' "$side" \
    "$(awk -v s="$side" '$1 == s {print $2}' "$datadir/latency" | median)" \
    "$(awk -v s="$side" '$1 == s {print $3}' "$datadir/latency" | median)"
done
