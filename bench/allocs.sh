#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/allocs.sh - what the gateway's own code does per request, counted by valgrind: heap
# allocations (memcheck) and instructions executed in user space (callgrind; the kernel's part, the
# system calls and context switches, is not counted). Figures no load moves, where CPU time per
# request moves by a tenth from one quarter of an hour to the next. Two loads, each over one
# keep-alive connection (bench/lean_http.py): lock pairs (acquire then release of one of 7 names)
# and fenced PATCHes of a fence-column table. Each load runs twice per tool against a fresh gateway,
# with N and 2N operations; the difference of the two runs' totals over the N extra operations'
# requests leaves start-up and shutdown out. What the gateway's idle threads do in the longer run's
# extra seconds stays in (a few allocations a second).
#
#   bench/allocs.sh                     # this checkout, N=1000
#   N=500 BUILD=/path/to/build bench/allocs.sh
#   BUFFER=32768 bench/allocs.sh        # limits.connection_buffer_bytes (default 8192)
#
# Own services: .data/allocs on ports 29379/29432, HTTP 29480. Must not: time anything.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

n="${N:-1000}"
datadir=".data/allocs"
redis_port=29379
pg_port=29432
http_port=29480
build="build-allocs"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_build_or_given
bench_pg_services
sql -c "CREATE TABLE bench_rows (id text PRIMARY KEY, n bigint, note text, lock_fence bigint);
        INSERT INTO bench_rows SELECT g::text, 0, '' FROM generate_series(0, 999) g;"
config="$datadir/gateway.json"
echo '{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"], "fence_column": "lock_fence"}},
  "limits": {"connection_buffer_bytes": '"${BUFFER:-8192}"'}}' >"$config"
bench_gateway_wait=600

# Runs load $2 (pairs|patch) with $3 operations against a gateway of its own under valgrind tool $1
# (memcheck|callgrind); prints the gateway's heap allocations (memcheck) or instructions (callgrind)
# over its whole life.
totals() {
  bench_gateway_prefix=(valgrind --tool="$1" --log-file="$datadir/valgrind.log")
  [[ "$1" == memcheck ]] && bench_gateway_prefix+=(--leak-check=no)
  [[ "$1" == callgrind ]] && bench_gateway_prefix+=(--callgrind-out-file="$datadir/callgrind.out")
  shift
  bench_gateway FENCEGATE_CONFIG="$config" FENCEGATE_LOG_LEVEL=info
  python3 - "$http_port" "$1" "$2" <<'EOF'
import os
import sys
sys.path.insert(0, "bench")
from lean_http import LeanConnection

port, load, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
conn = LeanConnection("127.0.0.1", port)
if load == "pairs":
    for i in range(count):
        path = f"/v1/locks/allocs-{i % 7}/"
        status, body = conn.call("POST", path + "acquire", {"ttl_ms": 10000})
        assert status == 200, (status, body)
        status, body = conn.call("POST", path + "release", {"token": body["token"]})
        assert status == 200, (status, body)
else:
    status, body = conn.call("POST", f"/v1/locks/allocs-writes-{os.getpid()}/acquire", {"ttl_ms": 600000})
    assert status == 200, (status, body)
    fence_token = b"Fence-Token: %s\r\n" % body["token"].encode()
    for i in range(count):
        status, body = conn.call("PATCH", f"/v1/pg/bench_rows/{i % 1000}", {"set": {"n": i, "note": "a"}},
                                 fence_token)
        assert status == 200, (status, body)
EOF
  kill "$bench_gateway_pid" && wait "$bench_gateway_pid" 2>/dev/null || true
  bench_gateway_pid=""
  if [[ "${bench_gateway_prefix[1]}" == --tool=memcheck ]]; then
    sed -nE 's/.*total heap usage: ([0-9,]+) allocs.*/\1/p' "$datadir/valgrind.log" | tr -d ,
  else
    awk '/^(summary|totals):/ {print $2; exit}' "$datadir/callgrind.out"
  fi
}

# Prints what tool $1 counts per request of load $2 ($3 requests per operation).
per_request() {
  local once twice
  once=$(totals "$1" "$2" "$n")
  twice=$(totals "$1" "$2" $((2 * n)))
  awk -v k="$3" -v a="$once" -v b="$twice" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / (n * k)}'
}

echo "| load | heap allocations per request | instructions per request (user space) |"
echo "|---|---|---|"
for load in pairs patch; do
  per_op=1
  [[ "$load" == pairs ]] && per_op=2
  echo "| $load | $(per_request memcheck "$load" "$per_op") | $(per_request callgrind "$load" "$per_op") |"
done
