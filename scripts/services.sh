#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/services.sh — owns: the throw-away Redis and Postgres servers that `scripts/run` and
# `scripts/test` use, each bound to 127.0.0.1 on a port of the caller's choosing, with all their state
# under one data directory:
#
#   <datadir>/redis/            Redis working dir (appendonly.aof, dump.rdb)
#   <datadir>/redis.pid, redis.log
#   <datadir>/pg/               owned by the Postgres OS user (or a symlink, see below)
#   <datadir>/pg/data/          PGDATA (initdb'd once; trust auth for local and loopback)
#   <datadir>/pg/run/           unix socket directory
#   <datadir>/pg/postgres.log
#
# Postgres refuses to run as root, so when this script runs as root the cluster belongs to and runs as an
# unprivileged system user (FG_PG_OS_USER, default fencegate-pg, created by scripts/deps.sh). If that user
# cannot reach <datadir> (a checkout under /root, mode 700), the cluster lives in
# /var/tmp/fencegate-<hash of datadir>/ instead and <datadir>/pg is a symlink to it.
#
# Must not: build anything, touch servers it did not start (a foreign server on the port is an error),
# or listen on anything but the loopback address.
#
# usage: scripts/services.sh start|stop|status|wipe <datadir> <redis_port> <pg_port>
#        scripts/services.sh start-redis|stop-redis|start-pg|stop-pg <datadir> <redis_port> <pg_port>
#   start   start both (a no-op for a server that already runs from this datadir), wait until they answer,
#           and make sure role and database `fencegate` exist, with the example application table of
#           examples/invoices.sql (the dev and test gateways write to it; a deployment does not have it)
#   stop    stop both cleanly (SHUTDOWN NOSAVE after the AOF is flushed; pg_ctl stop -m fast)
#   status  print one line per server; exit 0 when both answer, 3 otherwise
#   wipe    stop both, then delete <datadir> and any cluster directory it links to
# env: FG_PGBIN (Postgres bin dir), FG_PG_OS_USER, FG_SERVICES_TIMEOUT (seconds to wait, default 30)
set -euo pipefail

PROG="services.sh"
PG_OS_USER="${FG_PG_OS_USER:-fencegate-pg}"
TIMEOUT="${FG_SERVICES_TIMEOUT:-30}"
MARKER=".fencegate-services"
EXAMPLE_SQL="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/examples/invoices.sql"

die() { echo "$PROG: error: $*" >&2; exit 1; }
say() { echo "$PROG: $*"; }

usage() {
  echo "usage: $PROG start|stop|status|wipe|start-redis|stop-redis|start-pg|stop-pg <datadir> <redis_port> <pg_port>" >&2
  exit 2
}

