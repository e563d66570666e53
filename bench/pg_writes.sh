#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/pg_writes.sh - fenced Postgres writes per second: PATCH over HTTP (bench/pg_load.c)
# next to pgbench running the gateway's own statement (the exact text the
# gateway prepared, taken from pg_stat_activity, with the same parameters), in
# one run on one machine. Prints a Markdown table of both and their ratio.
#
#   bench/pg_writes.sh                 # 3 rounds of 5 s per cell and side
#   DURATION=10 ROUNDS=5 bench/pg_writes.sh
#   FENCE_COLUMN=1 bench/pg_writes.sh  # the table keeps its fence in a column (tables.<t>.fence_column);
#                                      # pgbench then runs the classic direct statement instead:
#                                      # UPDATE ... SET n, note, lock_fence = f WHERE id = k AND lock_fence <= f
#
# Cells: 1, 8 and 32 connections (pg_load connections / pgbench clients), on
# distinct rows (a random row of 10,000 per write) and on one hot row; beside the
# writes per second, the CPU of the Postgres server per write on either side (pg_ticks). The
# gateway runs a Release build with FENCEGATE_HTTP_THREADS and
# FENCEGATE_PG_POOL_SIZE at 32 (override with HTTP_THREADS, POOL) and log
# level warn. Own services: .data/pg-bench on ports 37379/37432, HTTP 38480.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

duration="${DURATION:-5}"
rounds="${ROUNDS:-3}"
datadir=".data/pg-bench"
redis_port=37379
pg_port=37432
http_port="${HTTP_PORT:-38480}"
build="build-pg-bench"
threads="${HTTP_THREADS:-32}"
pool="${POOL:-32}"
rows=10000

# shellcheck source=bench/common.sh
source bench/common.sh
bench_pg_writes_setup

# The gateway migrates the schema; the bench table comes first so that the config check passes.
fence_column="${FENCE_COLUMN:-0}"
sql -c "CREATE TABLE bench_rows (id text PRIMARY KEY, n bigint, note text, lock_fence bigint NOT NULL DEFAULT 0)
        WITH (fillfactor = 80);
        INSERT INTO bench_rows SELECT g::text, 0, '' FROM generate_series(0, $rows - 1) g;
        INSERT INTO bench_rows VALUES ('hot', 0, '');"
config="$datadir/gateway.json"
if [[ "$fence_column" == 1 ]]; then
  echo '{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"], "fence_column": "lock_fence"}}}' >"$config"
else
  echo '{"tables": {"bench_rows": {"key": "id", "columns": ["n", "note"]}}}' >"$config"
fi

bench_gateway FENCEGATE_CONFIG="$config" FENCEGATE_HTTP_THREADS="$threads" FENCEGATE_PG_POOL_SIZE="$pool"

acquired=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{"ttl_ms": 3600000}' \
  "http://127.0.0.1:$http_port/v1/locks/bench-pg/acquire")
token=$(jq -r .token <<<"$acquired")
fence=$(jq -r .fence <<<"$acquired")

# In the default mode every row's fence is stored at the token's fence first, as the gateway's first
# write of each row leaves it: its writes then run the statement of a held fence alone (the claiming
# one runs only where that wrote nothing, src/store/fenced/fenced_pg.c), and so does pgbench.
if [[ "$fence_column" != 1 ]]; then
  sql -c "INSERT INTO fencegate.resource_fences (resource, fence)
          SELECT 'pg:bench_rows/' || id, $fence FROM bench_rows"
fi
# One write through the gateway, then its prepared statement's text from pg_stat_activity.
curl -fs -X PATCH -H 'Content-Type: application/json' -H "Fence-Token: $token" \
  -d '{"set": {"n": 1, "note": "w"}}' "http://127.0.0.1:$http_port/v1/pg/bench_rows/0" >/dev/null
if [[ "$fence_column" == 1 ]]; then # the direct path a client would write without the gateway
  statement='UPDATE bench_rows SET n = $4::bigint, note = $5::text, lock_fence = $1::bigint
             WHERE id = $2::text AND lock_fence <= $1::bigint'
