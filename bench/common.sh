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

# Status 0 when BEFORE and AFTER name two gateway binaries to alternate (the tools then installed), 1
# when neither is set; exits 2, naming the benchmark $1, when only one is or one is no binary.
bench_before_after() {
  [[ -n "${BEFORE:-}" || -n "${AFTER:-}" ]] || return 1
  [[ -x "${BEFORE:-}" && -x "${AFTER:-}" ]] || { echo "$1: BEFORE and AFTER must both be binaries" >&2; exit 2; }
  bash scripts/deps.sh bench
}

# Sets build to $BUILD, a Release build given (another commit's for a before/after comparison, or
# one build shared by several benchmarks), with the tools installed; or else makes this checkout's
# (bench_build) into the build the caller named.
bench_build_or_given() {
  if [[ -n "${BUILD:-}" ]]; then
    bash scripts/deps.sh bench
    build="$BUILD"
  else
    bench_build
  fi
}

# Builds the C program bench/$1.c (a client or server of the benchmarks) into $build/$1, with what
# it needs: raw_pairs the gateway's generated script table and key builder ($build/generated, so
# after bench_build), auth_check the key set of src/auth, floor and pg_group libpq. FG_BENCH_CFLAGS
# adds flags (lint.bench_programs adds -Werror). Fails when the compiler does.
bench_c_program() {
  # shellcheck disable=SC2206 # the flags are words
  local flags=(-O2 -D_GNU_SOURCE ${FG_BENCH_CFLAGS:-}) sources=("bench/$1.c") libs=()
  case "$1" in
    raw_pairs)
      flags+=(-Isrc -I"$build/generated")
      sources+=(src/lease/lease_keys.c src/store/backend/key_slot.c src/store/backend/shared_keys.c
        "$build/generated/lua_scripts.c")
      libs=(hiredis jansson) ;;
    auth_check)
      flags+=(-Isrc)
      sources+=(src/auth/keyset.c src/auth/scope.c src/util/published.c src/util/error.c src/util/fgjson.c
        src/util/names.c
        src/util/utf8.c)
      libs=(jansson libcrypto) ;;
    floor | pg_group) libs=(libpq) ;;
  esac
  # shellcheck disable=SC2046 # pkg-config prints several flags
  cc "${flags[@]}" -o "$build/$1" "${sources[@]}" ${libs[*]:+$(pkg-config --cflags --libs "${libs[@]}")} -lpthread
}

# The C clients of the lock benchmarks, into $build: http_pairs (acquire+release over HTTP) and
# raw_pairs (the same scripts over RESP, with the gateway's generated script table and key builder).
bench_pair_clients() {
  bench_c_program raw_pairs && bench_c_program http_pairs
}

# Fresh services (bench_services), with pgbin (the Postgres tools: FG_PGBIN, else pg_config's) and
# dsn (the bench Postgres on $pg_port) set for sql.
bench_pg_services() {
  pgbin="${FG_PGBIN:-/usr/lib/postgresql/15/bin}"
  [[ -x "$pgbin/psql" ]] || pgbin="$(pg_config --bindir)"
  dsn="postgresql://fencegate@127.0.0.1:$pg_port/fencegate"
  bench_services
}

# For the fenced-write benchmarks: bench_build_or_given, bench/pg_load.c (fenced PATCHes over HTTP) built
# into $build/pg_load, and bench_pg_services.
bench_pg_writes_setup() {
  bench_build_or_given
  bench_c_program pg_load
  bench_pg_services
}

# psql on the bench Postgres (after bench_pg_services), unaligned and stopping at the first error.
sql() { "$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$dsn" "$@"; }

# utime+stime, in clock ticks, of process $1 (a pid) or of one of its threads (<pid>/task/<tid>).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# utime alone: the clock ticks process $1 spent in user space.
user_ticks() { awk '{ print $14 }' "/proc/$1/stat"; }

# utime+stime of the Postgres server under $datadir: its postmaster and living children, plus the
# children that exited (a closed connection's backend). A child may exit while it is read.
pg_ticks() {
  local postmaster
  postmaster=$(head -1 "$datadir/pg/data/postmaster.pid")
  for pid in "$postmaster" $(pgrep -P "$postmaster"); do
    awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pid/stat" 2>/dev/null || true
  done | awk '{ s += $1 } END { print s }'
}

# The median of the numbers on stdin, one a line (the mean of the middle two for an even count).
median() { sort -n | awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }

