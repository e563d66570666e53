#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/allocs.sh - heap allocations per request of the gateway, counted by valgrind: a figure no load
# moves, where CPU time per request moves by a tenth from one quarter of an hour to the next. Two
# loads, each over one keep-alive connection (bench/lean_http.py): lock pairs (acquire then release of
# one of 7 names) and fenced PATCHes of a fence-column table. Each load runs twice against a fresh
# gateway under `valgrind --tool=memcheck`, with N and 2N operations; the difference of the two runs'
# "total heap usage" over the N extra operations' requests leaves start-up and shutdown out. What the
# gateway's idle threads allocate in the longer run's extra seconds stays in (a few per second).
#
#   bench/allocs.sh                     # this checkout, N=1000
#   N=1000 BUILD=/path/to/build bench/allocs.sh
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
echo '{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"], "fence_column": "lock_fence"}}}' >"$config"
bench_gateway_prefix=(valgrind --tool=memcheck --leak-check=no --log-file="$datadir/valgrind.log")
bench_gateway_wait=600

# Runs load $1 (pairs|patch) with $2 operations against a gateway of its own; prints the gateway's
# allocations over its whole life.
allocations() {
  bench_gateway FENCEGATE_CONFIG="$config" FENCEGATE_LOG_LEVEL=info
  python3 - "$http_port" "$1" "$2" <<'EOF'
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
    status, body = conn.call("POST", f"/v1/locks/allocs-writes-{count}/acquire", {"ttl_ms": 600000})
    assert status == 200, (status, body)
    fence_token = b"Fence-Token: %s\r\n" % body["token"].encode()
    for i in range(count):
        status, body = conn.call("PATCH", f"/v1/pg/bench_rows/{i % 1000}", {"set": {"n": i, "note": "a"}},
                                 fence_token)
        assert status == 200, (status, body)
EOF
  kill "$bench_gateway_pid" && wait "$bench_gateway_pid" 2>/dev/null || true
  bench_gateway_pid=""
  sed -nE 's/.*total heap usage: ([0-9,]+) allocs.*/\1/p' "$datadir/valgrind.log" | tr -d ,
}

echo "| load | requests per operation | allocations, $n operations | $((2 * n)) operations | per request |"
echo "|---|---|---|---|---|"
for load in pairs patch; do
  per_op=1
  [[ "$load" == pairs ]] && per_op=2
  once=$(allocations "$load" "$n")
  twice=$(allocations "$load" $((2 * n)))
  awk -v l="$load" -v k="$per_op" -v a="$once" -v b="$twice" -v n="$n" \
    'BEGIN {printf "| %s | %d | %d | %d | %.1f |\n", l, k, a, b, (b - a) / (n * k)}'
done
