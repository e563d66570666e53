#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/queue_cost.py - the Redis instructions of the scripts of a semaphore or a lock with a queue, in the
seed semaphore scenario's pattern, exactly and with no gateway: what a contended hand-over costs Redis, per
script, for one or more builds' scripts side by side.

The seed scenario (bench/sem.sh: limit 5, 30 workers of one gateway) runs, per job, one queueing acquire (the
lean `sem_acquire_queue` where the build has it, as the gateway runs it on a name it found with a queue; the full
`sem_acquire` when that answers "contended" or the build has none) and one release that hands the slot over
in-process to the oldest waiter (a waiter of the releasing gateway: no doorbell, no claim): the lean
`sem_release_handover` where the build has it, likewise, else the full `sem_release`. Here the same
calls, with the gateway's keys and arguments, are made straight to a redis-server under callgrind (counting
inside luaCallFunction: the keys and arguments handed to Lua, the script and the commands it calls), in the
scenario's bursts: the five holders release one after another, then the five released workers queue again.
Each burst of one script is counted apart. `--kind lock` runs the same with a lock (`lock_acquire`, or the lean
`lock_acquire_queue` first, and `lock_release`): one holder, 29 waiters, bursts of one. Nothing here depends on
timing, so a change of a script moves the figures by exactly what it costs.

    python3 bench/queue_cost.py --lua build-a/generated/lua --lua build-b/generated/lua --jobs 200
    python3 bench/queue_cost.py --kind lock --lua build-a/generated/lua --jobs 200
    python3 bench/queue_cost.py --request-ids --lua build-a/generated/lua --jobs 200

--request-ids: each acquire carries a fresh request_id, as the client libraries send one by default (clients/):
the lean queue join takes it where the build's does (since 2026-12-05; the full acquire script before), and each
grant keeps the waiter's request_id.

--lua: a build's generated/lua folder (each script as Redis runs it; the order of the keys from the lua_scripts.h
beside it); a side per folder, in the order given.
Prints per side: instructions per release, per queueing acquire, per job, and the commands each ran.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time

DEBIAN_PYTHON = "/usr/bin/python3"  # the interpreter of python3-redis
redis = None  # python3-redis, imported by main

WORKERS, TTL_MS, HOLD_MS = 30, 60000, 1800000
CLAIM_MS, MAX_WAITERS, RID_TTL_MS, KEEP_MS, MARKER_MS = 3000, 10000, 130000, 600000, 600000
# A lock queue's keys live the waiter's wait_ms (10 s, as in RID_TTL_MS) and the waiter lease (CLAIM_MS) from a join
# at least, and are given a waiter lease more when they have less (lib_lease.lua queue_keep), so that in the scenario
# (a join every 20 ms or so) one join in about 150 sets them and the others find them long enough. Under callgrind a
# job takes a second or two, which would make that one join in two: by default the keys are given an hour more here
# (--queue-slack-ms), so every counted join is one that finds them long enough; --queue-slack-ms 0 counts joins that
# each set them.
QUEUE_MS = 10000 + CLAIM_MS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def library(folder: str, script: str) -> tuple[str, str, list[str]]:
    """The library text of script in folder, its function's name (its first line: #!lua name=...) and the
    names of its arguments in their order (its lines "A_<name> = ARGV[<i>]"), so that each build gets the
    arguments it takes."""
    with open(os.path.join(folder, script + ".lua")) as f:
        text = f.read()
    order = sorted((int(i), n) for n, i in re.findall(r"^A_(\w+) = ARGV\[(\d+)\]$", text, re.M))
    return text, text.split("\n", 1)[0].split("name=", 1)[1].strip(), [n for _, n in order]