bench_gateway_pid=""
bench_gateway2_pid=""
callgrind_pid=""
# Words put before the gateway's binary (a profiler and its options; none by default), and how
# many tenths of a second bench_gateway waits for it to become ready.
bench_gateway_prefix=()
bench_gateway_wait=100

bench_cleanup() {
  [[ -n "$bench_gateway_pid" ]] && kill "$bench_gateway_pid" 2>/dev/null &&
    wait "$bench_gateway_pid" 2>/dev/null
  [[ -n "$bench_gateway2_pid" ]] && kill "$bench_gateway2_pid" 2>/dev/null &&
    wait "$bench_gateway2_pid" 2>/dev/null
  [[ -n "$callgrind_pid" ]] && kill "$callgrind_pid" 2>/dev/null && wait "$callgrind_pid" 2>/dev/null
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
  bench_gateway_on "$http_port" gateway "$@"
  bench_gateway_pid=$bench_started_pid
}

# Starts a second gateway, on $http_port + 1, as bench_gateway does the first (two gateways behind one
# load balancer: a release on one grants waiters of the other).
bench_second_gateway() {
  bench_gateway_on $((http_port + 1)) gateway2 "$@"
  bench_gateway2_pid=$bench_started_pid
}

# Starts a gateway on port $1, its log $datadir/$2.log, with the settings that follow; its pid in
# bench_started_pid.
bench_gateway_on() {
  local port="$1" log="$datadir/$2.log"
  shift 2
  env FENCEGATE_LISTEN="127.0.0.1:$port" \
    FENCEGATE_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
    FENCEGATE_PG_DSN="postgresql://fencegate@127.0.0.1:$pg_port/fencegate" \
    FENCEGATE_LOG_LEVEL=warn "$@" "${bench_gateway_prefix[@]}" "$build/fencegate" 2>"$log" &
  bench_started_pid=$!
  for _ in $(seq "$bench_gateway_wait"); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "bench: the gateway did not become ready; log: $log" >&2
  return 1
}

# --- what the lease scripts cost Redis (bench/lease_scripts.sh, bench/sem_scripts.sh) ---------------------

# redis-cli on port $1 with the rest as the command, carriage returns dropped.
rcli() { redis-cli -p "$1" "${@:2}" | tr -d '\r'; }

# Field $2 (calls, usec) of the script command's line of INFO commandstats on port $1 (FCALL, or
# EVALSHA for a build from before the scripts were functions).
script_stat() {
  rcli "$1" INFO commandstats | grep -E '^cmdstat_(fcall|evalsha):' |
    sed -E "s/.*[:,]$2=([0-9.]+),.*/\\1/" | head -n 1
}

# Calls of every other command (the ones the scripts ran) on port $1.
inner_calls() {
  rcli "$1" INFO commandstats |
    grep -vE '^cmdstat_(fcall|evalsha|function|script|config|info|set|select|role|ping|client|hello)[:|]' |
    sed -nE 's/^cmdstat_[^:]+:calls=([0-9]+),.*/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}

# Starts a redis-server on port $1 under callgrind, counting only inside luaCallFunction (the scripts),
# with its output in the folder $2 (made afresh); sets callgrind_pid (stopped when the script exits)
# and returns once it answers. Fails when a Redis already answers on port $1.
callgrind_redis() {
  if rcli "$1" PING 2>/dev/null | grep -q PONG; then
    echo "bench: a Redis already answers on port $1" >&2
    return 1
  fi
  rm -rf "$2"
  mkdir -p "$2"
  valgrind --tool=callgrind --toggle-collect=luaCallFunction --callgrind-out-file="$2/out" \
    redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$2" >"$2/log" 2>&1 &
  callgrind_pid=$!
  until rcli "$1" PING 2>/dev/null | grep -q PONG; do
    kill -0 "$callgrind_pid" 2>/dev/null || { echo "bench: Redis under callgrind exited; log: $2/log" >&2; return 1; }
    sleep 0.2
  done
}

# Prints the script calls counted by the callgrind_redis on port $1 (output folder $2), then stops it
# (SIGTERM: Redis exits and callgrind writes its output) and prints its instructions and commands per
# script call.
callgrind_redis_report() {
  local calls inner instructions
  calls=$(script_stat "$1" calls)
  inner=$(inner_calls "$1")
  kill "$callgrind_pid"
  wait "$callgrind_pid" || true
  callgrind_pid=""
  instructions=$(sed -n 's/^summary: //p' "$2/out")
  echo "$calls script calls"
  awk -v c="$calls" -v n="$instructions" -v i="$inner" \
    'BEGIN { printf "  instructions per script: %d; commands per script: %.1f\n", n / c, i / c }'
}
