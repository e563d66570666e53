# SPDX-License-Identifier: Apache-2.0
"""The fault lab's topology, on loopback and without Docker: a Redis primary and replica watched by three
sentinels (`redis-server --sentinel`), a Postgres primary with a synchronous streaming standby (pg_basebackup),
three gateways and HAProxy health-checking them on /readyz. The second gateway runs with redis_pipeline_from 4,
so its calls also go on its threads' own Redis connections through every failover; the others share one. Every port is picked free by the kernel; all state
lives in one directory that stop() removes. When run as root, Postgres runs as the unprivileged user of
scripts/services.sh (FG_PG_OS_USER, default fencegate-pg).

Owns: starting, faulting (kill -9, SIGSTOP/SIGCONT, promotion) and stopping those processes. Must not: judge a
run (test_ha.py does), or touch any process it did not start.

Environment: FG_BIN (the gateway), FG_PGBIN (Postgres binaries), FG_PG_OS_USER.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

MASTER = "fgha"
DOWN_AFTER_MS = 1000     # sentinel down-after-milliseconds
SECRET = "fencegate-ha-lab-secret-not-for-production"
TABLE_SQL = """
CREATE TABLE ha_rows (id text PRIMARY KEY, holder text, fence bigint, seq bigint);
CREATE TABLE ha_history (n bigserial PRIMARY KEY, id text, holder text, fence bigint, seq bigint,
                         xid bigint NOT NULL DEFAULT txid_current(), at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION ha_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ha_history (id, holder, fence, seq) VALUES (NEW.id, NEW.holder, NEW.fence, NEW.seq); RETURN NEW; END $$;
CREATE TRIGGER ha_log AFTER INSERT OR UPDATE ON ha_rows FOR EACH ROW EXECUTE FUNCTION ha_log();
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct ports, free a moment ago. Each socket stays bound until all are picked: the kernel hands out a
    port again as soon as its socket closes, so n calls of free_port() name one port twice once in a few hundred
    labs of a dozen ports, and the second server on it fails to start."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"lab: timed out waiting for {what}")
        time.sleep(0.05)


def encode(*args: str) -> bytes:
    """One Redis command in RESP."""
    return ("*%d\r\n" % len(args) + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)).encode()


def read_reply(f):
    """Reads one RESP reply from the binary file f: str, int, list, None, or an Exception for -ERR."""
    line = f.readline().rstrip(b"\r\n")
    t, rest = line[:1], line[1:].decode()
    if t == b"+":
        return rest
    if t == b"-":
        return RuntimeError(rest)
    if t == b":":
        return int(rest)
    if t == b"$":
        return None if rest == "-1" else f.read(int(rest) + 2)[:-2].decode()
    if t == b"*":
        return None if rest == "-1" else [read_reply(f) for _ in range(int(rest))]
    raise RuntimeError(f"bad reply {line!r}")