# Per kind: its scripts, its slots (the limit), the library of its KEYS (LIB_<LIB>_KEY_<name> in the build's
# lua_scripts.h), the prefix of its own keys and its listing index.
KINDS = {
    "semaphore": {"acquire": "sem_acquire", "release": "sem_release", "limit": 5, "lib": "SEM", "prefix": "fg:sm:",
                  "index": "fg:idx:sm", "queue": "sem_acquire_queue", "handover": "sem_release_handover",
                  "record": "l"},
    "lock": {"acquire": "lock_acquire", "release": "lock_release", "limit": 1, "lib": "LOCK", "prefix": "fg:lk:",
             "index": "fg:idx:lk", "queue": "lock_acquire_queue", "record": "h"},
}
# The keys of a lease's KEYS by the name the build's lua_scripts.h gives each, as src/lease/lease_keys.c and
# src/store/backend/redis_keys.h make them for one Redis: a suffix of the lease's own keys, or a key shared by
# all leases.
OWN_SUFFIX = {"HOLDER": "h", "HOLDERS": "h", "DATA": "d", "QUEUE": "q", "WAITERS": "w", "LIMIT": "l", "TICKETS": "t",
              "RIDS": "r", "RID_UNTIL": "e", "RID_ONE": "i", "RELEASED": "x", "ENDED": "n", "WATCHED": "v"}
SHARED = {"FENCE": "fg:fence", "FENCE_LIMIT": "fg:fence_limit", "GATEWAYS": "fg:gateways", "REVOKED": "fg:revoked"}


def keys(folder: str, kind: dict, name: str, table: str | None = None) -> list[str]:
    """The KEYS of lease name's scripts in the order of the build whose generated/lua folder is folder (its
    lua_scripts.h beside it), those of the kind's library or, with table, of that script (SEM_ACQUIRE_QUEUE);
    exits on a key this script does not know how to name."""
    with open(os.path.join(folder, os.pardir, "lua_scripts.h")) as f:
        header = f.read()
    lib = table or f"LIB_{kind['lib']}"
    count = int(re.search(rf"^#define {lib}_NKEYS (\d+)$", header, re.M).group(1))
    at = {int(i): n for n, i in re.findall(rf"^#define {lib}_KEY_(\w+) (\d+)$", header, re.M)
          if not n.startswith("LIB_")}
    out = []
    for i in range(count):
        n = at.get(i)
        if n == "INDEX":
            out.append(kind["index"])
        elif n in SHARED:
            out.append(SHARED[n])
        elif n in OWN_SUFFIX:
            out.append(f"{kind['prefix']}{{{name}}}:{OWN_SUFFIX[n]}")
        elif n == "MOVED_END":  # a release's, of its lease's end moved away: none here is retried (fence 0)
            out.append(f"{kind['prefix']}{{{name}}}:{kind['record']}:0")
        elif n == "RID_MOVED":  # an acquire's, of its request id moved away: the caller fills in the id
            out.append(f"{kind['prefix']}{{{name}}}:i:{{rid}}")
        else:
            sys.exit(f"queue_cost: {lib.lower()}'s key {i + 1} ({n}) is one this script does not name")
    return out


def commands(r: redis.Redis) -> int:
    """Calls of the commands scripts ran, from INFO commandstats (FCALL and INFO left out)."""
    total = 0
    for name, stat in r.info("commandstats").items():
        if name.removeprefix("cmdstat_") not in ("fcall", "info"):
            total += stat["calls"]
    return total


