# SPDX-License-Identifier: Apache-2.0
"""Token hygiene over HTTP: a correctly signed token whose fence is above every issued or reserved fence is
refused and never stored (Postgres and Redis), and the gateway keeps issuing ordinary fences after a
restart; fences up to 2^63 - 1 parse; signing keys rotate through `secrets` and SIGHUP without
invalidating tokens in flight, and a removed key's tokens stop working.

Broken variants caught while writing this (each tried, then reverted): fence_check_issued always 0 (the
forged write answered 200 and stored fence 9223372036854775807, and the next acquire after the restart
failed); SIGHUP not re-reading secrets (the old token still passed after k1 was removed).

Owns: docs/api.md "Tokens". Must not: test the fence rule of ordinary writes (test_pg_*.py, test_redis_*.py).
"""

import json
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (TEST_SECRET, Gateway, Redis, psql, same_slot, slot_key, wait_for,  # noqa: E402
                     write_fence_key)
from pg_helpers import INVOICE_COLUMNS, insert_invoice, invoice, stored_fence, unique  # noqa: E402
from token_forge import claims, forge  # noqa: E402

INT64_MAX = 2 ** 63 - 1


def base_config() -> dict:
    return {"tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS}}, "redis_prefixes": ["app:"]}


class HugeFenceTest(unittest.TestCase):
    def holder_beside_an_invoice(self, key: str, lock: str) -> tuple:
        """A gateway (started first: its migrations create public.invoices), invoice key with note "before",
        and a client holding lock: (gateway, client, the acquire's answer, its lease id)."""
        gw = Gateway(config=base_config())
        insert_invoice(key, note="before")
        c = gw.client()
        r = c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 30000})
        self.assertEqual(r.status, 200, r)
        return gw, c, r, claims(r.body["token"])["lease_id"]

    def test_forged_huge_fence_is_refused_and_never_stored(self):
        key, rkey, lock = unique("inv"), unique("app:huge"), unique("huge")
        gw, c, r, lease = self.holder_beside_an_invoice(key, lock)
        try:
            for fence in (INT64_MAX, 10 ** 18, r.body["fence"] + 10 ** 9):
                bad = forge(TEST_SECRET, "default", lock, fence, lease)
                r = c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "forged"}}, {"Fence-Token": bad})
                self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"), r)
                self.assertIn("above every fence", r.body["detail"])
                r = c.request("PUT", f"/v1/redis/{rkey}", {"value": "forged"}, {"Fence-Token": bad})
                self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"), r)
            self.assertEqual(invoice(key)["note"], "before")
            self.assertIsNone(stored_fence(f"pg:invoices/{key}"))
            self.assertEqual(psql("SELECT count(*) FROM fencegate.rejections WHERE presented_fence > 1000000000000"),
                             ["0"])
            with Redis() as redis:
                self.assertIsNone(redis.cmd("GET", write_fence_key(rkey)))
                self.assertIsNone(redis.cmd("GET", rkey))
            c.close()
            gw.stop()
            gw.start()
            c = gw.client()
            r = c.post(f"/v1/locks/{lock}-2/acquire", {"ttl_ms": 30000})
            self.assertEqual(r.status, 200, r)
            self.assertLess(r.body["fence"], 10 ** 15)
            r = c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "after"}},
                          {"Fence-Token": r.body["token"]})
            self.assertEqual(r.status, 200, r)
            c.close()
        finally:
            gw.stop()

    def test_a_fence_past_the_reservation_needs_its_sequence_to_have_issued_it(self):
        """docs/api.md "Tokens": a fence above every fence issued or reserved is refused. The gateway let any
        fence pass up to what one script may overshoot the reservation by (the largest semaphore limit, 100,000):
        a signed token of fence reserved + 99,999 wrote the row and wedged it for as many acquires. Now a fence
        above the reservation passes only if the sequence of its lock issued it, as a script that issues
        several fences may pass its limit (emulated here by moving the sequence). Failed before the fix: the
        writes past the reservation answered 200."""
        key, lock = unique("inv"), unique("past")
        gw, c, r, lease = self.holder_beside_an_invoice(key, lock)
        try:
            reserved = int(psql("SELECT reserved FROM fencegate.fence_reservation")[0])
            rkey = same_slot("app:past", like=lock)[0]
            for fence in (reserved + 1, reserved + 99_999):
                bad = forge(TEST_SECRET, "default", lock, fence, lease)
                r = c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "forged"}}, {"Fence-Token": bad})
                self.assertEqual((r.status, r.body.get("type")), (403, "/problems/invalid_fence_token"), r)
                r = c.request("PUT", f"/v1/redis/{rkey}", {"value": "forged"}, {"Fence-Token": bad})
                self.assertEqual((r.status, r.body.get("type")), (403, "/problems/invalid_fence_token"), r)
            self.assertEqual(invoice(key)["note"], "before")
            with Redis() as redis:
                self.assertIsNone(redis.cmd("GET", rkey))
                redis.cmd("SET", slot_key("fg:fence", lock), str(reserved + 10))
            issued = forge(TEST_SECRET, "default", lock, reserved + 5, lease)
            r = c.request("PUT", f"/v1/redis/{rkey}", {"value": "issued"}, {"Fence-Token": issued})
            self.assertEqual(r.status, 200, r)
            past = forge(TEST_SECRET, "default", lock, reserved + 11, lease)
            r = c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "forged"}}, {"Fence-Token": past})
            self.assertEqual((r.status, r.body.get("type")), (403, "/problems/invalid_fence_token"), r)
            after = same_slot("after", like=lock)[0]  # on a Redis Cluster: the moved sequence's slot
            r = c.post(f"/v1/locks/{after}/acquire", {"ttl_ms": 30000})
            self.assertEqual(r.status, 200, r)
            self.assertGreater(r.body["fence"], reserved + 10)
            c.close()
        finally:
            gw.stop()

    def test_signed_token_at_int64_max_parses(self):
        """A token of fence 2^63 - 1 is well-formed (refused for its fence, not as malformed); one past it is
        malformed."""
        with Gateway(config=base_config()) as gw:
            ok = forge(TEST_SECRET, "default", "x", INT64_MAX)
            r = gw.http("PUT", "/v1/redis/app:x", {"value": "v"}, {"Fence-Token": ok})
            self.assertEqual(r.status, 403, r)
            self.assertIn("above every fence", r.body["detail"])
            past = forge(TEST_SECRET, "default", "x", INT64_MAX + 1)
            r = gw.http("PUT", "/v1/redis/app:x", {"value": "v"}, {"Fence-Token": past})
            self.assertEqual(r.status, 403, r)
            self.assertNotIn("above every fence", r.body["detail"])


