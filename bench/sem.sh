#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/sem.sh - the classic distributed-semaphore scenario against a Release gateway:
# 3 client processes x 10 workers over keep-alive HTTP, limit 5, 600 jobs holding a slot for 20 ms
# (bench/sem_bench.py does the work and the arithmetic; see its docstring). Starts its own Redis and
# Postgres (.data/bench-sem) and gateway, runs the scenario RUNS times (default 3), stops everything.
# After each run: the CPU per job of the gateway and Redis (/proc), and the client processes' CPU.
#
# With BEFORE and AFTER (two gateway binaries, e.g. Release builds of two commits), each run starts
# both in turn on the same Redis and Postgres, the order alternating by run, and the end prints each
# side's median run time and turnover: a before/after figure measured in the same minutes, which this
# machine's drift from one quarter of an hour to the next (a few percent) cannot fake.
#
#   bench/sem.sh              # 3 runs
#   RUNS=5 bench/sem.sh
#   RUNS=5 BEFORE=a/fencegate AFTER=b/fencegate bench/sem.sh
#
# SCRIPT_TIMES=1 also prints, after each run, how long Redis ran each lock and semaphore script (median
# and mean of SLOWLOG durations, every command logged during the run): the Redis execution inside a hand-over's
# round trip. Logging every command costs Redis a little; leave it off when timing builds.
#
#   SCRIPT_TIMES=1 bench/sem.sh
#
# WAKEUPS=1 records the scheduler's wake-ups and switches during each run (perf, as root) and prints
# where each hand-over's time went, split at every wake-up (bench/sem_wakeups.py): the clients, the
# gateway's threads, Redis, and the waits for a CPU between them.
#
#   WAKEUPS=1 bench/sem.sh
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
if bench_before_after bench/sem.sh; then
  sides=(before after)
  mkdir -p "$build/before" "$build/after"
  cp "$BEFORE" "$build/before/fencegate" # copied: a rebuild during the run does not change a side
  cp "$AFTER" "$build/after/fencegate"
else
  bench_build_or_given
  sides=("")
fi

bench_services
redis_pid=$(cat "$datadir/redis.pid")

# SCRIPT_TIMES: log every command Redis runs from now on (SLOWLOG with no threshold), the log emptied.
script_times_start() {
  rcli "$redis_port" CONFIG SET slowlog-max-len 1000000 >/dev/null
  rcli "$redis_port" CONFIG SET slowlog-log-slower-than 0 >/dev/null
  rcli "$redis_port" SLOWLOG RESET >/dev/null
}

# SCRIPT_TIMES: prints the calls, median and mean duration of each lock and semaphore function Redis
# ran since script_times_start (the name without its prefix and version suffix), and stops logging.
script_times_report() {
  rcli "$redis_port" CONFIG SET slowlog-log-slower-than 10000 >/dev/null
  redis-cli -p "$redis_port" --json SLOWLOG GET -1 | python3 -c '
import json, re, statistics, sys
runs = {}
for entry in json.load(sys.stdin):
    args = entry[3]
    name = re.fullmatch(r"fg_((?:lock|sem)_\w+)_[0-9a-f]{12}", args[1]) if len(args) > 1 else None
    if args[0].upper() in ("FCALL", "FCALL_RO") and name:
        runs.setdefault(name.group(1), []).append(entry[2])
print("Redis per script", "; ".join(f"{name} {len(us)} calls, median {statistics.median(us):.0f} us, mean "
                                    f"{statistics.mean(us):.0f} us" for name, us in sorted(runs.items())))'
}

