# SPDX-License-Identifier: Apache-2.0
"""openapi/openapi.json conforms, as the tools of API integrators read it:

- `@redocly/cli lint` (its recommended rules) finds neither an error nor a warning;
- `@stoplight/prism-cli` as a validating proxy in front of a gateway (`prism proxy --errors`) finds no
  violation, of a request or of an answer, over the README walk-through (locks, semaphores, lock sets,
  watches, fenced Postgres and Redis writes, also with Prefer: return=minimal, a stale write, the audit,
  listings, metrics) and the error cases a client meets (400 of a body the schema admits, 401 and 403 of
  the guarded operations routes, 403 of a forged token, 404, 409 busy and stale, 409 of a lock set
  refused for a held lock and of a Redis key over a read limit, 410 of a revoked lease, and each other
  refusal with members of its own); a body the document itself refuses is refused by Prism as a request
  violation before it reaches the gateway;
- every member of a problem answer met there is named in the properties of the schema the document gives
  that answer: the Problem schema admits any member, so Prism alone passes one the document never names
  (it caught `scope` of a 403 for a missing scope, `resource` and `fence` of a missing row's 404, `lock`
  of a lock set's 409, 410 and 429, `limit` and `size` of the 409 `conflict` of a Redis read, `limit` of
  `limit_mismatch`, the members of a 409 `stale_fence` of a Redis write, an insert and a batch; Prism
  itself `reason` `released` of a 410, outside the enum the document gave).

Both tools are pinned in tests/openapi/package-lock.json and installed by scripts/deps.sh into
FG_OPENAPI_TOOLS (node_modules). Prism reports a violation in its `sl-violations` header, or answers in
place of the gateway with a problem of type https://stoplight.io/prism/errors#...; either fails the test.

Broken variants this caught when tried: the lock status read answered through a `oneOf` of LockStatus and
WatchResult (a held lock matches both: the linter warns, Prism reports every status read of a held lock),
and /metrics, /v1/openapi.json and /v1/audit/rejections without their 401 and 403 answers; the fenced
writes without the 204 answer of Prefer: return=minimal (Prism reports a status the document does not
define).

Owns: the document's agreement with the gateway's real answers. Must not: test the behaviour itself.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Client, GatewayTest, Redis, free_port, http, same_slot, test_data_dir, wait_for  # noqa: E402
from openapi_doc import resolve  # noqa: E402
from pg_helpers import INVOICE_COLUMNS  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "openapi", "openapi.json")
TOOLS = os.environ.get("FG_OPENAPI_TOOLS", os.path.expanduser("~/.cache/fencegate/openapi-tools/node_modules"))
ADMIN, LOCKS_ONLY = "key-openapi-admin", "key-openapi-locks"
PRISM_ERROR = "https://stoplight.io/prism/errors"
# Keep the tools quiet and local: no telemetry, no update checks.
TOOL_ENV = {**os.environ, "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true",
            "NO_UPDATE_NOTIFIER": "1", "NODE_NO_WARNINGS": "1"}


def key_entry(key_id: str, text: str, scopes: list[str]) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(text.encode()).hexdigest(), "scopes": scopes}


def tool(name: str) -> str:
    path = os.path.join(TOOLS, ".bin", name)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} not found: scripts/deps.sh installs tests/openapi/package-lock.json")
    return path


def declared(doc: dict, schema: dict) -> set[str]:
    """The members schema names in its properties, through $ref and allOf."""
    schema = resolve(doc, schema)
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= declared(doc, part)
    return names


def problem_schema(doc: dict, method: str, path: str, status: int) -> dict:
    """The schema the document gives the problem+json answer of status to method path (with a query)."""
    path = path.split("?", 1)[0]
    templates = sorted((t for t in doc["paths"] if method.lower() in doc["paths"][t]), key=lambda t: t.count("{"))
    template = next(t for t in templates if re.fullmatch(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(t)), path))
    answer = resolve(doc, doc["paths"][template][method.lower()]["responses"][str(status)])
    return answer["content"]["application/problem+json"]["schema"]


class LintTest(unittest.TestCase):
    def test_redocly_lint_is_clean(self):
        r = subprocess.run([tool("redocly"), "lint", "--format=stylish", DOC], capture_output=True, text=True,
                           timeout=120, env=TOOL_ENV, cwd=ROOT)
        found = [line for line in (r.stdout + r.stderr).splitlines() if re.search(r"\b(error|warning)\b\s", line)
                 and not line.lstrip().startswith("║")]
        self.assertEqual((r.returncode, found), (0, []), r.stdout + r.stderr)


class ProxyTest(GatewayTest):
    gateway_config = {
        "tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS}},
        "redis_prefixes": ["app:"],
        "auth": {"mode": "required", "keys": [key_entry("admin", ADMIN, ["admin"]),
                                              key_entry("locks", LOCKS_ONLY, ["lock:*"])]},
        "limits": {"max_waiters_per_lock": 1},  # a lock set's 429 with one waiter parked
    }

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.prism_port = free_port()
        cls.prism_log = os.path.join(test_data_dir(), f"prism-{cls.prism_port}.log")
        cls.prism = subprocess.Popen(
            [tool("prism"), "proxy", DOC, cls.gw.base, "--errors", "--host", "127.0.0.1", "--port",
             str(cls.prism_port)], stdout=open(cls.prism_log, "w"), stderr=subprocess.STDOUT, env=TOOL_ENV)
        wait_for(lambda: "Prism is listening" in open(cls.prism_log).read() or cls.prism.poll() is not None,
                 timeout=60, what="prism to listen")
        if cls.prism.poll() is not None:
            raise AssertionError("prism exited:\n" + open(cls.prism_log).read())
        cls.via = Client(cls.prism_port)
        with open(DOC, encoding="utf-8") as f:
            cls.doc = json.load(f)
        cls.violations = []

    @classmethod
    def tearDownClass(cls) -> None:
        cls.via.close()
        cls.prism.terminate()
        cls.prism.wait(10)
        super().tearDownClass()

    def call(self, method: str, path: str, body=None, expect: int = 200, key: str | None = ADMIN, **headers):
        """One call through Prism; its status must be expect, and Prism must have found nothing."""
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        r = self.via.request(method, path, body, headers=headers)
        where = f"{method} {path} -> {r.status}"
        found = r.headers.get("sl-violations")
        if found:
            self.violations.append(f"{where}: {found}")
        if isinstance(r.body, dict) and str(r.body.get("type", "")).startswith(PRISM_ERROR):
            self.violations.append(f"{where}: {json.dumps(r.body)}")
        elif r.headers.get("content-type", "").startswith("application/problem+json"):
            # The Problem schema admits any member: Prism passes one the document never names.
            undeclared = set(r.body) - declared(self.doc, problem_schema(self.doc, method, path, r.status))
            if undeclared:
                self.violations.append(f"{where}: members not in the document: {sorted(undeclared)}")
        self.assertEqual(r.status, expect, f"{where}: {str(r.body)[:400]}")
        return r.body

    def assert_no_violations(self):
        self.assertEqual(self.violations, [], "\n".join(self.violations))

    def setUp(self):
        self.violations.clear()

    def test_walk_through(self):
        lock, key, sem = f"oa:{uuid.uuid4().hex[:8]}", f"oa-{uuid.uuid4().hex[:10]}", f"oa-{uuid.uuid4().hex[:8]}"
        first = self.call("POST", f"/v1/locks/{lock}/acquire", {"ttl_ms": 30000, "owner": "billing-7",
                                                               "request_id": f"r-{key}"})
        held = self.call("GET", f"/v1/locks/{lock}")
        self.assertTrue(held["held"])
        self.call("GET", f"/v1/locks/{lock}?watch=true&fence={first['fence']}&wait_ms=20")
        fence = {"Fence-Token": first["token"]}
        self.call("PUT", f"/v1/pg/invoices/{key}",
                  {"row": {"customer": "acme", "amount_cents": 12000, "status": "open"}}, **fence)
        self.call("PATCH", f"/v1/pg/invoices/{key}", {"set": {"status": "paid"}}, **fence, **{"Fence-Owner": "b7"})
        self.call("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "minimal"}}, expect=204, Prefer="return=minimal",
                  **fence)
        self.call("POST", "/v1/pg/batch", {"ops": [{"op": "patch", "table": "invoices", "key": key,
                                                    "set": {"status": "paid"}}]},
                  expect=204, Prefer="return=minimal", **fence)
        self.call("GET", f"/v1/pg/invoices/{key}")
        self.call("POST", f"/v1/locks/{lock}/renew", {"token": first["token"]})
        self.call("POST", f"/v1/locks/{lock}/release", {"token": first["token"]})
        second = self.call("POST", f"/v1/locks/{lock}/acquire", {"ttl_ms": 30000})
        self.call("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "second"}}, **{"Fence-Token": second["token"]})
        self.call("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "late"}}, expect=409, **fence)
        self.call("GET", f"/v1/audit/rejections?resource=pg:invoices/{key}")
        self.call("GET", f"/v1/audit/summary?since_ms={int(time.time() * 1000) - 60000}")
        # Both keys in lock's slot: on a Redis Cluster no write floor there is above lock's fences (a key of
        # another slot, "<rkey>:h" too, may meet its slot's floor: 409 stale_fence, docs/cluster.md).
        rkey, hkey = same_slot("app:oa", "app:oa-h", like=lock)
        self.call("PUT", f"/v1/redis/{rkey}", {"value": "paid"}, **{"Fence-Token": second["token"]})
        self.call("PATCH", f"/v1/redis/{hkey}", {"fields": {"status": "paid"}}, expect=204, Prefer="return=minimal",
                  **{"Fence-Token": second["token"]})
        self.call("GET", f"/v1/redis/{rkey}")
        self.call("GET", f"/v1/locks?prefix={lock}")
        self.call("POST", f"/v1/locks/{lock}/revoke", {"reason": "stuck in GC"})
        self.call("GET", f"/v1/locks/{lock}")
        s = self.call("POST", f"/v1/semaphores/{sem}/acquire", {"limit": 5, "wait_ms": 5000})
        self.call("GET", f"/v1/semaphores/{sem}")
        self.call("GET", f"/v1/semaphores?prefix={sem}")
        self.call("POST", f"/v1/semaphores/{sem}/renew", {"token": s["token"]})
        self.call("POST", f"/v1/semaphores/{sem}/release", {"token": s["token"]})
        names = [f"{lock}:a", f"{lock}:b"]
        ls = self.call("POST", "/v1/locksets/acquire", {"names": names, "ttl_ms": 10000})
        tokens = [lease["token"] for lease in ls["locks"]]
        self.call("POST", "/v1/locksets/renew", {"tokens": tokens})
        self.call("POST", "/v1/locksets/release", {"tokens": tokens})
        for path in ("/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/whoami", "/v1/gateways"):
            self.call("GET", path)
        self.assert_no_violations()

    def test_error_cases(self):
        lock = f"oa-e-{uuid.uuid4().hex[:8]}"
        lease = self.call("POST", f"/v1/locks/{lock}/acquire", {"ttl_ms": 30000})
        self.call("POST", f"/v1/locks/{lock}/acquire", {}, expect=409)                 # busy
        busy = self.call("POST", "/v1/locksets/acquire", {"names": [f"{lock}:set", lock]}, expect=409)
        self.assertEqual((busy["type"], busy["lock"], busy["waiting"]), ("/problems/lock_busy", lock, 0))
        # A body the document's schema admits but the gateway refuses: a lock set naming an invalid lock.
        self.call("POST", "/v1/locksets/acquire", {"names": [f"{lock} with spaces"]}, expect=400)
        self.call("POST", f"/v1/locks/{lock}/renew", {"token": "not-a-token"}, expect=403)
        self.call("POST", f"/v1/locks/{lock}/revoke", {"reason": "test"})
        self.call("POST", f"/v1/locks/{lock}/renew", {"token": lease["token"]}, expect=410)   # revoked
        self.call("PUT", f"/v1/redis/app:{lock}", {"value": "x"}, expect=410, **{"Fence-Token": lease["token"]})
        other = self.call("POST", f"/v1/locks/{lock}/acquire", {})
        self.call("POST", f"/v1/locks/{lock}/release", {"token": other["token"]})
        self.call("POST", f"/v1/locks/{lock}/release", {"token": other["token"]})           # again: 200
        self.call("GET", f"/v1/pg/invoices/{lock}", expect=404)
        self.call("GET", f"/v1/redis/app:{lock}-none", expect=404)
        with Redis() as redis:  # a value over limits.max_value_bytes, written around the gateway
            redis.cmd("SET", f"app:{lock}-big", "x" * 65537)
        over = self.call("GET", f"/v1/redis/app:{lock}-big", expect=409)
        self.assertEqual((over["type"], over["limit"], over["size"]),
                         ("/problems/conflict", "limits.max_value_bytes", 65537))
        for path in ("/metrics", "/v1/openapi.json", "/v1/audit/rejections"):
            self.call("GET", path, expect=401, key="no-such-key")
        for path in ("/metrics", "/v1/audit/rejections", "/v1/gateways"):  # the document: any known key
            self.assertIn("scope", self.call("GET", path, expect=403, key=LOCKS_ONLY))
        # A scope missing for a write: its 403 carries the scope, whatever else the operation answers 403.
        self.assertIn("scope", self.call("PUT", f"/v1/pg/invoices/{lock}", {"row": {"customer": "acme"}},
                                         expect=403, key=LOCKS_ONLY, **{"Fence-Token": other["token"]}))
        # What the document itself refuses, Prism refuses before the gateway sees it (a request violation).
        r = self.via.request("POST", f"/v1/locks/{lock}/acquire", {"ttl_ms": "soon"},
                             headers={"Authorization": f"Bearer {ADMIN}"})
        self.assertEqual((r.status, r.body["type"]), (422, f"{PRISM_ERROR}#UNPROCESSABLE_ENTITY"), r)
        self.assert_no_violations()

    def test_members_of_refusals(self):
        """The refusals whose members docs/api.md names beyond those above: limit_mismatch; lease_lost of a
        released lease (`reason` released); a lock set's 410, 409 max_hold_exceeded and 429 naming its
        lock; stale_fence of a Redis write, of an insert and of a batch (`stale`)."""
        u = uuid.uuid4().hex[:8]
        lock = f"oa-m-{u}"
        self.call("POST", f"/v1/semaphores/{lock}/acquire", {"limit": 2})
        self.assertEqual(self.call("POST", f"/v1/semaphores/{lock}/acquire", {"limit": 3}, expect=409)["limit"], 2)
        first = self.call("POST", f"/v1/locks/{lock}/acquire", {})
        self.call("POST", f"/v1/locks/{lock}/release", {"token": first["token"]})
        lost = self.call("POST", f"/v1/locks/{lock}/renew", {"token": first["token"]}, expect=410)
        self.assertEqual(lost["reason"], "released")
        # A lock set whose second lock was revoked: asked again, renewed and released, each answer names
        # that lock.
        names = [f"{lock}:a", f"{lock}:b"]
        tokens = [held["token"] for held in
                  self.call("POST", "/v1/locksets/acquire", {"names": names, "request_id": f"r-{u}"})["locks"]]
        self.call("POST", f"/v1/locks/{names[1]}/revoke", {"reason": "stuck"})
        for path, body in (("acquire", {"names": names, "request_id": f"r-{u}"}), ("renew", {"tokens": tokens}),
                           ("release", {"tokens": tokens})):
            self.assertEqual(self.call("POST", f"/v1/locksets/{path}", body, expect=410)["lock"], names[1], path)
        # A renewal cut at the deadline, then one past it.
        capped = self.call("POST", "/v1/locksets/acquire", {"names": [f"{lock}:h"], "ttl_ms": 300,
                                                                 "max_hold_ms": 400})
        capped = {"tokens": [capped["locks"][0]["token"]], "ttl_ms": 5000}
        self.call("POST", "/v1/locksets/renew", capped)
        time.sleep(0.6)
        self.assertEqual(self.call("POST", "/v1/locksets/renew", capped, expect=409)["lock"], f"{lock}:h")
        self.assert_set_queue_full(f"{lock}:q")
        # Stale fences: a token older than the one that wrote last.
        older = self.call("POST", f"/v1/locks/{lock}:w/acquire", {})
        self.call("POST", f"/v1/locks/{lock}:w/release", {"token": older["token"]})
        newer = self.call("POST", f"/v1/locks/{lock}:w/acquire", {})
        rkey, key = same_slot("app:oa-s", like=f"{lock}:w")[0], f"oa-s-{u}"
        self.call("PUT", f"/v1/redis/{rkey}", {"value": "new"}, **{"Fence-Token": newer["token"]})
        self.call("PUT", f"/v1/pg/invoices/{key}", {"row": {"customer": "acme"}}, **{"Fence-Token": newer["token"]})
        stale = {"Fence-Token": older["token"]}
        self.call("PUT", f"/v1/redis/{rkey}", {"value": "old"}, expect=409, **stale)
        self.call("POST", "/v1/pg/invoices", {"row": {"id": key, "customer": "acme"}}, expect=409, **stale)
        batch = self.call("POST", "/v1/pg/batch", {"ops": [{"op": "patch", "table": "invoices", "key": key,
                                                            "set": {"note": "late"}}]}, expect=409, **stale)
        self.assertEqual(batch["stale"], [{"resource": f"pg:invoices/{key}", "current_fence": newer["fence"]}])
        self.assert_no_violations()

    def assert_set_queue_full(self, name: str):
        """A lock set refused 429 for the queue of lock name, full with one waiter parked straight on the
        gateway: the answer names the lock and the length of its queue."""
        holder = self.call("POST", f"/v1/locks/{name}/acquire", {})
        auth = {"Authorization": f"Bearer {ADMIN}"}
        waiter = threading.Thread(target=http, args=("POST", self.gw.url(f"/v1/locks/{name}/acquire"),
                                                     {"wait_ms": 10000}, auth))
        waiter.start()
        wait_for(lambda: self.c.get(f"/v1/locks/{name}", headers=auth).body.get("waiting") == 1, timeout=10,
                 what="the waiter in the queue")
        full = self.call("POST", "/v1/locksets/acquire", {"names": [name], "wait_ms": 1000}, expect=429)
        self.assertEqual((full["lock"], full["waiting"]), (name, 1))
        self.call("POST", f"/v1/locks/{name}/release", {"token": holder["token"]})
        waiter.join(10)


if __name__ == "__main__":
    unittest.main()
