# SPDX-License-Identifier: Apache-2.0
"""Redis ACL users: FENCEGATE_REDIS_URL redis://user:password@host:port/db makes every connection send
AUTH user password; a wrong password leaves the gateway unready (503 on /readyz, nothing served from
Redis) and says why in the log: at start-up, a Redis that refuses the credentials, or does not answer,
is named as such.

Broken variant caught while writing this (tried, then reverted): sending AUTH with the password only (the
default user's form) - the gateway never became ready with the ACL user.

Owns: the credentials of redis:// URLs. Must not: test failover (sentinel URLs).
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, HarnessError, Redis, env, free_port, private_backends, skip_in_cluster  # noqa: E402

USER, PASSWORD = "fg-acl-test", "acl-test-password-0123"


@skip_in_cluster("it names the one test Redis in a redis:// URL with an ACL user")
class RedisAclTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()
        cls.redis.cmd("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", "~*", "&*", "+@all")

    @classmethod
    def tearDownClass(cls):
        cls.redis.cmd("ACL", "DELUSER", USER)
        cls.redis.close()

    def url(self, password: str) -> str:
        return f"redis://{USER}:{password}@127.0.0.1:{env('FG_TEST_REDIS_PORT')}/0"

    def test_acl_user_connects(self):
        with Gateway(env_overrides={"FENCEGATE_REDIS_URL": self.url(PASSWORD)}) as gw:
            r = gw.http("POST", "/v1/locks/acl-lock/acquire", {"ttl_ms": 1000})
            self.assertEqual(r.status, 200, r)
            clients = self.redis.cmd("CLIENT", "LIST")
            self.assertIn(f"user={USER}", clients)

    def test_wrong_password_is_refused(self):
        gw = Gateway(env_overrides={"FENCEGATE_REDIS_URL": self.url("wrong")}, start=False, ready_timeout=3)
        with self.assertRaises(HarnessError):
            gw.start()
        gw.kill()
        self.assertIn("WRONGPASS", gw.log_text())


@skip_in_cluster("it runs its own one Redis")
class StartupRefusalTest(unittest.TestCase):
    """docs/operations.md, "Logs": a Redis that refuses the gateway's credentials (a wrong password, or none
    where one is required) or that does not answer is named at start-up as backend_down, saying which; its
    eviction policy, which such a Redis cannot be asked about, is not warned of. Failed before the fix: the
    start-up log called a wrong password eviction_policy_unknown, and backend_down read "redis: redis: AUTH
    failed: WRONGPASS ..."."""

    def start_up_log(self, env_overrides: dict) -> list[dict]:
        """The JSON lines a gateway with env_overrides logs while it waits for Redis in vain, up to its first
        backend_down (not a fixed time: on a loaded machine its migrations may take seconds before it asks
        Redis)."""
        gw = Gateway(env_overrides=env_overrides, start=False, ready_timeout=30)
        gw.start(until_logged="backend_down")
        gw.kill()
        return [json.loads(line) for line in gw.log_text().splitlines() if line.startswith("{")]

    def assert_named(self, lines: list[dict], *words: str) -> None:
        events = [line["event"] for line in lines]
        self.assertNotIn("eviction_policy_unknown", events, lines)
        down = [line["detail"] for line in lines if line["event"] == "backend_down"]
        self.assertTrue(down, lines)
        for word in words:
            self.assertIn(word, down[0])
        self.assertFalse([line for line in lines if "redis: redis" in line.get("detail", "")], lines)

    def test_refused_credentials_and_silence_are_named(self):
        own = private_backends(self, "refusal")
        with Redis(port=own.redis_port) as r:
            r.cmd("CONFIG", "SET", "requirepass", PASSWORD)
        at = f"127.0.0.1:{own.redis_port}/0"
        for url, reply in ((f"redis://:wrong@{at}", "WRONGPASS"), (f"redis://{at}", "NOAUTH")):
            lines = self.start_up_log(dict(own.env, FENCEGATE_REDIS_URL=url))
            self.assert_named(lines, "redis refuses the gateway's credentials", reply, "redis_url")
        lines = self.start_up_log(dict(own.env, FENCEGATE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"))
        self.assert_named(lines, "cannot connect")


if __name__ == "__main__":
    unittest.main()