# One run of the scenario against the running gateway, labelled $1 (a side, or ""); the rest of the
# arguments go to sem_bench.py. Prints its report and the CPU per job; returns 1 if a target was missed.
run_once() {
  local label="$1" status=0 gateway_before redis_before client_user client_sys
  shift
  gateway_before=$(cpu_ticks "$bench_gateway_pid")
  redis_before=$(cpu_ticks "$redis_pid")
  [[ -n "${SCRIPT_TIMES:-}" ]] && script_times_start
  local perf_pid="" records=()
  if [[ -n "${WAKEUPS:-}" ]]; then
    perf record -q -k CLOCK_MONOTONIC -e sched:sched_wakeup,sched:sched_switch -a -o "$datadir/sched.data" \
      >/dev/null 2>&1 &
    perf_pid=$!
    records=(--records "$datadir/records.json")
    sleep 0.5 # perf is recording before the clients start
  fi
  { time python3 bench/sem_bench.py --url "http://127.0.0.1:$http_port" "${records[@]}" "$@" \
      >"$datadir/run.out" 2>&1; } 2>"$datadir/run.cpu" || status=1
  cat "$datadir/run.out"
  if [[ -n "$perf_pid" ]]; then
    kill -INT "$perf_pid" && wait "$perf_pid" || true
    perf script -i "$datadir/sched.data" --ns -F tid,time,event,trace >"$datadir/sched.txt" 2>/dev/null
    python3 bench/sem_wakeups.py --records "$datadir/records.json" --sched "$datadir/sched.txt" \
      --gateway "$bench_gateway_pid" --redis "$redis_pid" || status=1
  fi
  read -r client_user client_sys <"$datadir/run.cpu"
  # CPU per job (each job is one slot turnover: a release, a grant and a queueing acquire) of the
  # gateway and Redis, from /proc; the client processes' whole CPU from the shell's `time` (their
  # start-up and the wait for the common start included: compare a run with --jobs 30).
  awk -v g=$(($(cpu_ticks "$bench_gateway_pid") - gateway_before)) \
    -v r=$(($(cpu_ticks "$redis_pid") - redis_before)) -v cu="$client_user" -v cs="$client_sys" \
    -v hz="$(getconf CLK_TCK)" -v jobs="$(sed -n 's/.*limit [0-9]*, \([0-9]*\) jobs.*/\1/p' "$datadir/run.out")" \
    'BEGIN { printf "CPU             gateway %.0f us per job, Redis %.0f us per job; clients %.2f s in all\n",
             g * 1e6 / hz / jobs, r * 1e6 / hz / jobs, cu + cs }'
  [[ -n "${SCRIPT_TIMES:-}" ]] && script_times_report
  [[ -n "$label" ]] && awk -v s="$label" '/^run time/ {t = $3} /^turnover/ {o = $2} END {print s, t, o}' \
    "$datadir/run.out" >>"$datadir/sides"
  return "$status"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
status=0
TIMEFORMAT="%U %S"
: >"$datadir/sides"
if [[ -z "${sides[0]}" ]]; then
  bench_gateway
  for i in $(seq "$runs"); do
    echo "--- run $i"
    run_once "" "$@" || status=1
  done
  exit "$status"
fi
for i in $(seq "$runs"); do
  if ((i % 2)); then order=(0 1); else order=(1 0); fi
  for s in "${order[@]}"; do
    echo "--- run $i, ${sides[$s]}"
    main_build="$build"
    build="$main_build/${sides[$s]}"
    bench_gateway
    build="$main_build"
    run_once "${sides[$s]}" "$@" || status=1
    kill "$bench_gateway_pid" && wait "$bench_gateway_pid" 2>/dev/null || true
    bench_gateway_pid=""
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| build | run times (s) | median run time (s) | median turnover over the bound (ms) |"
echo "|---|---|---|---|"
for side in "${sides[@]}"; do
  times=$(awk -v s="$side" '$1 == s {print $2}' "$datadir/sides")
  printf '| %s | %s | %s | %s |\n' "$side" "$(paste -sd, <<<"$times" | sed 's/,/, /g')" \
    "$(median <<<"$times")" "$(awk -v s="$side" '$1 == s {print $3}' "$datadir/sides" | median)"
done
exit "$status"