(($# == 4)) || usage
action="$1"
datadir_arg="$2"
redis_port="$3"
pg_port="$4"
[[ "$redis_port" =~ ^[0-9]+$ && "$redis_port" -ge 1 && "$redis_port" -le 65535 ]] ||
  die "redis port must be a number in 1..65535, got '$redis_port'"
[[ "$pg_port" =~ ^[0-9]+$ && "$pg_port" -ge 1 && "$pg_port" -le 65535 ]] ||
  die "postgres port must be a number in 1..65535, got '$pg_port'"
[[ "$redis_port" != "$pg_port" ]] || die "redis and postgres ports must differ"
[[ -n "$datadir_arg" ]] || die "datadir must not be empty"

# --- paths -------------------------------------------------------------------------------------------

# The datadir as an absolute, symlink-free path; created by `start` only.
resolve_datadir() {
  if [[ "$action" == start* ]]; then
    mkdir -p "$datadir_arg" || die "cannot create datadir $datadir_arg"
  fi
  if [[ -d "$datadir_arg" ]]; then
    (cd "$datadir_arg" && pwd -P)
  else
    # Not there (stop/status/wipe of a datadir never started): a best-effort absolute path.
    case "$datadir_arg" in
      /*) echo "$datadir_arg" ;;
      *) echo "$PWD/$datadir_arg" ;;
    esac
  fi
}
datadir="$(resolve_datadir)"
[[ "$datadir" != "/" ]] || die "refusing to use / as datadir"

redis_dir="$datadir/redis"
redis_pidfile="$datadir/redis.pid"
redis_log="$datadir/redis.log"
pg_link="$datadir/pg"
datadir_hash="$(printf '%s' "$datadir" | sha256sum | cut -c1-12)"
pg_fallback="/var/tmp/fencegate-$datadir_hash"

find_pgbin() {
  local d
  for d in "${FG_PGBIN:-}" /usr/lib/postgresql/15/bin; do
    if [[ -n "$d" && -x "$d/pg_ctl" ]]; then
      echo "$d"
      return
    fi
  done
  if command -v pg_config >/dev/null 2>&1; then
    d="$(pg_config --bindir)"
    [[ -x "$d/pg_ctl" ]] && { echo "$d"; return; }
  fi
  if command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"
    return
  fi
  return 1
}

# --- running things as the Postgres OS user ----------------------------------------------------------

if ((EUID == 0)); then
  pg_owner="$PG_OS_USER"
else
  pg_owner="$(id -un)"
fi

ensure_pg_user() {
  ((EUID == 0)) || return 0
  getent passwd "$PG_OS_USER" >/dev/null && return 0
  say "creating system user $PG_OS_USER (runs the local Postgres clusters)"
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin --comment "fencegate dev/test postgres" "$PG_OS_USER" ||
    die "could not create system user $PG_OS_USER (run scripts/deps.sh)"
}

# Run a command as the Postgres OS user, from / so that an unreadable working directory does not bother it.
as_pg() {
  if ((EUID != 0)); then
    (cd / && "$@")
  elif command -v runuser >/dev/null 2>&1; then
    (cd / && runuser -u "$PG_OS_USER" -- "$@")
  elif command -v setpriv >/dev/null 2>&1; then
    (cd / && setpriv --reuid="$PG_OS_USER" --regid="$PG_OS_USER" --init-groups -- "$@")
  else
    die "neither runuser nor setpriv found (package util-linux); cannot drop root to run postgres"
  fi
}

# Where the cluster directory really is (through the symlink, if any), or empty if not set up yet.
pg_root() {
  if [[ -L "$pg_link" ]]; then
    readlink -f "$pg_link" || true
  elif [[ -d "$pg_link" ]]; then
    echo "$pg_link"
  fi
}

# Owner of a path, by name.
owner_of() { stat -c %U "$1"; }

# Creates (or checks) the cluster directory and the symlink when the Postgres OS user cannot reach datadir.
setup_pg_root() {
  if [[ -L "$pg_link" ]]; then
    local target
    target="$(readlink "$pg_link")"
    [[ -d "$target" ]] ||
      die "$pg_link points to $target, which is gone; run: scripts/services.sh wipe $datadir_arg $redis_port $pg_port"
    [[ ! -L "$target" && "$(owner_of "$target")" == "$pg_owner" ]] ||
      die "$target (target of $pg_link) is not a directory owned by $pg_owner; refusing to use it"
    return
  fi
  if [[ -d "$pg_link" ]]; then
    [[ "$(owner_of "$pg_link")" == "$pg_owner" ]] || chown "$pg_owner:" "$pg_link"
    return
  fi
  [[ ! -e "$pg_link" ]] || die "$pg_link exists and is neither a directory nor a symlink"

  if as_pg test -x "$datadir"; then
    mkdir -m 700 "$pg_link"
    ((EUID != 0)) || chown "$PG_OS_USER:" "$pg_link"
    return
  fi

  # The OS user cannot traverse to datadir: keep the cluster under /var/tmp, owned by that user.
  if [[ -e "$pg_fallback" || -L "$pg_fallback" ]]; then
    # Left behind by a datadir that was deleted by hand (no symlink points here any more): discard it.
    [[ ! -L "$pg_fallback" && "$(owner_of "$pg_fallback")" == "$pg_owner" ]] ||
      die "$pg_fallback exists but is not a directory owned by $pg_owner; remove it by hand"
    stop_pg_at "$pg_fallback" quiet
    rm -rf -- "$pg_fallback"
    say "discarded $pg_fallback, left behind by an earlier $datadir that was deleted"
  fi
  mkdir -m 700 "$pg_fallback"
  chown "$pg_owner:" "$pg_fallback"
  ln -s "$pg_fallback" "$pg_link"
  say "$pg_owner cannot traverse $datadir, so the Postgres cluster lives in $pg_fallback ($pg_link links there)"
}

# --- Redis -------------------------------------------------------------------------------------------

rcli() { redis-cli -h 127.0.0.1 -p "$redis_port" "$@"; }

redis_answers() { [[ "$(rcli ping 2>/dev/null || true)" == "PONG" ]]; }

# The working directory of the Redis that answers on the port.
redis_served_dir() { rcli --raw config get dir 2>/dev/null | sed -n 2p; }

redis_pid() {
  local pid
  [[ -f "$redis_pidfile" ]] || return 1
  pid="$(cat "$redis_pidfile" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == redis-server* ]] || return 1
  echo "$pid"
}

start_redis() {
  command -v redis-server >/dev/null 2>&1 || die "redis-server not found (run scripts/deps.sh)"
  if redis_answers; then
    local served
    served="$(redis_served_dir)"
    [[ "$served" == "$redis_dir" ]] ||
      die "port $redis_port is already served by another Redis (dir ${served:-unknown}); pick another port or stop it"
    say "redis: already running on 127.0.0.1:$redis_port"
    return
  fi
  local pid
  if pid="$(redis_pid)"; then
    die "a Redis of this datadir (pid $pid) runs but does not answer on port $redis_port; stop it first"
  fi
  mkdir -p "$redis_dir"
  rm -f "$redis_pidfile"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$redis_port" --dir "$redis_dir" \
    --appendonly yes --maxmemory-policy noeviction \
    --pidfile "$redis_pidfile" --logfile "$redis_log" </dev/null ||
    die "redis-server failed to start; see $redis_log"
  local waited=0
  until redis_answers; do
    if ((waited >= TIMEOUT * 10)); then
      tail -n 20 "$redis_log" >&2 2>/dev/null || true
      die "redis did not answer PING on 127.0.0.1:$redis_port within ${TIMEOUT}s; log: $redis_log"
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  say "redis: started on 127.0.0.1:$redis_port (dir $redis_dir)"
}

stop_redis() {
  local pid="" waited=0
  pid="$(redis_pid || true)"
  if redis_answers; then
    local served
    served="$(redis_served_dir)"
    if [[ "$served" != "$redis_dir" ]]; then
      say "redis: port $redis_port is served by another Redis (dir ${served:-unknown}); not stopping it"
      return
    fi
    # SHUTDOWN flushes and fsyncs the AOF; NOSAVE only skips the RDB snapshot.
    rcli shutdown nosave >/dev/null 2>&1 || true
  elif [[ -n "$pid" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
  else
    say "redis: not running"
    return
  fi
  while redis_answers || { [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; }; do
    if ((waited >= TIMEOUT * 10)); then
      die "redis (pid ${pid:-unknown}) did not stop within ${TIMEOUT}s"
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  say "redis: stopped"
}

status_redis() {
  local pid
  if redis_answers && [[ "$(redis_served_dir)" == "$redis_dir" ]]; then
    pid="$(redis_pid || echo '?')"
    say "redis:    running  pid $pid  127.0.0.1:$redis_port  dir $redis_dir"
    return 0
  fi
  if redis_answers; then
    say "redis:    port $redis_port is served by another Redis (dir $(redis_served_dir))"
  elif pid="$(redis_pid)"; then
    say "redis:    pid $pid runs but does not answer on 127.0.0.1:$redis_port"
  else
    say "redis:    not running (127.0.0.1:$redis_port)"
  fi
  return 3
}

# --- Postgres ----------------------------------------------------------------------------------------

pg_ready() { "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -t 2 >/dev/null 2>&1; }

# pg_ctl status for a cluster root: 0 running, non-zero otherwise.
pg_running_at() { [[ -f "$1/data/PG_VERSION" ]] && as_pg "$PGBIN/pg_ctl" -D "$1/data" status >/dev/null 2>&1; }

# The postmaster pid of a cluster root, or "?".
pg_pid_at() { head -n1 "$1/data/postmaster.pid" 2>/dev/null || echo '?'; }

stop_pg_at() {
  local root="$1" mode="${2:-}"
  if pg_running_at "$root"; then
    as_pg "$PGBIN/pg_ctl" -D "$root/data" -m fast -w -t "$TIMEOUT" -s stop ||
      die "pg_ctl stop failed for $root/data; log: $root/postgres.log"
    [[ "$mode" == quiet ]] || say "postgres: stopped"
  elif [[ "$mode" != quiet ]]; then
    say "postgres: not running"
  fi
}

# Writes the settings that depend on this invocation (port, socket dir); postgresql.conf includes them.
write_pg_settings() {
  local root="$1" sockdir="$1/run" sockets
  # A unix socket path must fit in sun_path (108 bytes); everything here uses TCP on 127.0.0.1 anyway.
  if ((${#sockdir} + 20 < 100)); then
    sockets="$sockdir"
  else
    sockets=""
  fi
  [[ "$sockdir" != *"'"* ]] || die "the cluster path must not contain a single quote: $root"
  # shellcheck disable=SC2016 # $1 is expanded by the inner sh
  as_pg sh -c 'umask 077; cat > "$1"' sh "$root/data/fencegate.conf" <<EOF
# Written by scripts/services.sh at each start; edit that script instead.
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$sockets'
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = 200
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
EOF
}

start_pg() {
  ensure_pg_user
  setup_pg_root
  local root
  root="$(pg_root)"
  [[ -n "$root" ]] || die "internal: no cluster directory for $datadir"

  if pg_running_at "$root"; then
    pg_ready || die "the cluster in $root/data runs (pid $(pg_pid_at "$root")) but does not answer on 127.0.0.1:$pg_port; was it started with another port? stop it first"
    say "postgres: already running on 127.0.0.1:$pg_port"
  else
    if pg_ready; then
      die "port $pg_port is already served by another Postgres; pick another port or stop it"
    fi
    if [[ ! -f "$root/data/PG_VERSION" ]]; then
      [[ ! -e "$root/data" ]] || die "$root/data exists but holds no cluster; run: scripts/services.sh wipe $datadir_arg $redis_port $pg_port"
      as_pg "$PGBIN/initdb" -D "$root/data" -U postgres -A trust -E UTF8 --no-locale \
        --no-instructions >"$root/initdb.log" 2>&1 ||
        { tail -n 20 "$root/initdb.log" >&2; die "initdb failed; log: $root/initdb.log"; }
      # shellcheck disable=SC2016 # $1 is expanded by the inner sh
      echo "include 'fencegate.conf'" | as_pg sh -c 'cat >> "$1"' sh "$root/data/postgresql.conf"
      say "postgres: initialized cluster in $root/data"
    fi
    as_pg mkdir -p -m 700 "$root/run"
    write_pg_settings "$root"
    if ! as_pg "$PGBIN/pg_ctl" -D "$root/data" -l "$root/postgres.log" -w -t "$TIMEOUT" -s start; then
      tail -n 20 "$root/postgres.log" >&2 2>/dev/null || true
      die "postgres failed to start on 127.0.0.1:$pg_port; log: $root/postgres.log"
    fi
    local waited=0
    until pg_ready; do
      if ((waited >= TIMEOUT * 10)); then
        tail -n 20 "$root/postgres.log" >&2 2>/dev/null || true
        die "postgres did not answer on 127.0.0.1:$pg_port within ${TIMEOUT}s; log: $root/postgres.log"
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
    say "postgres: started on 127.0.0.1:$pg_port (data $root/data)"
  fi
  ensure_pg_role_and_db
}

pg_admin() {
  PGCONNECT_TIMEOUT=5 "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" \
    -U postgres -d postgres "$@"
}

ensure_pg_role_and_db() {
  if [[ "$(pg_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'fencegate'")" != "1" ]]; then
    pg_admin -c "CREATE ROLE fencegate LOGIN SUPERUSER" || die "could not create role fencegate"
    say "postgres: created role fencegate"
  fi
  if [[ "$(pg_admin -c "SELECT 1 FROM pg_database WHERE datname = 'fencegate'")" != "1" ]]; then
    pg_admin -c "CREATE DATABASE fencegate OWNER fencegate" || die "could not create database fencegate"
    say "postgres: created database fencegate"
  fi
  PGCONNECT_TIMEOUT=5 "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" \
    -U fencegate -d fencegate -c "SET client_min_messages = warning" -f "$EXAMPLE_SQL" ||
    die "could not apply $EXAMPLE_SQL"
}

stop_pg() {
  local root
  root="$(pg_root)"
  if [[ -z "$root" ]]; then
    say "postgres: not running (no cluster in $datadir)"
    return
  fi
  stop_pg_at "$root"
}

status_pg() {
  local root
  root="$(pg_root)"
  if [[ -n "$root" ]] && pg_running_at "$root"; then
    if pg_ready; then
      say "postgres: running  pid $(pg_pid_at "$root")  127.0.0.1:$pg_port  data $root/data"
      return 0
    fi
    say "postgres: pid $(pg_pid_at "$root") runs from $root/data but does not answer on 127.0.0.1:$pg_port"
    return 3
  fi
  if pg_ready; then
    say "postgres: port $pg_port is served by another Postgres (none runs from ${root:-$datadir/pg})"
  else
    say "postgres: not running (127.0.0.1:$pg_port)"
  fi
  return 3
}

# --- wipe --------------------------------------------------------------------------------------------

wipe() {
  if [[ -e "$datadir" ]] && [[ ! -e "$datadir/$MARKER" ]] && [[ -n "$(ls -A "$datadir" 2>/dev/null)" ]]; then
    die "$datadir has no $MARKER file, so it was not made by this script; refusing to delete it"
  fi
  stop_redis
  stop_pg
  rm -rf -- "$datadir"
  # The cluster of this datadir under /var/tmp, whether or not the symlink to it is still there.
  if [[ -d "$pg_fallback" && ! -L "$pg_fallback" && "$(owner_of "$pg_fallback")" == "$pg_owner" ]]; then
    stop_pg_at "$pg_fallback" quiet
    rm -rf -- "$pg_fallback"
  fi
  say "wiped $datadir"
}

# --- main --------------------------------------------------------------------------------------------

needs_pg=1
case "$action" in
  start-redis | stop-redis) needs_pg=0 ;;
esac
if ((needs_pg)); then
  PGBIN="$(find_pgbin)" || die "Postgres binaries not found; set FG_PGBIN or run scripts/deps.sh"
fi
command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (run scripts/deps.sh)"

case "$action" in
  start)
    touch "$datadir/$MARKER"
    start_redis
    start_pg
    ;;
  start-redis)
    touch "$datadir/$MARKER"
    start_redis
    ;;
  start-pg)
    touch "$datadir/$MARKER"
    start_pg
    ;;
  stop)
    # Each in a subshell, so that a failure to stop one does not leave the other running.
    rc=0
    (stop_redis) || rc=1
    (stop_pg) || rc=1
    exit "$rc"
    ;;
  stop-redis) stop_redis ;;
  stop-pg) stop_pg ;;
  status)
    rc=0
    status_redis || rc=3
    status_pg || rc=3
    exit "$rc"
    ;;
  wipe) wipe ;;
  *) usage ;;
esac