def side(folder: str, kind: dict, jobs: int, workdir: str, queue_slack_ms: int, request_ids: bool) -> dict:
    port = free_port()
    out = os.path.join(workdir, "callgrind.out")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--toggle-collect=luaCallFunction",
                             f"--callgrind-out-file={out}", "redis-server", "--port", str(port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port, decode_responses=True)
        for _ in range(600):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        acq_text, acq, acq_args = library(folder, kind["acquire"])
        rel_text, rel, rel_args = library(folder, kind["release"])
        limit = kind["limit"]
        r.execute_command("FUNCTION", "LOAD", "REPLACE", acq_text)
        r.execute_command("FUNCTION", "LOAD", "REPLACE", rel_text)
        # The lean queue join (a build that has one): what a gateway runs first for an acquire that waits on a
        # name it lately found with a queue, the full script only when that answers "contended".
        lean = kind.get("queue") and os.path.exists(os.path.join(folder, kind["queue"] + ".lua"))
        if lean:
            queue_text, queue_fn, queue_args = library(folder, kind["queue"])
            r.execute_command("FUNCTION", "LOAD", "REPLACE", queue_text)
        r.execute_command("SET", "fg:fence", "100000")
        r.execute_command("SET", "fg:fence_limit", "100000000")
        inst = secrets.token_hex(16)
        r.execute_command("ZADD", "fg:gateways", str(int(time.time() * 1000) + 3_600_000), inst)
        name = "bench-queue-cost"
        k = keys(folder, kind, name)
        release_keys = keys(folder, kind, name, kind["release"].upper())
        acquire_keys = keys(folder, kind, name, kind["acquire"].upper())
        queue_keys = keys(folder, kind, name, kind["queue"].upper()) if lean else []
        # A gateway whose lean joins say they name the request ids' keys last for a request_id alone leaves them
        # out of a join without one (src/lease/lease_keys.h lease_keys_of_request); one before named them all.
        rid_keys_last = lean and "a call without a request_id names none of them" in library(folder, kind["queue"])[0]
        # The lean hand-over (a build that has one), likewise the release's first script on such a name.
        handover = kind.get("handover") and os.path.exists(os.path.join(folder, kind["handover"] + ".lua"))
        if handover:
            handover_text, handover_fn, handover_args = library(folder, kind["handover"])
            r.execute_command("FUNCTION", "LOAD", "REPLACE", handover_text)
            handover_keys = keys(folder, kind, name, kind["handover"].upper())

        def acquire() -> str:
            lease, attach = secrets.token_hex(16), secrets.token_hex(16)
            rid = "req-" + secrets.token_hex(8) if request_ids else ""
            given = {"name": name, "lease": lease, "request_id": rid, "ttl_ms": TTL_MS, "max_hold_ms": HOLD_MS,
                     "owner": "", "wait": "1", "instance": inst, "attach": attach, "claim_ms": CLAIM_MS,
                     "max_waiters": MAX_WAITERS, "request_id_ttl_ms": RID_TTL_MS, "limit": limit,
                     "keep_ms": KEEP_MS, "mark_ms": "", "queue_ms": QUEUE_MS,
                     "queue_keep_ms": QUEUE_MS + queue_slack_ms}
            if lean and (not rid or "request_id" in queue_args) and len(holders) == limit:
                # The waiter's record up to its "since" value, as the gateway writes it (lease_queue_join_init).
                given["record"] = (f'{{"inst":"{inst}","attach":"{attach}","ttl":"{TTL_MS}","max_hold":"{HOLD_MS}",'
                                   f'"owner":"","rid":"{rid}","since":')
                rid_keys = sum(k.startswith(f"{kind['prefix']}{{{name}}}:{s}") for s in "rei" for k in queue_keys)
                named = [k.replace("{rid}", rid) for k in queue_keys]
                named = named if rid or not rid_keys_last else named[:-rid_keys]
                reply = r.execute_command("FCALL", queue_fn, len(named), *named,
                                          *(given[a] for a in queue_args))
                if not reply.startswith("contended"):
                    return lease, reply
            named = [k.replace("{rid}", rid) for k in acquire_keys]
            return lease, r.execute_command("FCALL", acq, len(named), *named, *(given[a] for a in acq_args))

        def release(lease: str) -> str:
            # fence: read by a retried release alone, which none here is.
            given = {"name": name, "lease": lease, "fence": "0", "claim_ms": CLAIM_MS, "marker_ms": MARKER_MS,
                     "keep_ms": KEEP_MS, "instance": inst}
            if handover:
                reply = r.execute_command("FCALL", handover_fn, len(handover_keys), *handover_keys,
                                          *(given[a] for a in handover_args))
                if not reply.startswith("contended"):
                    return reply
            return r.execute_command("FCALL", rel, len(release_keys), *release_keys,
                                     *(given[a] for a in rel_args))

        holders, queue = [], []
        for _ in range(WORKERS):
            lease, reply = acquire()
            (holders if reply.startswith("granted") else queue).append(lease)
        assert len(holders) == limit and len(queue) == WORKERS - limit, (holders, queue)

        def counted(fn) -> tuple[int, int]:
            """fn()'s instructions (callgrind) and script commands."""
            before = commands(r)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            fn()
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            dumps = sorted((f for f in os.listdir(workdir) if f.startswith("callgrind.out.")),
                           key=lambda f: int(f.rsplit(".", 1)[1]))
            with open(os.path.join(workdir, dumps[-1])) as f:
                n = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
            return n, commands(r) - before

        rel_ins = acq_ins = rel_cmds = acq_cmds = 0
        done = 0
        while done < jobs:
            burst = holders[:limit]

            def releases():
                for lease in burst:
                    reply = release(lease)
                    assert reply.startswith("released") and " 13 " in reply, reply
                    holders.remove(lease)
                    holders.append(queue.pop(0))  # the oldest waiter, handed the slot in the same step

            def acquires():
                for _ in burst:
                    lease, reply = acquire()
                    assert reply.startswith("queued"), reply
                    queue.append(lease)

            n, c = counted(releases)
            rel_ins, rel_cmds = rel_ins + n, rel_cmds + c
            n, c = counted(acquires)
            acq_ins, acq_cmds = acq_ins + n, acq_cmds + c
            done += len(burst)
        return {"release": rel_ins / done, "acquire": acq_ins / done, "job": (rel_ins + acq_ins) / done,
                "release_cmds": rel_cmds / done, "acquire_cmds": acq_cmds / done, "jobs": done}
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lua", action="append", required=True, help="a build's generated/lua folder (repeatable)")
    ap.add_argument("--kind", choices=sorted(KINDS), default="semaphore")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--keep", help="keep each side's callgrind dumps in KEEP/<n> (for callgrind_annotate)")
    ap.add_argument("--request-ids", action="store_true",
                    help="each acquire carries a fresh request_id (the client libraries' default)")
    ap.add_argument("--queue-slack-ms", type=int, default=3_600_000,
                    help="how much longer than a join needs a lock queue's keys are given (queue_keep_ms; 0: every "
                         "join sets them)")
    args = ap.parse_args()
    global redis
    try:
        import redis  # python3-redis
    except ImportError:
        if sys.executable == DEBIAN_PYTHON or not os.path.exists(DEBIAN_PYTHON):
            sys.exit("queue_cost: python3-redis is not importable (scripts/deps.sh bench)")
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
    if not shutil.which("valgrind"):
        sys.exit("queue_cost: valgrind is needed (scripts/deps.sh bench)")
    kind = KINDS[args.kind]
    print(f"{args.kind}: {args.jobs} jobs in bursts of {kind['limit']}, limit {kind['limit']}, {WORKERS} workers of "
          "one gateway; instructions counted inside luaCallFunction"
          + ("; every acquire with a request_id" if args.request_ids else ""))
    print("| scripts | release | queueing acquire | job | commands per release / acquire |")
    print("|---|---|---|---|---|")
    for i, folder in enumerate(args.lua):
        with tempfile.TemporaryDirectory(prefix="queue_cost.") as workdir:
            f = side(folder, kind, args.jobs, workdir, args.queue_slack_ms, args.request_ids)
            if args.keep:
                shutil.copytree(workdir, os.path.join(args.keep, str(i)), dirs_exist_ok=True)
        print(f"| {folder} | {f['release']:,.0f} | {f['acquire']:,.0f} | {f['job']:,.0f} | "
              f"{f['release_cmds']:.1f} / {f['acquire_cmds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
