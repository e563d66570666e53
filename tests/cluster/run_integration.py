# SPDX-License-Identifier: Apache-2.0
"""The gateway's integration suite (tests/integration) in cluster mode: the cluster lab's three primaries and
three replicas (cluster_lab.py) started once, and each test file run against them with FG_TEST_REDIS_URL set to
the lab's redis-cluster:// URL. The harness then starts every gateway on the cluster, its Redis() routes each
command to the node that owns the key's slot, and the tests that cannot hold on a cluster skip with their
reason (harness.skip_in_cluster: they stop the one test Redis, or read the one-Redis key layout).

Owns: the lab's lifetime around the run and the choice of files. Must not: change what a test asserts.

    run_integration.py            the subset CI runs (ctest -R cluster.integration): SUBSET below
    run_integration.py --all      every tests/integration/test_*.py (the long run: 262-308 s on two cores)
    run_integration.py NAME...    the files named (lock_api, test_lock_api or test_lock_api.py)

Needs the environment of scripts/test (FG_BIN, FG_TEST_PG_DSN, FG_TEST_DATA, ...); run it all with
    scripts/test -R cluster.integration   after   export FG_CLUSTER_SUITE=all
Exits 1 when any file fails, and names them.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

from cluster_lab import ClusterLab

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(HERE, "..", "integration")

# What CI runs: one file or more of every area, each file whole: locks (the API, waiters parked and woken by the
# shard doorbell, FIFO), semaphores (their leases, and the lean acquire beside other holders, whose keys are a
# slot's), lock sets, listings merged over the primaries, revocation and watch, live leases, fenced writes to
# Postgres (fence_column) and to Redis, the audit of both stores' refusals, the console's API, the smoke test,
# crash recovery with places kept for a retry (their slots' liveness marks; about 25 s), and lease edge cases,
# whose ends' records moved to keys the scripts make (lib_lease.lua end_move) must stay in the slot (about 18 s),
# and the Postgres pool at its limit, which on a cluster the acquires meet too (each slot's first fences are
# reserved in Postgres; about 3 s).
# 19 files; 13 took 62 s with the lab's start on two cores at a load average of 2-8 (2026-12-02; the whole
# suite took 262-308 s), and the lean acquire's adds about 5 s. Left to --all: more of the same areas
# (semaphore limits, bound tables, metrics, gateway liveness, a frozen Postgres), files whose paths do not
# depend on the Redis under them (HTTP hardening, TLS, OpenAPI, logs, the Postgres-only paths), the browser
# console, and exclusion under faults (the cluster scenario's).
SUBSET = ["smoke", "lock_api", "lock_waiters", "lock_fifo", "lock_queue", "lock_recovery", "sem_leases", "sem_more",
          "locksets", "lease_list", "lease_revoke", "live_lease", "lease_edges", "fence_column", "redis_writes",
          "audit_shape", "console", "tokens", "pg_pool"]


def files(args: list[str]) -> list[str]:
    if args == ["--all"] or (not args and os.environ.get("FG_CLUSTER_SUITE") == "all"):
        return sorted(glob.glob(os.path.join(INTEGRATION, "test_*.py")))
    names = args or os.environ.get("FG_CLUSTER_SUITE", "").split() or SUBSET
    out = []
    for n in names:
        base = os.path.basename(n).removesuffix(".py")
        out.append(os.path.join(INTEGRATION, (base if base.startswith("test_") else f"test_{base}") + ".py"))
    missing = [f for f in out if not os.path.exists(f)]
    if missing:
        sys.exit(f"run_integration: no such test file: {', '.join(missing)}")
    return out


def main() -> int:
    chosen = files(sys.argv[1:])
    lab = ClusterLab()
    failed: list[str] = []
    try:
        lab.start()
        env = {**os.environ, "FG_TEST_REDIS_URL": lab.url()}
        print(f"cluster lab up: {lab.url()}; {len(chosen)} files", file=sys.stderr, flush=True)
        for path in chosen:
            t0 = time.monotonic()
            r = subprocess.run([sys.executable, path, "-v"], cwd=INTEGRATION, env=env)
            name = os.path.basename(path)
            print(f"== {name}: {'ok' if r.returncode == 0 else 'FAILED'} in {time.monotonic() - t0:.1f} s",
                  file=sys.stderr, flush=True)
            if r.returncode != 0:
                failed.append(name)
    finally:
        lab.stop(keep=bool(failed) or os.environ.get("FG_CLUSTER_KEEP") == "1")
    if failed:
        print(f"failed in cluster mode: {' '.join(failed)} (lab kept in {lab.root})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
