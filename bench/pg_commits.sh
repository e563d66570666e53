#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/pg_commits.sh - what a fenced write costs Postgres, and which part of it a gateway could share
# among several requests: pgbench alone (no gateway) runs the direct fence-column statement
#   UPDATE bench_rows SET n, note, lock_fence = f WHERE id = k AND lock_fence <= f
# on random rows three ways, CLIENTS clients (default 8) each:
#   single     one statement per transaction (what each fenced write is today, and pgbench's own figure)
#   batch      BEGIN, four statements, COMMIT: four writes in one transaction, six round trips
#   pipelined  the same four in one transaction sent as one pipeline: one round trip
#   grouped    bench/pg_group.c: CLIENTS threads each wait for one write at a time, and the writes that
#              arrive while a group is being committed are committed together in the next (one
#              transaction, a savepoint each, one round trip): what a gateway could do for its HTTP
#              threads; "size" is the mean number of writes per group
# and prints statements per second and the CPU of all Postgres processes per statement (/proc: the
# backends, and those that exited, through the postmaster's children's time). Comparing batch with
# single and with pipelined separates the cost of a commit from that of a round trip.
#
#   bench/pg_commits.sh
#   CLIENTS=32 DURATION=10 ROUNDS=3 bench/pg_commits.sh
#
# Own services: .data/pg-commits on ports 37381/37434 (BENCH_REDIS_PORT, BENCH_PG_PORT).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

clients="${CLIENTS:-8}"
duration="${DURATION:-5}"
rounds="${ROUNDS:-2}"
datadir=".data/pg-commits"
redis_port="${BENCH_REDIS_PORT:-37381}"
pg_port="${BENCH_PG_PORT:-37434}"
rows=10000

# shellcheck source=bench/common.sh
source bench/common.sh
bash scripts/deps.sh bench
bench_pg_services

sql -c "CREATE TABLE bench_rows (id text PRIMARY KEY, n bigint, note text, lock_fence bigint NOT NULL DEFAULT 0)
        WITH (fillfactor = 80);
        INSERT INTO bench_rows SELECT g::text, 0, '' FROM generate_series(0, $rows - 1) g;"

scripts="$datadir/scripts"
mkdir -p "$scripts"
update() { echo "UPDATE bench_rows SET n = :id, note = 'w', lock_fence = 5 WHERE id = (:id + $1)::text AND lock_fence <= 5;"; }
{ echo "\\set id random(0, $((rows - 5)))"; update 0; } >"$scripts/single.sql"
{ echo "\\set id random(0, $((rows - 5)))"; echo "BEGIN;"; for i in 1 2 3 4; do update "$i"; done; echo "COMMIT;"; } \
  >"$scripts/batch.sql"
{ echo "\\set id random(0, $((rows - 5)))"; echo "\\startpipeline"; for i in 1 2 3 4; do update "$i"; done
  printf '%s\n' '\endpipeline'; } >"$scripts/pipelined.sql"

build="$datadir" bench_c_program pg_group
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; $clients clients, ${duration} s per run"
echo "| round | way | statements/s | Postgres µs per statement |"
echo "|---|---|---|---|"
for round in $(seq "$rounds"); do
  for way in single batch pipelined grouped; do
    per=$([[ "$way" == single || "$way" == grouped ]] && echo 1 || echo 4)
    before=$(pg_ticks)
    if [[ "$way" == grouped ]]; then
      read -r tps size < <("$datadir/pg_group" "$dsn" "$clients" "$duration" 1)
      way="grouped (size $size)"
    else
      tps=$("$pgbin/pgbench" -n -M prepared -c "$clients" -j 2 -T "$duration" -f "$scripts/$way.sql" \
        "$dsn" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    fi
    after=$(pg_ticks)
    awk -v r="$round" -v w="$way" -v tps="$tps" -v k="$per" -v d="$duration" -v t=$((after - before)) \
      -v hz="$(getconf CLK_TCK)" \
      'BEGIN { n = tps * k * d; printf "| %d | %s | %.0f | %.1f |\n", r, w, tps * k, t / hz * 1e6 / n }'
  done
done
