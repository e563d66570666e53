#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/profile.sh - where the gateway's CPU goes under lock pairs: perf samples the gateway's threads
# on the software clock (a guest without hardware counters has it too) while CLIENTS Python processes
# (bench/lean_http.py, one keep-alive connection each) acquire and release a lock name of their own.
# Prints each object's share of the samples (the kernel, libc, the gateway, its libraries), the busiest
# symbols, and the kernel's busiest symbol by caller. Run it as root: the kernel's part is the point. A
# share, not a time; what it tells is which part a change could move (docs/performance.md, T5).
# Then what the samples are weighed against: the gateway's CPU per request over the same seconds, in
# user space and in the kernel (utime and stime from /proc); its system calls per request, counted by
# the kernel's syscall tracepoints (perf stat, which does not slow the calls as strace does: a request
# runs in the time it takes unwatched) over SYSCALLS seconds more of the same load between two readings
# of the gateway's answered requests; and what one system call and one sleep with its wake-up cost on
# this machine (perf bench syscall basic, perf bench sched pipe).
#
#   bench/profile.sh
#   CLIENTS=4 DURATION=10 SYSCALLS=3 LOG_LEVEL=info HTTP_THREADS=4 BUILD=/path/to/build bench/profile.sh
#
# Own services: .data/profile on ports 29579/29632, HTTP 29680. Must not: time anything.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

clients="${CLIENTS:-4}"
duration="${DURATION:-10}"
syscalls_s="${SYSCALLS:-3}"
# The calls counted one by one; "in all" counts every call, these or not.
calls="epoll_wait recvfrom sendmsg write writev poll futex sendto read sched_yield getrandom"
datadir=".data/profile"
redis_port=29579
pg_port=29632
http_port=29680
build="build-profile"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given
bench_services
bench_gateway FENCEGATE_LOG_LEVEL="${LOG_LEVEL:-info}" FENCEGATE_HTTP_THREADS="${HTTP_THREADS:-4}"

# Lock pairs on name profile-$2 against port $1 for $3 seconds.
pairs() {
  python3 - "$@" <<'PY'
import sys
import time
sys.path.insert(0, "bench")
from lean_http import LeanConnection

port, client, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
conn = LeanConnection("127.0.0.1", port)
path = f"/v1/locks/profile-{client}/"
end = time.monotonic() + seconds
while time.monotonic() < end:
    status, body = conn.call("POST", path + "acquire", {"ttl_ms": 10000})
    assert status == 200, (status, body)
    status, body = conn.call("POST", path + "release", {"token": body["token"]})
    assert status == 200, (status, body)
PY
}

# Lock requests the gateway has answered so far (its own counter, by route).
answered() {
  curl -fs "http://127.0.0.1:$http_port/metrics" |
    awk '/^fencegate_http_responses_total\{route="lock_(acquire|release)"/ {n += $2} END {print n + 0}'
}

client_pids=()
for c in $(seq "$clients"); do
  pairs "$http_port" "$c" $((duration + syscalls_s + 4)) &
  client_pids+=($!)
done
sleep 1 # the clients connected and under way
user0=$(user_ticks "$bench_gateway_pid")
cpu0=$(cpu_ticks "$bench_gateway_pid")
answered0=$(answered)
perf record -q -F 1999 -e cpu-clock -g -p "$bench_gateway_pid" -o "$datadir/perf.data" -- sleep "$duration" \
  >/dev/null 2>&1
user1=$(user_ticks "$bench_gateway_pid")
cpu1=$(cpu_ticks "$bench_gateway_pid")
answered1=$(answered)
events="raw_syscalls:sys_enter$(printf ',syscalls:sys_enter_%s' $calls)"
answered2=$(answered)
perf stat -x, -e "$events" -p "$bench_gateway_pid" -o "$datadir/syscalls.csv" -- sleep "$syscalls_s"
answered3=$(answered)
wait "${client_pids[@]}"

# perf report of the samples; its readers below read all of it (sed, not head: no broken pipe).
report() { perf report -i "$datadir/perf.data" --no-children "$@" 2>/dev/null; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $clients clients, $duration s, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# share of the gateway's samples by object"
report --sort dso -g none | grep -E '^ +[0-9]' | sed -n 1,8p
echo "# busiest symbols"
report --sort sym -g none | grep -E '^ +[0-9]' | sed -n 1,20p
echo "# the busiest kernel symbol, by caller"
top=$(report --sort sym -g none | awk '/\[k\]/ && top == "" {top = $3} END {print top}')
report --sort sym -g caller,0.5,callee --symbol-filter="$top" | grep -E -- '--[0-9.]+%--' | sed -n 1,24p
echo "# the gateway's CPU per lock request over the sampled seconds ($((answered1 - answered0)) requests)"
awk -v u=$((user1 - user0)) -v s=$((cpu1 - cpu0 - (user1 - user0))) -v n=$((answered1 - answered0)) \
  -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "user %.1f µs, system %.1f µs (%.0f %% user)\n",
    u / hz * 1e6 / n, s / hz * 1e6 / n, 100 * u / (u + s)}'
echo "# system calls per lock request, over $syscalls_s s ($((answered3 - answered2)) requests)"
# A line of perf stat -x,: count, unit, event, ...
awk -F, -v n=$((answered3 - answered2)) '$3 ~ /sys_enter/ {
    name = $3; sub(/.*sys_enter_?/, "", name); if (name == "") name = "in all"
    printf "%-14s %.2f\n", name, $1 / n }' "$datadir/syscalls.csv" | sort -k2 -rn | awk '$NF >= 0.01'
echo "# this machine: one system call, one sleep with its wake-up"
perf bench syscall basic --loop 1000000 2>/dev/null | awk '/usecs\/op/ {printf "getppid: %s µs\n", $1}'
perf bench sched pipe -l 50000 2>/dev/null |
  awk '/usecs\/op/ {printf "pipe round trip (two sleeps, two wake-ups): %s µs\n", $1}'
