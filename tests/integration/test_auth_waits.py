# SPDX-License-Identifier: Apache-2.0
"""Parked requests and a reload of the API keys (docs/api.md "Authentication and authorization"): a parked
acquire of a lock, a semaphore or a lock set, and a watch, whose key a SIGHUP removed answer 401 at once
(403 when the reload took away the scope they need, named in the member scope as a fresh request's 403
names it), what they held is given back, and the next waiter in FIFO order gets the lock; a key rotated
(same id, new text) keeps its parked acquire, which is granted in its turn. Grants are told by the clients
that got them (their tokens release), not by the gateway.

Broken variants caught while writing this: no check of a parked request's key (every test but the rotation
one: the removed key's parked acquire stayed parked after the reload, was granted 200 when the lock was
released, and the client behind it waited out its wait_ms; the watch answered 200 when the lease ended; the
lock set kept its first lock, so the client waiting for it got nothing).

Owns: what a reload of the keys does to requests already parked. Must not: test the key check of fresh
requests (test_auth.py) or the queues themselves (test_lock_*.py, test_sem_*.py, test_locksets.py).
"""

import hashlib
import json
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, metric, wait_for  # noqa: E402
from lock_helpers import unique_name  # noqa: E402

SCOPES = ["lock:aw:*", "semaphore:aw:*"]


def key_entry(key_id: str, text: str, scopes: list[str]) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(text.encode()).hexdigest(), "scopes": scopes}


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


ADMIN = key_entry("admin", "key-admin", ["admin"])
BILLING = key_entry("billing", "key-billing", SCOPES)
OTHER = key_entry("other", "key-other", SCOPES)


def auth_config(keys: list[dict]) -> dict:
    """poll_ms is long, so that no re-check of its own answers a parked request within a test's patience."""
    return {"poll_ms": 60000, "auth": {"mode": "required", "keys": keys}}


class Call(threading.Thread):
    """One request sent in the background with key text: response is its answer."""

    def __init__(self, gw: Gateway, key: str, method: str, path: str, body: dict | None = None):
        super().__init__(daemon=True)
        self.gw, self.key, self.method, self.path, self.body = gw, key, method, path, body
        self.response = None

    def run(self) -> None:
        with self.gw.client(timeout=60) as c:
            self.response = c.request(self.method, self.path, self.body, bearer(self.key))


