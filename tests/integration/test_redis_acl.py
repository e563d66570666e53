# SPDX-License-Identifier: Apache-2.0
"""Redis ACL users: FENCEGATE_REDIS_URL redis://user:password@host:port/db makes every connection send
AUTH user password; a wrong password leaves the gateway unready (503 on /readyz, nothing served from
Redis) and says why in the log.

Broken variant caught while writing this (tried, then reverted): sending AUTH with the password only (the
default user's form) - the gateway never became ready with the ACL user.

Owns: the user part of redis:// URLs. Must not: test failover (sentinel URLs).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, HarnessError, Redis, env, skip_in_cluster  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
