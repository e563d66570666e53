# SPDX-License-Identifier: Apache-2.0
"""Texts the gateway cuts at a byte count — a problem's detail (256 bytes), a name quoted in it (a PATCH's
field, an unknown body member, a scope), the request log's subject — never end inside a UTF-8 character,
and no answer loses its problem+json body to such a cut.

Each case uses names of U+2713 (three bytes each), so that the cut at 256, 100, 150, 40 or 240 bytes falls
inside a character. Caught on the code before the fix: the stale PUT answered 409 with an empty text/plain
body (no presented_fence, current_fence, resource: a client could not tell stale_fence); the PATCH of a
field named by 40 of them and the PUT with an unknown member named by 100 answered 400 empty; the key
lacking the scope answered 403 empty; the request log's subject ended in \\uFFFD.

Owns: the cut texts of answers and log lines. Must not: test the fenced-write rules (test_redis_writes.py)
or the scopes themselves (test_auth.py).
"""

import hashlib
import os
import sys
import unittest
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, same_slot  # noqa: E402

CHECK = "\u2713"  # three bytes of UTF-8
ADMIN, APP = "cut-admin-key", "cut-app-key"
PROBLEM = "application/problem+json"


def key_entry(key_id: str, text: str, scopes: list[str]) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(text.encode()).hexdigest(), "scopes": scopes}


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


class CutText(GatewayTest):
    gateway_config = {
        "redis_prefixes": ["app:", {"prefix": "acct:", "lock": "acct-lock:{key}"}],
        "auth": {"mode": "required", "keys": [
            key_entry("admin", ADMIN, ["admin"]),
            key_entry("app", APP, ["lock:*", "redis:app:*:write", "redis:app:*:read"]),
        ]},
    }

    def lock(self, name: str) -> dict:
        r = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000}, headers=bearer(ADMIN))
        self.assertEqual(r.status, 200, r)
        return r.body

    def write(self, method: str, key: str, token: str, body=None, key_text: str = ADMIN):
        headers = {"Fence-Token": token, **bearer(key_text)}
        return self.c.request(method, "/v1/redis/" + quote(key, safe=""), body, headers)

    def assert_problem(self, r, status: int, code: str):
        """r is a whole problem+json answer of status and code, whose detail is text without U+FFFD, and
        the request's log line holds none either."""
        self.assertEqual((r.status, r.headers.get("content-type")), (status, PROBLEM), r)
        self.assertIsInstance(r.body, dict, r)
        self.assertEqual(r.body["type"], f"/problems/{code}", r)
        r.raw.decode("utf-8")  # strict: the body is UTF-8 throughout
        self.assertNotIn("\ufffd", r.body["detail"], r)
        self.assertLessEqual(len(r.body["detail"].encode()), 255, r)
        request_id = r.headers["x-request-id"]
        lines = [line for line in self.gw.log_text().splitlines() if request_id in line]
        self.assertTrue(any('"event":"request"' in line for line in lines), lines)
        self.assertFalse(any("\\uFFFD" in line or "\ufffd" in line for line in lines), lines)

    def test_a_stale_put_of_a_long_key_keeps_its_members(self):
        """The detail names the resource of a key over 300 bytes: over the 255 bytes of a detail, cut whole."""
        old_lock, new_lock = same_slot("cut-old", "cut-new")
        old, new = self.lock(old_lock), self.lock(new_lock)
        # "x"s that make the cut at 255 bytes fall inside a character whatever the fences' digits.
        head = len(f"fence {old['fence']} is older than fence {new['fence']} stored for redis:app:")
        pad = next(n for n in range(3) if (255 - head - n) % 3 != 0)
        key = same_slot("app:" + "x" * pad + CHECK * 100, like=old_lock)[0]
        r = self.write("PUT", key, new["token"], {"value": "new"})
        self.assertEqual(r.status, 200, r)
        r = self.write("PUT", key, old["token"], {"value": "old"})
        self.assert_problem(r, 409, "stale_fence")
        self.assertEqual((r.body["presented_fence"], r.body["current_fence"], r.body["resource"]),
                         (old["fence"], new["fence"], "redis:" + key))
        self.assertEqual(r.body["detail"], f"fence {old['fence']} is older than fence {new['fence']} stored for "
                         f"redis:app:{'x' * pad}{CHECK * ((255 - head - pad) // 3)}", r)
        # A revoked one answers 410 lease_lost naming the resource, the same way.
        r = self.c.post(f"/v1/locks/{new_lock}/revoke", {}, headers=bearer(ADMIN))
        self.assertEqual(r.status, 200, r)
        r = self.write("PUT", key, new["token"], {"value": "revoked"})
        self.assert_problem(r, 410, "lease_lost")
        self.assertEqual((r.body["presented_fence"], r.body["resource"], r.body["reason"]),
                         (new["fence"], "redis:" + key, "revoked"))

    def test_a_field_name_cut_in_a_patch_detail(self):
        """'fields.<name>' quotes 100 bytes of the name: 33 whole characters of 40."""
        key, name = same_slot("app:" + CHECK * 100, "cut-patch")  # the log's subject: 240 bytes of it
        r = self.write("PATCH", key, self.lock(name)["token"], {"fields": {CHECK * 40: 5}})
        self.assert_problem(r, 400, "invalid_field")
        self.assertIn(f"'fields.{CHECK * 33}' must be a string or null", r.body["detail"])

    def test_an_unknown_member_cut_in_its_detail(self):
        """An unknown body member is quoted by its first 40 bytes: 13 whole characters of 100."""
        key, name = same_slot("app:cut-member", "cut-member")
        r = self.write("PUT", key, self.lock(name)["token"], {"value": "a", CHECK * 100: 1})
        self.assert_problem(r, 400, "invalid_field")
        self.assertIn(f"unknown field '{CHECK * 13}'", r.body["detail"])

    def test_a_missing_scope_cut_in_its_detail(self):
        """The detail quotes 150 bytes of the scope the key lacks; the scope member holds all of it."""
        key = "acct:" + CHECK * 100
        r = self.write("PUT", key, self.lock("cut-scope")["token"], {"value": "a"}, key_text=APP)
        self.assert_problem(r, 403, "forbidden")
        self.assertEqual(r.body["scope"], f"redis:{key}:write", r)
        self.assertIn("lacks the scope 'redis:acct:" + CHECK * 46 + "'", r.body["detail"])

    def test_a_bound_key_cut_in_its_detail(self):
        """A key whose lock template cannot make a lock name: the detail quotes 120 bytes of its resource."""
        key = "acct:" + CHECK * 100
        r = self.write("PUT", key, self.lock("cut-bound")["token"], {"value": "a"})
        self.assert_problem(r, 403, "invalid_fence_token")
        self.assertEqual(r.body["detail"], f"the Fence-Token was issued for another lock: redis:acct:{CHECK * 36} "
                         "is guarded by a lock whose name its key cannot make", r)

if __name__ == "__main__":
    unittest.main()