def resp(port: int, *args: str, timeout: float = 1.0):
    """One Redis command over RESP; the decoded reply (str, int, list or an Exception for -ERR)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s, s.makefile("rb") as f:
        s.sendall(encode(*args))
        return read_reply(f)


def redis_answers(port: int) -> bool:
    try:
        return resp(port, "PING", timeout=0.3) == "PONG"
    except OSError:
        return False


class Lab:
    def __init__(self, gateways: int = 3):
        self.root = tempfile.mkdtemp(prefix="fencegate-ha-", dir="/var/tmp")
        os.chmod(self.root, 0o755)
        self.procs: dict[str, subprocess.Popen] = {}
        self.pgbin = os.environ.get("FG_PGBIN", "/usr/lib/postgresql/15/bin")
        self.bin = os.environ["FG_BIN"]
        self.pg_user = os.environ.get("FG_PG_OS_USER", "fencegate-pg") if os.geteuid() == 0 else None
        ports = free_ports(8 + gateways)
        self.redis_ports = ports[0:2]
        self.sentinel_ports = ports[2:5]
        self.pg_ports = ports[5:7]
        self.gw_ports = ports[7:7 + gateways]
        self.lb_port = ports[7 + gateways]
        self.pg_primary = 0   # index in pg_ports of the Postgres that takes writes
        self.paused: set[int] = set()

    # --- processes ------------------------------------------------------------------------------------
    def spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(os.path.join(self.root, f"{name}.log"), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env={**os.environ, **(env or {})}, cwd=self.root)
        log.close()
        self.procs[name] = p
        return p

    def as_pg(self, argv: list[str], check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        if self.pg_user:
            argv = ["runuser", "-u", self.pg_user, "--", *argv]
        r = subprocess.run(argv, capture_output=True, text=True, cwd="/", timeout=120, input=stdin)
        if check and r.returncode != 0:
            raise RuntimeError(f"lab: {' '.join(argv)} failed: {r.stderr.strip() or r.stdout.strip()}")
        return r

    def pg_dir(self, i: int) -> str:
        return os.path.join(self.root, f"pg{i}")

    def make_pg_dir(self, i: int) -> str:
        """An empty data directory for slot i, owned by the Postgres OS user."""
        d = self.pg_dir(i)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d, mode=0o700)
        if self.pg_user:
            shutil.chown(d, self.pg_user, self.pg_user)
        return d

    # --- Redis -----------------------------------------------------------------------------------------
    def start_redis(self, i: int, replica_of: int | None):
        argv = ["redis-server", "--port", str(self.redis_ports[i]), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.root, "--dbfilename", f"redis{i}.rdb",
                "--maxmemory-policy", "noeviction"]
        if replica_of is not None:
            argv += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.spawn(f"redis{i}", argv)
        wait(lambda: redis_answers(self.redis_ports[i]), 15, f"redis {i}")

    def start_sentinel(self, i: int):
        conf = os.path.join(self.root, f"sentinel{i}.conf")
        primary = self.redis_ports[0]
        with open(conf, "w") as f:
            f.write(f"port {self.sentinel_ports[i]}\nbind 127.0.0.1\ndir {self.root}\n"
                    f"sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n"
                    f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                    f"sentinel failover-timeout {MASTER} 2000\n"
                    f"sentinel parallel-syncs {MASTER} 1\n")
        self.spawn(f"sentinel{i}", ["redis-server", conf, "--sentinel"])
        wait(lambda: redis_answers(self.sentinel_ports[i]), 15, f"sentinel {i}")

    def redis_primary_port(self) -> int:
        """The primary's port as the sentinels name it."""
        for p in self.sentinel_ports:
            try:
                r = resp(p, "SENTINEL", "get-master-addr-by-name", MASTER, timeout=0.5)
                if isinstance(r, list):
                    return int(r[1])
            except OSError:
                continue
        raise RuntimeError("lab: no sentinel answers")

    def redis_index(self, port: int) -> int:
        return self.redis_ports.index(port)

    # --- Postgres --------------------------------------------------------------------------------------
    def write_pg_conf(self, i: int, synchronous: bool):
        conf = (f"listen_addresses = '127.0.0.1'\nport = {self.pg_ports[i]}\nunix_socket_directories = ''\n"
                f"wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\nfsync = off\n"
                f"max_connections = 100\nlogging_collector = off\nwal_keep_size = '64MB'\n"
                f"synchronous_standby_names = '{'*' if synchronous else ''}'\n")
        self.as_pg(["sh", "-c", 'cat > "$1"', "sh", os.path.join(self.pg_dir(i), "lab.conf")], stdin=conf)

    def pg_ctl(self, i: int, *args: str):
        logs = os.path.join(self.root, "pglogs")
        if not os.path.isdir(logs):
            os.makedirs(logs)
            if self.pg_user:
                shutil.chown(logs, self.pg_user, self.pg_user)
        return self.as_pg([f"{self.pgbin}/pg_ctl", "-D", self.pg_dir(i), "-l",
                           os.path.join(logs, f"pg{i}.log"), "-w", "-t", "60", *args])

    def psql(self, sql: str, i: int | None = None, db: str = "fencegate") -> str:
        port = self.pg_ports[self.pg_primary if i is None else i]
        r = subprocess.run([f"{self.pgbin}/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                            "-p", str(port), "-U", "postgres", "-d", db, "-c", sql],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
        if r.returncode != 0:
            raise RuntimeError(f"lab: psql failed: {r.stderr.strip()}")
        return r.stdout

    def pg_pid(self, i: int) -> int:
        with open(os.path.join(self.pg_dir(i), "postmaster.pid")) as f:
            return int(f.readline())

    def start_pg_primary(self):
        d = self.make_pg_dir(0)
        self.as_pg([f"{self.pgbin}/initdb", "-D", d, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale",
                    "--no-instructions"])
        self.as_pg(["sh", "-c", 'cat >> "$1"', "sh", f"{d}/postgresql.conf"], stdin="include 'lab.conf'\n")
        self.write_pg_conf(0, synchronous=False)
        self.pg_ctl(0, "start")
        self.psql("CREATE ROLE fencegate LOGIN SUPERUSER", db="postgres")
        self.psql("CREATE DATABASE fencegate OWNER fencegate", db="postgres")
        self.psql(TABLE_SQL)

    def start_pg_standby(self, i: int, primary: int):
        """A fresh standby in slot i, copied from primary, which then waits for it on every commit."""
        d = self.make_pg_dir(i)
        self.as_pg([f"{self.pgbin}/pg_basebackup", "-h", "127.0.0.1", "-p", str(self.pg_ports[primary]),
                    "-U", "postgres", "-D", d, "-R", "-X", "stream", "-c", "fast"])
        self.write_pg_conf(i, synchronous=False)
        self.pg_ctl(i, "start")
        self.write_pg_conf(primary, synchronous=True)
        self.pg_ctl(primary, "reload")
        wait(lambda: self.psql("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                               primary).strip() == "1", 30, "a synchronous standby")

    def pg_dsn(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.pg_ports)
        return f"postgresql://fencegate@{hosts}/fencegate?target_session_attrs=read-write"

    # --- gateways and balancer ---------------------------------------------------------------------------
    def redis_url(self) -> str:
        return "redis-sentinel://" + ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports) + f"/{MASTER}"

    def start_gateway(self, i: int):
        cfg = os.path.join(self.root, "gateway.json")
        with open(cfg, "w") as f:
            f.write('{"tables": {"ha_rows": {"key": "id", "columns": ["holder", "fence", "seq"]}},'
                    ' "request_timeout_ms": 3000, "statement_timeout_ms": 3000,'
                    f' "allowed_hosts": ["127.0.0.1:{self.lb_port}", "127.0.0.1:{self.gw_ports[i]}"]}}')
        self.spawn(f"gw{i}", [self.bin], {
            "FENCEGATE_CONFIG": cfg, "FENCEGATE_LISTEN": f"127.0.0.1:{self.gw_ports[i]}",
            "FENCEGATE_REDIS_URL": self.redis_url(), "FENCEGATE_PG_DSN": self.pg_dsn(),
            "FENCEGATE_SECRET": SECRET, "FENCEGATE_LOG_LEVEL": "warn", "FENCEGATE_PG_POOL_SIZE": "6",
            "FENCEGATE_REDIS_PIPELINE_FROM": "4" if i == 1 else "0",
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"})
        wait(lambda: self.http_status(self.gw_ports[i], "/readyz") == 200, 60, f"gateway {i}")

    def start_haproxy(self):
        cfg = os.path.join(self.root, "haproxy.cfg")
        servers = "".join(f"  server g{i} 127.0.0.1:{p} check\n" for i, p in enumerate(self.gw_ports))
        with open(cfg, "w") as f:
            f.write("global\n  maxconn 1000\n"
                    "defaults\n  mode http\n  timeout connect 500ms\n  timeout client 30s\n"
                    "  timeout server 10s\n  retries 3\n  option redispatch 1\n"
                    "  retry-on conn-failure empty-response\n"
                    f"frontend fg\n  bind 127.0.0.1:{self.lb_port}\n  default_backend gateways\n"
                    "backend gateways\n  balance roundrobin\n  option httpchk GET /readyz\n"
                    "  http-check expect status 200\n  default-server inter 250ms fall 2 rise 1\n" + servers)
        self.spawn("haproxy", ["haproxy", "-f", cfg, "-db"])
        wait(lambda: self.http_status(self.lb_port, "/readyz") == 200, 30, "haproxy")

    @staticmethod
    def http_status(port: int, path: str) -> int | None:
        import http.client
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            status = c.getresponse().status
            c.close()
            return status
        except OSError:
            return None

    def start(self):
        self.start_redis(0, None)
        self.start_redis(1, self.redis_ports[0])
        for i in range(3):
            self.start_sentinel(i)
        wait(lambda: self.sentinels_agree(), 60, "sentinels to see the replica")
        self.start_pg_primary()
        self.start_pg_standby(1, 0)
        for i in range(len(self.gw_ports)):
            self.start_gateway(i)
        self.start_haproxy()
        return self

    def sentinels_agree(self) -> bool:
        try:
            return all(isinstance(r := resp(p, "SENTINEL", "replicas", MASTER), list) and len(r) >= 1 and
                       isinstance(resp(p, "SENTINEL", "sentinels", MASTER), list) and
                       len(resp(p, "SENTINEL", "sentinels", MASTER)) == 2 for p in self.sentinel_ports)
        except OSError:
            return False

    # --- faults ------------------------------------------------------------------------------------------
    def kill(self, name: str):
        p = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def pause(self, pid: int):
        """SIGSTOP; a process that ended meanwhile (a Postgres backend whose client left) is skipped."""
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        self.paused.add(pid)

    def resume(self, pid: int):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.paused.discard(pid)

    def pg_processes(self, i: int) -> list[int]:
        """The postmaster of slot i and its children."""
        top = self.pg_pid(i)
        pids = [top]
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == top:
                            pids.append(int(entry))
                except (OSError, IndexError, ValueError):
                    continue
        return pids

    def kill_pg(self, i: int):
        """kill -9 of the whole server (postmaster and backends), like a crashed host."""
        for pid in self.pg_processes(i):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def promote(self, i: int):
        self.pg_ctl(i, "promote")
        self.pg_primary = i

    # --- teardown ----------------------------------------------------------------------------------------
    def stop(self, keep: bool = False):
        for pid in list(self.paused):
            self.resume(pid)
        for name, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL if name.startswith(("redis", "sentinel")) else signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for i in range(len(self.pg_ports)):
            if os.path.exists(os.path.join(self.pg_dir(i), "postmaster.pid")):
                self.as_pg([f"{self.pgbin}/pg_ctl", "-D", self.pg_dir(i), "-m", "immediate", "-w", "stop"],
                           check=False)
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
