#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/auth.sh - what API keys cost: lock acquire+release pairs per second
# through two gateways on the same Redis and Postgres, one with auth off and
# one with auth required (10 keys configured, each call presenting one), in
# one run on one machine. Within a cell the sides alternate off/on/off/on...
# (which side goes first alternates by round, so a drift in the machine's load
# favours neither); the table shows every run, the medians, their ratio and
# the difference, and the median of the ratios of the rounds (each round's two
# runs are back to back, so that ratio is the least sensitive to a load that
# changes during the run). Then the figure that does not depend on the load: the
# instructions per request of the HTTP thread serving one connection, counted
# by callgrind for each side; and the key check alone (bench/auth_check.c).
#
#   bench/auth.sh                                  # 5 rounds of 5 s per cell and side
#   DURATION=10 ROUNDS=7 CALLGRIND_SECONDS=20 bench/auth.sh
#   CALLGRIND_SECONDS=0 bench/auth.sh              # no callgrind part
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
rounds="${ROUNDS:-5}"
cg_seconds="${CALLGRIND_SECONDS:-10}"
datadir=".data/bench-auth"
redis_port="${BENCH_REDIS_PORT:-17381}"
pg_port="${BENCH_PG_PORT:-17434}"
http_port="${BENCH_HTTP_PORT:-18482}"
auth_port=$((http_port + 1))
cg_port=$((http_port + 2))
build="build-bench"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given
bench_c_program http_pairs
bench_c_program auth_check

bench_services

# Ten keys, as a deployment would have; the benchmark presents the last one.
key="fgk_bench_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
{
  echo "["
  for i in $(seq 9); do
    printf '{"id": "other-%d", "sha256": "%s", "scopes": ["lock:other-%d:*"]},\n' "$i" \
      "$(printf 'other-key-%d' "$i" | sha256sum | cut -d' ' -f1)" "$i"
  done
  printf '{"id": "bench", "sha256": "%s", "scopes": ["lock:bench-*"]}\n]\n' \
    "$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)"
} >"$datadir/keys.json"
auth_on=(FENCEGATE_AUTH_MODE=required FENCEGATE_AUTH_KEYS_FILE="$datadir/keys.json")

bench_gateway
off_pid=$bench_gateway_pid
http_port=$auth_port bench_gateway "${auth_on[@]}"
on_pid=$bench_gateway_pid
trap 'kill "$off_pid" "$on_pid" 2>/dev/null; wait 2>/dev/null; bench_cleanup' EXIT

# One timed run of lock pairs on one side: side (off|on), connections, seconds, name prefix.
pairs_run() {
  local side=$1 conns=$2 seconds=$3 prefix=$4 port=$http_port bearer=""
  [[ "$side" == on ]] && port=$auth_port bearer=$key
  BENCH_KEY="$bearer" "$build/http_pairs" "$port" "$conns" "$seconds" distinct "$prefix"
}

echo "load before: $(uptime)"
echo
echo "| connections | auth off pairs/s (runs) | auth required pairs/s (runs) | median off | median on | on/off | difference | median of round ratios |"
echo "|---|---|---|---|---|---|---|---|"
for conns in 1 16; do
  off_runs=()
  on_runs=()
  ratios=()
  for round in $(seq "$rounds"); do
    sides=(off on)
    ((round % 2)) || sides=(on off)
    for side in "${sides[@]}"; do
      got=$(pairs_run "$side" "$conns" "$duration" "bench-$side-$conns-$round" | awk '{print $1}')
      if [[ "$side" == off ]]; then off_runs+=("$got"); else on_runs+=("$got"); fi
    done
    ratios+=("$(awk -v a="${off_runs[-1]}" -v b="${on_runs[-1]}" 'BEGIN { printf "%.4f", b / a }')")
  done
  off=$(printf '%s\n' "${off_runs[@]}" | median)
  on=$(printf '%s\n' "${on_runs[@]}" | median)
  paired=$(printf '%s\n' "${ratios[@]}" | median)
  awk -v c="$conns" -v a="$off" -v b="$on" -v ra="${off_runs[*]}" -v rb="${on_runs[*]}" -v p="$paired" \
    'BEGIN { printf "| %s | %s | %s | %s | %s | %.3f | %+.1f %% | %.3f (%+.1f %%) |\n", c, ra, rb, a,
             b, b / a, (b - a) * 100 / a, p, (p - 1) * 100 }'
done
echo
echo "load after: $(uptime)"

# Instructions per request under callgrind for one side (off|on) at one log level: a gateway of
# its own, counted from after it is ready to the end of one connection's pairs, on the HTTP
# thread that served them (the thread with the most instructions; the janitor and the others are
# left out). Sets cg_instructions and cg_requests.
callgrind_side() {
  local side=$1 settings=(FENCEGATE_LOG_LEVEL="$2")
  [[ "$side" == on ]] && settings+=("${auth_on[@]}")
  rm -f "$datadir/callgrind.$side".*
  bench_gateway_prefix=(valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes
    "--callgrind-out-file=$datadir/callgrind.$side.%p")
  bench_gateway_wait=600
  http_port=$cg_port bench_gateway "${settings[@]}"
  local pid=$bench_gateway_pid bearer=""
  [[ "$side" == on ]] && bearer=$key
  callgrind_control -i on "$pid" >/dev/null 2>&1
  local pairs
  pairs=$(BENCH_KEY="$bearer" "$build/http_pairs" "$cg_port" 1 "$cg_seconds" distinct \
    "bench-cg-$side" | sed -n 's/.*(\([0-9]*\) pairs, 0 failed calls.*/\1/p')
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  bench_gateway_pid=""
  [[ -n "$pairs" ]] || { echo "bench: callgrind run of side $side had failed calls" >&2; exit 1; }
  cg_instructions=$(cat "$datadir/callgrind.$side.$pid".1-* | sed -n 's/^summary: //p' | sort -n |
    tail -1)
  cg_requests=$((2 * pairs))
}

# At warn (as the pairs above) and at the default level, info, where every request writes a
# log line that names its key.
if ((cg_seconds > 0)); then
  echo
  echo "callgrind, $cg_seconds s of lock pairs on 1 connection per side, instructions per request:"
  for level in warn info; do
    callgrind_side off "$level"
    off_ir=$cg_instructions off_req=$cg_requests
    callgrind_side on "$level"
    awk -v l="$level" -v a="$off_ir" -v na="$off_req" -v b="$cg_instructions" -v nb="$cg_requests" \
      'BEGIN { pa = a / na; pb = b / nb
               printf "log level %s: auth off %.0f (%d requests), auth required %.0f (%d requests), ",
                      l, pa, na, pb, nb
               printf "difference %+.0f (%+.2f %%)\n", pb - pa, (pb - pa) * 100 / pa }'
  done
fi
echo
for n in 1 10 100; do
  echo "key check alone, $("$build/auth_check" "$n" 200000)"
done
