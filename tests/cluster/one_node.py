# SPDX-License-Identifier: Apache-2.0
"""A Redis Cluster of one primary behind a proxy, for tests of the gateway's cluster client at one node.

The primary serves every slot and announces the proxy's port (harness.TcpProxy) as its address, so every
connection the gateway makes to it goes through the proxy, which a test arms to hold back, cut or trickle what
passes. The cluster has a Postgres database of its own: its slots were never written (fencegate.fence_slots).

Owns: starting and removing that node, its proxy and its database. Must not: start a gateway.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from cluster_lab import free_ports, redis_answers, resp, wait  # noqa: E402
from harness import TcpProxy, psql  # noqa: E402


class OneNodeCluster:
    """The node (port: its own, for the test's commands), its proxy (proxy.port: the gateway's) and dsn."""

    def __init__(self, name: str, hold: bytes, redis_args: tuple[str, ...] = ()):
        base = os.environ.get("FG_TEST_DATA") or "/var/tmp"
        os.makedirs(base, exist_ok=True)
        self.root = tempfile.mkdtemp(prefix=f"fencegate-{name}-", dir=base)
        self.port, bus = free_ports(2)
        self.proxy = TcpProxy(self.port, hold=hold, armed=False)
        self.node = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--cluster-port", str(bus), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-announce-ip",
             "127.0.0.1", "--cluster-announce-port", str(self.proxy.port), "--dir", self.root, "--save", "",
             "--appendonly", "no", "--logfile", "redis.log", *redis_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=self.root)
        wait(lambda: redis_answers(self.port), 15, "the cluster node")
        resp(self.port, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        wait(lambda: "cluster_state:ok" in resp(self.port, "CLUSTER", "INFO"), 15, "the one-node cluster")
        self.db = f"fg_{name}_{uuid.uuid4().hex[:10]}"
        psql(f'CREATE DATABASE "{self.db}"')
        self.dsn = os.environ["FG_TEST_PG_DSN"].rsplit("/", 1)[0] + "/" + self.db

    def gateway_env(self, credentials: str = "") -> dict[str, str]:
        """A gateway's environment that reaches the node through the proxy and uses the cluster's database."""
        return {"FENCEGATE_REDIS_URL": f"redis-cluster://{credentials}127.0.0.1:{self.proxy.port}",
                "FENCEGATE_PG_DSN": self.dsn}

    def close(self) -> None:
        self.proxy.close()
        self.node.kill()
        self.node.wait(10)
        psql(f'DROP DATABASE "{self.db}" WITH (FORCE)')
        shutil.rmtree(self.root, ignore_errors=True)
