# SPDX-License-Identifier: Apache-2.0
"""Integers as clients spell them: a body integer beyond 64 bits is refused as its member's bound refuses any
value past it (400 invalid_field, the same detail word for word), and a member without such a bound (a
semaphore revoke's fence, a row value, a batch op's) is named by its path; a fence given as text (the
watch's `fence` query parameter) has one spelling, so `01`, `-0`, `+1` and spaces are refused; `-0` in a
body is the JSON number 0, accepted or refused as 0 is.

Caught on the code before the fix: every body with an integer beyond 64 bits answered 400 invalid_json
("too big integer"), naming no member (test_integers_beyond_64_bits_answer_as_past_their_bound,
test_members_without_a_bound_are_named_by_their_path), and a watch of a live lease through its fence with a
leading zero (`fence=0100001` for 100001) answered for that lease, 200 with held true
(test_a_fence_has_one_spelling).

Owns: the spelling of integers in bodies and of a fence in a query (docs/api.md "Conventions", "Watching a
lease"). Must not: test the bounds of each member (test_lock_api.py, test_strict's units) or the digits of
numbers that reach Postgres (test_pg_numbers.py).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql  # noqa: E402
from lock_helpers import acquire, assert_problem, release, unique_name  # noqa: E402
from pg_helpers import tokens, unique, write  # noqa: E402

SETUP_SQL = """
DROP TABLE IF EXISTS public.spelled;
CREATE TABLE public.spelled (id text PRIMARY KEY, n numeric);
"""
TABLES = {"spelled": {"key": "id", "columns": ["n"]}}
TOO_BIG = (2 ** 63, 2 ** 64, -(2 ** 63) - 1, 10 ** 40)


def refusal(r) -> tuple:
    """What a client reads of a 400: its type, status, title and detail."""
    return r.status, r.body.get("type"), r.body.get("status"), r.body.get("title"), r.body.get("detail")


class IntegerSpellingsTest(GatewayTest):
    gateway_config = {"tables": TABLES}

    @classmethod
    def setUpClass(cls):
        psql(SETUP_SQL)  # the table first: the gateway reads its catalog at start-up
        super().setUpClass()

    def test_integers_beyond_64_bits_answer_as_past_their_bound(self):
        """Each too-big integer answers exactly what the same member answers just past its bound (a string
        member: to any integer), on every route that bounds it: the lease routes, a semaphore's limit, lock
        sets (whose renew's handler reads ttl_ms itself)."""
        name = unique_name()
        lockset = self.c.post("/v1/locksets/acquire", {"names": [unique_name()]})
        self.assertEqual(lockset.status, 200, lockset)
        set_tokens = [lock["token"] for lock in lockset.body["locks"]]
        cases = [(f"/v1/locks/{name}/acquire", {}, "ttl_ms", 86400001),
                 (f"/v1/locks/{name}/acquire", {}, "wait_ms", 3600001),
                 (f"/v1/locks/{name}/acquire", {"ttl_ms": 1000}, "max_hold_ms", 604800001),
                 (f"/v1/locks/{name}/acquire", {}, "owner", 5),
                 (f"/v1/locks/{name}/renew", {"token": "t"}, "ttl_ms", 86400001),
                 (f"/v1/semaphores/{name}/acquire", {}, "limit", 100001),
                 (f"/v1/semaphores/{name}/acquire", {"limit": 2}, "ttl_ms", 99),
                 ("/v1/locksets/acquire", {"names": [name]}, "wait_ms", -1),
                 ("/v1/locksets/renew", {"tokens": set_tokens}, "ttl_ms", 86400001)]
        for path, rest, member, past in cases:
            want = self.c.post(path, {**rest, member: past})
            assert_problem(self, want, 400, "invalid_field")
            self.assertIn(f"'{member}'", want.body["detail"], (path, want))
            for big in TOO_BIG:
                got = self.c.post(path, {**rest, member: big})
                self.assertEqual(refusal(got), refusal(want), (path, member, big, got))
        self.assertFalse(self.c.get(f"/v1/locks/{name}").body["held"])
        self.assertEqual(self.c.post("/v1/locksets/release", {"tokens": set_tokens}).status, 200)

    def test_members_without_a_bound_are_named_by_their_path(self):
        """A semaphore revoke's fence and the values of a fenced write have no bound of their own: the
        refusal names the member by its path, and nothing is written."""
        name, key = unique_name(), unique("k")
        (token, _), = tokens(self.c, unique_name("lock"), 1)
        r = self.c.post(f"/v1/semaphores/{name}/revoke", {"fence": 2 ** 63})
        detail = assert_problem(self, r, 400, "invalid_field")["detail"]
        self.assertIn("field 'fence' is an integer beyond 64 bits", detail)
        writes = [("PUT", key, {"row": {"n": 2 ** 64}}, "row.n"),
                  ("POST", None, {"row": {"id": key, "n": -(2 ** 63) - 1}}, "row.n"),
                  ("PATCH", key, {"set": {"n": 10 ** 40}}, "set.n")]
        for method, path_key, body, member in writes:
            r = write(self.c, method, "spelled", path_key, body, token)
            detail = assert_problem(self, r, 400, "invalid_field")["detail"]
            self.assertIn(f"field '{member}' is an integer beyond 64 bits", detail, (method, r))
        ops = [{"op": "put", "table": "spelled", "key": key, "row": {"n": 1}},
               {"op": "patch", "table": "spelled", "key": key, "set": {"n": 2 ** 63}}]
        r = self.c.request("POST", "/v1/pg/batch", {"ops": ops}, {"Fence-Token": token})
        detail = assert_problem(self, r, 400, "invalid_field")["detail"]
        self.assertIn("field 'ops[1].set.n' is an integer beyond 64 bits", detail)
        self.assertEqual(psql("SELECT count(*) FROM public.spelled WHERE id = :'k'", {"k": key}), ["0"])

    def test_a_fence_has_one_spelling(self):
        """The watch's fence is read as a token writes it: a leading zero, -0, a sign or a space is refused,
        on locks and semaphores, and a watch of a live lease through such a spelling never starts."""
        name = unique_name()
        held = acquire(self.c, name)
        self.assertEqual(held.status, 200, held)
        fence = held.body["fence"]
        spellings = (f"0{fence}", f"00{fence}", "01", "00", "-0", "%2B1", "+1", "%201", "1%20", f"-0{fence}")
        for kind in ("locks", "semaphores"):
            for text in spellings:
                r = self.c.get(f"/v1/{kind}/{name}?watch=true&wait_ms=0&fence={text}")
                detail = assert_problem(self, r, 400, "invalid_field")["detail"]
                self.assertIn("query parameter 'fence'", detail, (kind, text, r))
        r = self.c.get(f"/v1/locks/{name}?watch=true&wait_ms=0&fence={fence}")
        self.assertEqual((r.status, r.body["held"]), (200, True), r)
        self.assertEqual(release(self.c, name, held.body["token"]).status, 200)

    def test_minus_zero_is_zero(self):
        """-0 is a JSON number equal to 0: a member takes it as 0 (wait_ms: try once), refuses it as it
        refuses 0, and a row value stores 0."""
        name = unique_name()
        r = self.c.post(f"/v1/locks/{name}/acquire", '{"wait_ms": -0}')
        self.assertEqual(r.status, 200, r)
        busy = self.c.post(f"/v1/locks/{name}/acquire", '{"wait_ms": -0}')
        assert_problem(self, busy, 409, "lock_busy")
        self.assertEqual(release(self.c, name, r.body["token"]).status, 200)
        for path, member in ((f"/v1/locks/{name}/acquire", "ttl_ms"), (f"/v1/semaphores/{name}/acquire", "limit"),
                             (f"/v1/semaphores/{name}/revoke", "fence")):
            zero = self.c.post(path, f'{{"{member}": 0}}')
            minus = self.c.post(path, f'{{"{member}": -0}}')
            assert_problem(self, zero, 400, "invalid_field")
            self.assertEqual(refusal(minus), refusal(zero), (path, minus))
        (token, _), = tokens(self.c, unique_name("lock"), 1)
        key = unique("k")
        r = write(self.c, "PUT", "spelled", key, '{"row": {"n": -0}}', token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(psql("SELECT n::text FROM public.spelled WHERE id = :'k'", {"k": key}), ["0"])


if __name__ == "__main__":
    unittest.main()
