# SPDX-License-Identifier: Apache-2.0
"""Who the gateway agrees to talk to in Redis: an ACL user named in a redis:// URL (AUTH user password), a
user without the right to ask ROLE (refused: the gateway cannot know it talks to a primary), one without INFO
(refused: without the run_id it cannot tell a restarted Redis apart, and would recover the fences on every new
connection), and a replica (refused: a replica never receives a lease script), each seen through /readyz and
an acquire.

Broken variant caught: with the ROLE check of connect_new removed, test_user_without_role_is_refused got 200
from /readyz, and test_replica_is_refused found the gateway using the replica until a script's first write
failed (READONLY), never refusing it for what it is. With INFO's refusal taken as a run_id unknown,
test_user_without_info_is_refused found the gateway ready, raising every fence on each new connection.

Owns: the connection set-up of the Redis module. Must not: test sentinels (tests/ha/ does).
"""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import TEST_SECRET, Gateway, Redis, env, free_port, http, skip_in_cluster, test_data_dir, wait_for  # noqa: E402

USER, PASSWORD = "fg_gateway", "gateway-password-for-tests"


def readyz(port):
    """(status, body) of /readyz on port, or None while nothing answers."""
    try:
        r = http("GET", f"http://127.0.0.1:{port}/readyz", timeout=5)
        return r.status, r.body
    except OSError:
        return None


@skip_in_cluster("it names the one test Redis, and servers of its own, in redis:// URLs")
class RedisRolesTest(unittest.TestCase):
    def serve_unready(self, url):
        """A gateway that is expected never to become ready (the harness would stop it): its port."""
        port = free_port()
        e = {k: v for k, v in os.environ.items() if not k.startswith("FENCEGATE_")}
        e.update(FENCEGATE_LISTEN=f"127.0.0.1:{port}", FENCEGATE_REDIS_URL=url,
                 FENCEGATE_PG_DSN=env("FG_TEST_PG_DSN"), FENCEGATE_SECRET=TEST_SECRET)
        self.log_path = os.path.join(test_data_dir(), f"redis-roles-{port}.log")
        with open(self.log_path, "ab") as log:
            p = subprocess.Popen([env("FG_BIN")], env=e, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.addCleanup(p.wait)
        self.addCleanup(p.terminate)
        return port

    def log_says(self, text):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return text in f.read()

    def setUp(self):
        self.admin = Redis()
        self.port = int(env("FG_TEST_REDIS_PORT"))
        self.addCleanup(self.admin.close)
        self.addCleanup(lambda: self.admin.cmd("ACL", "DELUSER", USER, USER + "_norole"))

    def test_acl_user(self):
        self.admin.cmd("ACL", "SETUSER", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all", "-@dangerous", "+role",
                       "+info", "+config|get")
        with Gateway(env_overrides={"FENCEGATE_REDIS_URL": f"redis://{USER}:{PASSWORD}@127.0.0.1:{self.port}/0"}) as gw:
            r = http("POST", gw.url("/v1/locks/acl:one/acquire"), {"ttl_ms": 1000})
            self.assertEqual(r.status, 200, r)
            who = [c for c in self.admin.cmd("CLIENT", "LIST").splitlines() if f"user={USER}" in c]
            self.assertTrue(who, "no connection of the ACL user")

    def assert_user_refused(self, rules: list[str], reason: str) -> None:
        """A gateway whose Redis user has the ACL rules never becomes ready, logs reason and answers 503."""
        self.admin.cmd("ACL", "SETUSER", USER + "_norole", "on", f">{PASSWORD}", "~*", "&*", *rules)
        port = self.serve_unready(f"redis://{USER}_norole:{PASSWORD}@127.0.0.1:{self.port}/0")
        status, body = wait_for(lambda: readyz(port), timeout=30, what="an answer")
        self.assertEqual((status, body["redis"]), (503, "down"))
        wait_for(lambda: self.log_says(reason), timeout=10, what="the reason in the log")
        r = http("POST", f"http://127.0.0.1:{port}/v1/locks/refused:one/acquire", {"ttl_ms": 1000})
        self.assertEqual(r.status, 503, r)

    def test_user_without_role_is_refused(self):
        self.assert_user_refused(["+@all", "-@dangerous"], "ROLE failed")

    def test_user_without_info_is_refused(self):
        self.assert_user_refused(["+@all", "-@dangerous", "+role", "+config|get"], "INFO failed")

    def test_replica_is_refused(self):
        port = free_port()
        d = tempfile.mkdtemp(dir=test_data_dir())
        replica = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no", "--dir", d, "--replicaof", "127.0.0.1", str(self.port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(replica.wait)
        self.addCleanup(replica.kill)
        def is_replica():
            try:
                with Redis(port=port, db=0) as r:
                    return r.cmd("ROLE")[0] == "slave"
            except OSError:
                return False
        wait_for(is_replica, timeout=20, what="the replica")
        gw_port = self.serve_unready(f"redis://127.0.0.1:{port}/0")
        status, body = wait_for(lambda: readyz(gw_port), timeout=30, what="an answer")
        self.assertEqual((status, body["redis"]), (503, "down"))
        wait_for(lambda: self.log_says("is not a primary"), timeout=10, what="the reason in the log")
        r = http("POST", f"http://127.0.0.1:{gw_port}/v1/locks/replica:one/acquire", {"ttl_ms": 1000})
        self.assertEqual(r.status, 503, r)


if __name__ == "__main__":
    unittest.main()
