# SPDX-License-Identifier: Apache-2.0
# bench/common.sh - what every benchmark script does before measuring, sourced
# by them (not run): the tools, a Release build, its own Redis and Postgres,
# and a gateway in the background, all stopped again when the script exits;
# psql on that Postgres, the pg_load client and the median of the rounds.
# The caller sets build, datadir, redis_port, pg_port and http_port first.

# Installs the tools and builds the gateway (Release, no tests) into $build.
bench_build() {
  bash scripts/deps.sh bench
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFG_TESTS=OFF >/dev/null
  cmake --build "$build" -j "$(nproc)" >/dev/null
}

# The C clients of the lock benchmarks, into $build: http_pairs (acquire+release over HTTP) and
# raw_pairs (the same scripts over RESP, with the gateway's generated script table and key builder).
bench_pair_clients() {
  # shellcheck disable=SC2046 # pkg-config prints several flags
  cc -O2 -Isrc -I"$build/generated" -o "$build/raw_pairs" bench/raw_pairs.c src/lease/lease_keys.c \
    "$build/generated/lua_scripts.c" $(pkg-config --cflags --libs hiredis jansson) -lpthread
  cc -O2 -D_GNU_SOURCE -o "$build/http_pairs" bench/http_pairs.c -lpthread
}

# For the fenced-write benchmarks: bench_build, bench/pg_load.c (fenced PATCHes over HTTP) built
# into $build/pg_load, fresh services (bench_services), and pgbin (the Postgres tools: FG_PGBIN, else
# pg_config's) and dsn (the bench Postgres on $pg_port) set for sql.
bench_pg_writes_setup() {
  bench_build
  cc -O2 -D_GNU_SOURCE -o "$build/pg_load" bench/pg_load.c -lpthread
  pgbin="${FG_PGBIN:-/usr/lib/postgresql/15/bin}"
  [[ -x "$pgbin/psql" ]] || pgbin="$(pg_config --bindir)"
  dsn="postgresql://fencegate@127.0.0.1:$pg_port/fencegate"
  bench_services
}

# psql on the bench Postgres (after bench_pg_writes_setup), unaligned and stopping at the first error.
sql() { "$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$dsn" "$@"; }

# The median of the numbers on stdin, one a line (the mean of the middle two for an even count).
median() { sort -n | awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }

bench_gateway_pid=""
# Words put before the gateway's binary (a profiler and its options; none by default), and how
# many tenths of a second bench_gateway waits for it to become ready.
bench_gateway_prefix=()
bench_gateway_wait=100

bench_cleanup() {
  [[ -n "$bench_gateway_pid" ]] && kill "$bench_gateway_pid" 2>/dev/null &&
    wait "$bench_gateway_pid" 2>/dev/null
  bash scripts/services.sh stop "$datadir" "$redis_port" "$pg_port" >/dev/null || true
}

# Starts fresh Redis and Postgres servers in $datadir; they stop when the script exits.
bench_services() {
  bash scripts/services.sh wipe "$datadir" "$redis_port" "$pg_port" >/dev/null
  bash scripts/services.sh start "$datadir" "$redis_port" "$pg_port" >/dev/null
  trap bench_cleanup EXIT
}

# Starts the gateway on $http_port against those servers, with FENCEGATE_LOG_LEVEL=warn and any
# further VAR=value settings given as arguments, and waits until it is ready.
bench_gateway() {
  env FENCEGATE_LISTEN="127.0.0.1:$http_port" \
    FENCEGATE_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
    FENCEGATE_PG_DSN="postgresql://fencegate@127.0.0.1:$pg_port/fencegate" \
    FENCEGATE_LOG_LEVEL=warn "$@" "${bench_gateway_prefix[@]}" "$build/fencegate" \
    2>"$datadir/gateway.log" &
  bench_gateway_pid=$!
  for _ in $(seq "$bench_gateway_wait"); do
    curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "bench: the gateway did not become ready; log: $datadir/gateway.log" >&2
  return 1
}