else
  statement=$(sql -c "SELECT query FROM pg_stat_activity WHERE application_name = 'fencegate'
                      AND query LIKE 'WITH % AS (%UPDATE%' LIMIT 1")
  [[ -n "$statement" ]] || { echo "pg_writes: could not find the gateway's statement" >&2; exit 1; }
fi
# The parameters of a write statement (src/store/fenced/fenced_sql.h): $1 fence, $2 key, $3 resource
# prefix, then the written columns in the configuration's order: $4 n, $5 note. A statement that takes
# others is not the one this script knows how to run.
if grep -qE '\$([6-9]|[1-9][0-9])' <<<"$statement"; then
  echo "pg_writes: the gateway's statement takes more parameters than fence, key, prefix, n, note:" >&2
  echo "$statement" >&2
  exit 1
fi
body=$(sed -e 's/\$5/:note/g; s/\$4/:n/g; s/\$3/:prefix/g; s/\$2/:key/g; s/\$1/:fence/g' <<<"$statement" |
  tr '\n' ' ')
printf '\\set key random(0, %d)\n\\set n random(0, 1000000)\n%s;\n' $((rows - 1)) "$body" \
  >"$datadir/pg_write_distinct.pgbench"
printf '\\set n random(0, 1000000)\n%s;\n' "$body" >"$datadir/pg_write_hot.pgbench"

pgbench_tps() { # clients mode
  local hot=() out
  [[ "$2" == hot ]] && hot=(-D key=hot)
  out=$("$pgbin/pgbench" -n -M prepared -c "$1" -j "$(($1 < 2 ? 1 : 2))" -T "$duration" \
    -f "$datadir/pg_write_$2.pgbench" "${hot[@]}" -D fence="$fence" -D prefix="pg:bench_rows/" -D note="w" \
    -d "$dsn" 2>"$datadir/pgbench.err") || {
    echo "pg_writes: pgbench failed:" >&2
    tail -n 3 "$datadir/pgbench.err" >&2
    return 1
  }
  awk '/^tps/ {printf "%.0f", $3}' <<<"$out"
}

if [[ "$fence_column" == 1 ]]; then
  echo "fence_column table; pgbench runs the direct guarded UPDATE"
fi
# Postgres CPU in µs per write over a window that answered $1 writes per second for $duration s and
# moved pg_ticks by $2.
pg_us_per_write() {
  awk -v r="$1" -v t="$2" -v d="$duration" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.1f", (r > 0 ? t / hz * 1e6 / (r * d) : 0)}'
}

echo "| connections | rows | gateway PATCH/s | p99 ms | pgbench same SQL tps | ratio |" \
  "Postgres µs/write, gateway | pgbench | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for conns in 1 8 32; do
  for mode in distinct hot; do
    gateway_runs=() p99_runs=() raw_runs=() gateway_cpu=() raw_cpu=()
    # Gateway and pgbench alternate, ROUNDS times each; the medians are reported, so that a
    # burst of load from elsewhere on the machine hits both sides alike.
    for _ in $(seq "$rounds"); do
      before=$(pg_ticks)
      out=$("$build/pg_load" "$http_port" "$conns" "$duration" "$mode" "$rows" "$token")
      after=$(pg_ticks)
      bad=$(awk '{print $3 + $4}' <<<"$out")
      [[ "$bad" == 0 ]] || echo "pg_writes: $bad failed requests at $conns/$mode" >&2
      gateway_runs+=("$(awk '{print $2}' <<<"$out")")
      gateway_cpu+=("$(pg_us_per_write "${gateway_runs[-1]}" $((after - before)))")
      p99_runs+=("$(awk '{sub("p99_ms=", "", $5); print $5}' <<<"$out")")
      before=$(pg_ticks)
      raw_runs+=("$(pgbench_tps "$conns" "$mode")")
      after=$(pg_ticks)
      raw_cpu+=("$(pg_us_per_write "${raw_runs[-1]}" $((after - before)))")
    done
    gateway=$(printf '%s\n' "${gateway_runs[@]}" | median)
    p99=$(printf '%s\n' "${p99_runs[@]}" | median)
    raw=$(printf '%s\n' "${raw_runs[@]}" | median)
    ratio=$(awk -v g="$gateway" -v r="$raw" 'BEGIN {printf "%.2f", (r > 0 ? g / r : 0)}')
    gcpu=$(printf '%s\n' "${gateway_cpu[@]}" | median)
    rcpu=$(printf '%s\n' "${raw_cpu[@]}" | median)
    cpu_ratio=$(awk -v g="$gcpu" -v r="$rcpu" 'BEGIN {printf "%.2f", (r > 0 ? g / r : 0)}')
    echo "| $conns | $mode | $gateway | $p99 | $raw | $ratio | $gcpu | $rcpu | $cpu_ratio |"
  done
done
