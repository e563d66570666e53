# SPDX-License-Identifier: Apache-2.0
"""docker-compose.ha.yml: it parses and describes the topology of the fault lab (tests/ha/): a Redis primary
and replica, three sentinels monitoring the master the gateways name, a Postgres primary and a standby copied
from it, two gateways reaching Redis through the sentinels and Postgres through a multi-host DSN that follows a
promotion, and HAProxy checking the gateways on /readyz. The gateway URLs must parse as the gateway parses them.

Owns: the replicated deployment file's agreement with the gateway. Must not: run docker (CI has none).
"""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import env  # noqa: E402

import yaml  # python3-yaml, installed by scripts/deps.sh  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def compose() -> dict:
    with open(os.path.join(ROOT, "docker-compose.ha.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def text(service: dict) -> str:
    """Everything a service runs, as one string."""
    parts = []
    for key in ("command", "entrypoint"):
        v = service.get(key, [])
        parts.append(v if isinstance(v, str) else " ".join(str(w) for w in v))
    return " ".join(parts)


class ComposeHaTest(unittest.TestCase):
    def setUp(self):
        self.services = compose()["services"]

    def test_topology(self):
        for name in ("redis-primary", "redis-replica", "sentinel1", "sentinel2", "sentinel3", "postgres-primary",
                     "postgres-standby", "gateway1", "gateway2", "haproxy"):
            self.assertIn(name, self.services)
        self.assertIn("--replicaof redis-primary 6379", text(self.services["redis-replica"]))
        self.assertIn("pg_basebackup -h postgres-primary", text(self.services["postgres-standby"]))

    def test_gateways_follow_failovers(self):
        for name in ("gateway1", "gateway2"):
            e = self.services[name]["environment"]
            url = e["FENCEGATE_REDIS_URL"]
            m = re.fullmatch(r"redis-sentinel://([^/]+)/([^/]+)", url)
            self.assertIsNotNone(m, url)
            for host in m.group(1).split(","):
                self.assertIn(host.split(":")[0], self.services)
            for s in ("sentinel1", "sentinel2", "sentinel3"):
                self.assertIn(f"sentinel monitor {m.group(2)} redis-primary 6379 2", text(self.services[s]))
            dsn = e["FENCEGATE_PG_DSN"]
            self.assertIn("postgres-primary:5432,postgres-standby:5432", dsn)
            self.assertIn("target_session_attrs=read-write", dsn)
            r = subprocess.run([env("FG_BIN"), "--help"], capture_output=True, text=True, timeout=30)
            self.assertIn("redis-sentinel://", r.stdout + r.stderr)

    def test_haproxy_checks_readyz(self):
        path = os.path.join(ROOT, "deploy", "ha", "haproxy.cfg")
        with open(path, encoding="utf-8") as f:
            cfg = f.read()
        self.assertIn("option httpchk GET /readyz", cfg)
        for name in ("gateway1", "gateway2"):
            self.assertRegex(cfg, rf"server {name} {name}:8480 check")
        for volume in self.services["haproxy"]["volumes"] + self.services["postgres-primary"]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                self.assertTrue(os.path.exists(os.path.join(ROOT, source)), source)


if __name__ == "__main__":
    unittest.main()