class ParkedKeysTest(unittest.TestCase):
    def setUp(self):
        self.gw = Gateway(config=auth_config([ADMIN, BILLING, OTHER]))
        self.c = self.gw.client()

    def tearDown(self):
        self.c.close()
        self.gw.stop()

    def as_admin(self, method: str, path: str, body: dict | None = None):
        return self.c.request(method, path, body, bearer("key-admin"))

    def waiting(self, kind: str, name: str) -> int:
        r = self.as_admin("GET", f"/v1/{kind}/{name}")
        self.assertEqual(r.status, 200, r)
        return r.body["waiting"]

    def until_waiting(self, kind: str, name: str, n: int) -> None:
        wait_for(lambda: self.waiting(kind, name) == n, 15, what=f"{n} waiting at {kind} {name}")

    def reload_keys(self, keys: list[dict]) -> None:
        """Writes the config with keys, sends SIGHUP and waits until the gateway logged the reload."""
        mark = self.gw.log_text().count('"reloaded"')
        with open(self.gw.config_path, "w", encoding="utf-8") as f:
            json.dump(auth_config(keys), f)
        self.gw.signal(signal.SIGHUP)
        wait_for(lambda: self.gw.log_text().count('"reloaded"') > mark, 10, what="reload")

    def park(self, key: str, path: str, body: dict | None = None, method: str = "POST") -> Call:
        call = Call(self.gw, key, method, path, body)
        call.start()
        return call

    def answered(self, call: Call, timeout: float = 5.0):
        """The answer of call, which must come within timeout seconds."""
        call.join(timeout)
        self.assertFalse(call.is_alive(), f"{call.method} {call.path} still waits")
        return call.response

    def assert_refused(self, r, status: int, code: str) -> dict:
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.body.get("type"), f"/problems/{code}", r)
        if status == 401:
            self.assertTrue(r.headers.get("www-authenticate", "").startswith("Bearer"), r)
        return r.body

    def assert_released(self, kind: str, name: str, grant, key: str) -> None:
        """grant (a 200 acquire answer) holds: its token releases."""
        self.assertEqual(grant.status, 200, grant)
        r = self.c.request("POST", f"/v1/{kind}/{name}/release", {"token": grant.body["token"]}, bearer(key))
        self.assertEqual(r.status, 200, r)

    def queue_behind_admin(self, kind: str, body: dict):
        """admin holds kind's name; billing then other wait for it. Returns (name, holder, billing, other)."""
        name = unique_name("aw")
        held = self.as_admin("POST", f"/v1/{kind}/{name}/acquire", {**body, "ttl_ms": 60000})
        self.assertEqual(held.status, 200, held)
        billing = self.park("key-billing", f"/v1/{kind}/{name}/acquire", {**body, "wait_ms": 20000})
        self.until_waiting(kind, name, 1)
        other = self.park("key-other", f"/v1/{kind}/{name}/acquire", {**body, "wait_ms": 8000})
        self.until_waiting(kind, name, 2)
        return name, held, billing, other

    def removed_key_gives_its_place_up(self, kind: str, body: dict) -> None:
        name, held, billing, other = self.queue_behind_admin(kind, body)
        self.reload_keys([ADMIN, OTHER])
        self.assert_refused(self.answered(billing), 401, "unauthorized")
        self.assertEqual(self.waiting(kind, name), 1, "the removed key's place left the queue")
        self.assert_released(kind, name, held, "key-admin")
        self.assert_released(kind, name, self.answered(other), "key-other")

    def test_removed_key_lock_waiter_answers_401(self):
        """A parked lock acquire of a key removed by SIGHUP answers 401 at once and leaves the queue; once
        the holder releases, the client waiting behind it gets the lock."""
        self.removed_key_gives_its_place_up("locks", {})

    def test_removed_key_is_not_granted_the_lock_released(self):
        """The holder releases right after the reload: the removed key's parked acquire answers 401, not 200
        with a token, and the lock goes to the client behind it."""
        name, held, billing, other = self.queue_behind_admin("locks", {})
        self.reload_keys([ADMIN, OTHER])
        self.assert_released("locks", name, held, "key-admin")
        self.assert_refused(self.answered(billing), 401, "unauthorized")
        self.assert_released("locks", name, self.answered(other), "key-other")

    def test_removed_key_semaphore_waiter_answers_401(self):
        """The same for a semaphore of one slot."""
        self.removed_key_gives_its_place_up("semaphores", {"limit": 1})

    def test_removed_key_lock_set_gives_back_what_it_holds(self):
        """A lock set of a removed key, holding a and waiting for b, answers 401 and releases a at once:
        the client waiting for a gets it while b is still held."""
        a, b = sorted(unique_name("aw") for _ in range(2))
        held_b = self.as_admin("POST", f"/v1/locks/{b}/acquire", {"ttl_ms": 60000})
        self.assertEqual(held_b.status, 200, held_b)
        billing = self.park("key-billing", "/v1/locksets/acquire", {"names": [a, b], "wait_ms": 20000})
        self.until_waiting("locks", b, 1)
        other = self.park("key-other", f"/v1/locks/{a}/acquire", {"wait_ms": 8000})
        self.until_waiting("locks", a, 1)
        self.reload_keys([ADMIN, OTHER])
        self.assert_refused(self.answered(billing), 401, "unauthorized")
        self.assert_released("locks", a, self.answered(other), "key-other")
        self.assertEqual(self.waiting("locks", b), 0)
        self.assert_released("locks", b, held_b, "key-admin")

    def park_watch(self):
        """A lock the admin holds and key-billing's watch of it, parked: (name, held, watch)."""
        name = unique_name("aw")
        held = self.as_admin("POST", f"/v1/locks/{name}/acquire", {"ttl_ms": 60000})
        self.assertEqual(held.status, 200, held)
        watch = self.park("key-billing", f"/v1/locks/{name}?watch=true&fence={held.body['fence']}&wait_ms=20000",
                          method="GET")
        wait_for(lambda: "fencegate_watches 1" in self.as_admin("GET", "/metrics").body, 10, what="watch parked")
        return name, held, watch

    def test_removed_key_watch_answers_401(self):
        """A parked watch of a removed key answers 401 at once, not the end of the lease."""
        name, held, watch = self.park_watch()
        self.reload_keys([ADMIN, OTHER])
        self.assert_refused(self.answered(watch), 401, "unauthorized")
        self.assert_released("locks", name, held, "key-admin")

    def test_scope_removed_answers_403(self):
        """A parked acquire whose key lost the scope of the lock answers 403 naming it; the next waiter gets
        the lock."""
        name, held, billing, other = self.queue_behind_admin("locks", {})
        self.reload_keys([ADMIN, key_entry("billing", "key-billing", ["lock:elsewhere:*"]), OTHER])
        problem = self.assert_refused(self.answered(billing), 403, "forbidden")
        self.assertIn(f"lock:{name}", problem["detail"])
        self.assertEqual(problem.get("scope"), f"lock:{name}", problem)
        self.assertEqual(self.waiting("locks", name), 1)
        self.assert_released("locks", name, held, "key-admin")
        self.assert_released("locks", name, self.answered(other), "key-other")

    def test_scope_removed_semaphore_waiter_names_it(self):
        """The same for a semaphore: its 403 names the scope in the member scope, as a fresh request's does."""
        name, held, billing, other = self.queue_behind_admin("semaphores", {"limit": 1})
        self.reload_keys([ADMIN, key_entry("billing", "key-billing", ["lock:aw:*"]), OTHER])
        problem = self.assert_refused(self.answered(billing), 403, "forbidden")
        self.assertEqual(problem.get("scope"), f"semaphore:{name}", problem)
        self.assert_released("semaphores", name, held, "key-admin")
        self.assert_released("semaphores", name, self.answered(other), "key-other")

    def test_scope_removed_lock_set_names_the_first_lock_refused(self):
        """A parked lock set whose key lost the scope of two of its locks answers 403 naming the first of
        them in the order of its names (c, not a, which it takes first); a and b, taken, are given back."""
        a, b, c = sorted(unique_name("aw") for _ in range(3))
        held_c = self.as_admin("POST", f"/v1/locks/{c}/acquire", {"ttl_ms": 60000})
        self.assertEqual(held_c.status, 200, held_c)
        billing = self.park("key-billing", "/v1/locksets/acquire", {"names": [b, c, a], "wait_ms": 20000})
        self.until_waiting("locks", c, 1)
        self.reload_keys([ADMIN, key_entry("billing", "key-billing", [f"lock:{b}"]), OTHER])
        problem = self.assert_refused(self.answered(billing), 403, "forbidden")
        self.assertEqual(problem.get("scope"), f"lock:{c}", problem)
        self.assertIn(f"lock:{c}", problem["detail"])
        for name in (a, b):
            self.assert_released("locks", name, self.as_admin("POST", f"/v1/locks/{name}/acquire", {}), "key-admin")
        self.assert_released("locks", c, held_c, "key-admin")

    def test_scope_removed_watch_names_it(self):
        """A parked watch whose key lost the scope of the lock answers 403 with the member scope."""
        name, held, watch = self.park_watch()
        self.reload_keys([ADMIN, key_entry("billing", "key-billing", ["semaphore:aw:*"]), OTHER])
        problem = self.assert_refused(self.answered(watch), 403, "forbidden")
        self.assertEqual(problem.get("scope"), f"lock:{name}", problem)
        self.assert_released("locks", name, held, "key-admin")

    def test_auth_turned_on_answers_keyless_waiters_401(self):
        """A gateway with auth off (loopback, auth.mode not set): a client without a key parks an acquire and a
        watch; a reload turns auth on. Both answer 401 at once, and the lock goes to nobody the keyless
        client could use. Caught: the keyless waits were left alone (no key to check), and the acquire was
        granted with a token once the lock was released."""
        with Gateway(config={"poll_ms": 60000}) as gw, gw.client() as c:
            name = unique_name("aw-on")
            held = c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000})
            self.assertEqual(held.status, 200, held)
            box: dict = {}

            def send(what: str, method: str, path: str, body: dict | None) -> threading.Thread:
                def run():
                    with gw.client(timeout=60) as wc:
                        box[what] = wc.request(method, path, body)
                t = threading.Thread(target=run, daemon=True)
                t.start()
                return t
            waits = [send("acquire", "POST", f"/v1/locks/{name}/acquire", {"wait_ms": 20000}),
                     send("watch", "GET", f"/v1/locks/{name}?watch=true&fence={held.body['fence']}&wait_ms=20000",
                          None)]
            wait_for(lambda: c.get(f"/v1/locks/{name}").body["waiting"] == 1, 15, what="the acquire parked")
            wait_for(lambda: metric(gw, "fencegate_watches") == 1, 15, what="the watch parked")
            mark = gw.log_text().count('"reloaded"')
            with open(gw.config_path, "w", encoding="utf-8") as f:
                json.dump(auth_config([ADMIN]), f)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: gw.log_text().count('"reloaded"') > mark, 10, what="reload")
            for t in waits:
                t.join(5)
            for what in ("acquire", "watch"):
                self.assertIn(what, box, f"the keyless {what} still waits")
                self.assert_refused(box[what], 401, "unauthorized")
            r = c.request("POST", f"/v1/locks/{name}/release", {"token": held.body["token"]}, bearer("key-admin"))
            self.assertEqual(r.status, 200, r)

    def test_rotated_key_keeps_its_place(self):
        """A key rotated by SIGHUP (same id, new text; a scope added, so its waits check it again) keeps its
        parked acquire in its place: granted when the holder releases, before the client behind it."""
        name, held, billing, other = self.queue_behind_admin("locks", {})
        rotated = key_entry("billing", "key-billing-2", SCOPES + ["metrics"])
        self.reload_keys([ADMIN, rotated, OTHER])
        self.assertEqual(self.c.get(f"/v1/locks/{name}", headers=bearer("key-billing")).status, 401)
        time.sleep(0.5)
        self.assertTrue(billing.is_alive(), billing.response)
        self.assertEqual(self.waiting("locks", name), 2)
        self.assert_released("locks", name, held, "key-admin")
        self.assert_released("locks", name, self.answered(billing), "key-billing-2")
        self.assert_released("locks", name, self.answered(other), "key-other")


if __name__ == "__main__":
    unittest.main()