class RotationTest(unittest.TestCase):
    def write_secrets(self, gw: Gateway, secrets: list[dict]) -> None:
        cfg = dict(base_config(), secrets=secrets)
        with open(gw.config_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        mark = gw.log_text().count('"reloaded"')
        gw.signal(signal.SIGHUP)
        wait_for(lambda: gw.log_text().count('"reloaded"') > mark, 10, what="reload")

    def test_rotation_without_restart(self):
        k1 = {"id": "k1", "secret": "first-signing-secret-0123456789"}
        k2 = {"id": "k2", "secret": "second-signing-secret-0123456789"}
        lock_a, lock_b = unique("rot-a"), unique("rot-b")
        gw = Gateway(config=dict(base_config(), secrets=[k1]), env_overrides={"FENCEGATE_SECRET": None})
        try:
            c = gw.client()
            old = c.post(f"/v1/locks/{lock_a}/acquire", {"ttl_ms": 60000}).body["token"]
            self.assertEqual(claims(old)["key_id"], "k1")
            self.write_secrets(gw, [k2, k1])
            new = c.post(f"/v1/locks/{lock_b}/acquire", {"ttl_ms": 60000}).body["token"]
            self.assertEqual(claims(new)["key_id"], "k2")
            # Each key in its lock's slot on a Redis Cluster: no write floor there is above the lock's fences.
            keys = [same_slot("app:rot", like=lock)[0] for lock in (lock_a, lock_b)]
            for key, token in zip(keys, (old, new)):
                r = c.request("PUT", f"/v1/redis/{key}", {"value": "v"}, {"Fence-Token": token})
                self.assertEqual(r.status, 200, r)
            self.assertEqual(c.post(f"/v1/locks/{lock_a}/renew", {"token": old}).status, 200)
            self.write_secrets(gw, [k2])
            r = c.request("PUT", f"/v1/redis/{keys[0]}", {"value": "w"}, {"Fence-Token": old})
            self.assertEqual((r.status, r.body["type"]), (403, "/problems/invalid_fence_token"), r)
            r = c.post(f"/v1/locks/{lock_a}/renew", {"token": old})
            self.assertEqual(r.status, 403, r)
            r = c.request("PUT", f"/v1/redis/{keys[1]}", {"value": "w"}, {"Fence-Token": new})
            self.assertEqual(r.status, 200, r)
            # A secret file that does not load keeps the keys in force.
            with open(gw.config_path, "w", encoding="utf-8") as f:
                json.dump(dict(base_config(), secrets=[{"id": "bad id", "secret": "x"}]), f)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: "reload_failed" in gw.log_text(), 10, what="reload_failed")
            r = c.request("PUT", f"/v1/redis/{keys[1]}", {"value": "x"}, {"Fence-Token": new})
            self.assertEqual(r.status, 200, r)
            c.close()
        finally:
            gw.stop()

    def test_secret_file(self):
        """secret_file holds the same array; re-read on SIGHUP like the config."""
        k1 = {"id": "f1", "secret": "file-signing-secret-0123456789"}
        gw = Gateway(config=base_config(), start=False, env_overrides={"FENCEGATE_SECRET": None})
        path = gw.log_path + ".secrets.json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump([k1], f)
        gw.env_overrides["FENCEGATE_SECRET_FILE"] = path
        gw.start()
        try:
            token = gw.http("POST", f"/v1/locks/{unique('sf')}/acquire", {}).body["token"]
            self.assertEqual(claims(token)["key_id"], "f1")
        finally:
            gw.stop()


if __name__ == "__main__":
    unittest.main()
