# SPDX-License-Identifier: Apache-2.0
"""API keys and scopes over HTTP: every route with no key, an unknown key, a key lacking the scope and
the right key; wildcard edges; batches checked table by table; keys re-read on SIGHUP; `fencegate keys
new`; start-up refusals naming the entry; the key id in the request log.

Broken variants caught while writing this (each tried, then reverted): the scope check skipped
(api_key_permits always true: test_every_route 'lacking' rows answered 2xx/4xx other than 403); the batch
handler not checking its tables (test_batch_checks_every_table went on to 400 for the missing Fence-Token
instead of 403); the key set of a SIGHUP not put in force (the new key got 401 in
test_sighup_rereads_keys); a connection's remembered key kept across a SIGHUP (the removed key still
answered 200 on its kept-alive connection in test_kept_alive_connection_rechecks).

Owns: authentication and authorization (docs/api.md "Authentication and authorization"). Must not: test the
fenced-write rules themselves (test_pg_*.py, test_redis_writes.py) or bound resources (test_bound.py).
"""

import hashlib
import http.client as httpclient
import json
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, run_fencegate, wait_for  # noqa: E402
from pg_helpers import INVOICE_COLUMNS, unique  # noqa: E402

# (method, path, body, the scope the call needs, or None for "any known key")
ROUTES = [
    ("GET", "/metrics", None, "metrics"),
    ("GET", "/v1/openapi.json", None, None),
    ("POST", "/v1/locks/auth-l/acquire", {"ttl_ms": 1000}, "lock:auth-l"),
    ("POST", "/v1/locks/auth-l/renew", {"token": "x"}, "lock:auth-l"),
    ("POST", "/v1/locks/auth-l/release", {"token": "x"}, "lock:auth-l"),
    ("GET", "/v1/locks/auth-l", None, "lock:auth-l"),
    ("POST", "/v1/semaphores/auth-s/acquire", {"limit": 2, "ttl_ms": 1000}, "semaphore:auth-s"),
    ("POST", "/v1/semaphores/auth-s/renew", {"token": "x"}, "semaphore:auth-s"),
    ("POST", "/v1/semaphores/auth-s/release", {"token": "x"}, "semaphore:auth-s"),
    ("GET", "/v1/semaphores/auth-s", None, "semaphore:auth-s"),
    ("PUT", "/v1/redis/app:k", {"value": "v"}, "redis:app:k:write"),
    ("PATCH", "/v1/redis/app:k", {"fields": {"a": "b"}}, "redis:app:k:write"),
    ("DELETE", "/v1/redis/app:k", None, "redis:app:k:write"),
    ("GET", "/v1/redis/app:k", None, "redis:app:k:read"),
    ("POST", "/v1/pg/invoices", {"row": {"id": "auth-1"}}, "pg:invoices:write"),
    ("GET", "/v1/pg/invoices/auth-1", None, "pg:invoices:read"),
    ("PATCH", "/v1/pg/invoices/auth-1", {"set": {"note": "n"}}, "pg:invoices:write"),
    ("PUT", "/v1/pg/invoices/auth-1", {"row": {"note": "n"}}, "pg:invoices:write"),
    ("DELETE", "/v1/pg/invoices/auth-1", None, "pg:invoices:write"),
    ("POST", "/v1/pg/batch", {"ops": [{"op": "delete", "table": "invoices", "key": "auth-1"}]},
     "pg:invoices:write"),
    ("GET", "/v1/audit/rejections", None, "audit:read"),
    ("GET", "/v1/audit/summary", None, "audit:read"),
    ("GET", "/v1/locks", None, None),
    ("GET", "/v1/semaphores", None, None),
]

OPEN_ROUTES = ["/healthz", "/readyz", "/v1/whoami", "/ui/", "/ui/console.js"]


def key_entry(key_id: str, text: str, scopes: list[str]) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(text.encode()).hexdigest(), "scopes": scopes}


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


def scope_key(scope: str) -> str:
    return "key-for-" + hashlib.sha256(scope.encode()).hexdigest()[:16]


def past_the_check(r) -> bool:
    """True unless r is a 401 or a 403 forbidden (a 403 invalid_fence_token comes from the handler)."""
    refused = isinstance(r.body, dict) and r.body.get("type") in ("/problems/unauthorized",
                                                                  "/problems/forbidden")
    return r.status != 401 and not refused


def auth_config(keys: list[dict]) -> dict:
    return {"tables": {"invoices": {"key": "id", "columns": INVOICE_COLUMNS}},
            "redis_prefixes": ["app:"], "auth": {"mode": "required", "keys": keys}}


class AuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        scopes = sorted({s for *_, s in ROUTES if s})
        keys = [key_entry(f"k{i}", scope_key(s), [s]) for i, s in enumerate(scopes)]
        keys.append(key_entry("nothing", "key-nothing", ["lock:nothing-else"]))
        keys.append(key_entry("billing", "key-billing", ["lock:invoice:*", "redis:app:*:write"]))
        keys.append(key_entry("root", "key-root", ["admin"]))
        cls.gw = Gateway(config=auth_config(keys))
        cls.c = cls.gw.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.gw.stop()

    def assert_problem(self, r, status, code):
        self.assertEqual(r.status, status, r)
        self.assertTrue(r.headers.get("content-type", "").startswith("application/problem+json"), r)
        self.assertEqual(r.body["type"], f"/problems/{code}", r)
        return r.body

    def test_every_route(self):
        """No key and an unknown key: 401 with WWW-Authenticate; a key lacking the scope: 403 naming it;
        the right key: past the check (whatever the handler then says)."""
        for method, path, body, scope in ROUTES:
            with self.subTest(route=f"{method} {path}"):
                for headers in ({}, bearer("key-unknown")):
                    r = self.c.request(method, path, body, headers)
                    self.assert_problem(r, 401, "unauthorized")
                    self.assertTrue(r.headers.get("www-authenticate", "").startswith("Bearer"), r)
                if scope is not None:
                    r = self.c.request(method, path, body, bearer("key-nothing"))
                    problem = self.assert_problem(r, 403, "forbidden")
                    self.assertIn(scope, problem["detail"])
                    self.assertEqual(problem.get("scope"), scope, problem)
                right = bearer(scope_key(scope) if scope else "key-nothing")
                for key in (right, bearer("key-root")):
                    r = self.c.request(method, path, body, key)
                    self.assertTrue(past_the_check(r), r)

    def test_open_routes(self):
        for path in OPEN_ROUTES:
            self.assertEqual(self.c.get(path).status, 200)

    def test_wildcard_edges(self):
        """lock:invoice:* covers invoice: and invoice:42, not invoice or invoicex."""
        for name, allowed in (("invoice", False), ("invoice:", True), ("invoicex", False),
                              ("invoice:42", True), ("invoice:a/b", True)):
            r = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 1000}, headers=bearer("key-billing"))
            if allowed:
                self.assertEqual(r.status, 200, (name, r))
                r = self.c.post(f"/v1/locks/{name}/release", {"token": r.body["token"]},
                                headers=bearer("key-billing"))
                self.assertEqual(r.status, 200, r)
            else:
                self.assertEqual(self.assert_problem(r, 403, "forbidden")["scope"], f"lock:{name}")

    def test_batch_checks_every_table(self):
        """A batch is refused when any one of its tables lacks the write scope of the key, before anything of
        its tables is looked at: a table that does not exist, or a column a table does not list, answers the
        same 403 as a well-formed op (caught with the scopes checked after the parse: 404 and 400, which
        told a key without the scope which tables exist and which columns they list)."""
        for op in ({"op": "delete", "table": "invoices", "key": "nope"},
                   {"op": "put", "table": "invoices", "key": "nope", "row": {"no_such_column": 1}},
                   {"op": "delete", "table": "no_such_table", "key": "nope"}):
            r = self.c.post("/v1/pg/batch", {"ops": [op]}, headers=bearer("key-billing"))
            self.assertIn(f"pg:{op['table']}:write", self.assert_problem(r, 403, "forbidden")["detail"], op)

    def test_batch_names_the_first_table_refused(self):
        """A batch of a key that may write one of its tables answers 403 naming, in the member scope, the write
        scope of the first other table in the order of its ops."""
        ops = [{"op": "delete", "table": t, "key": "nope"} for t in ("invoices", "zz_table", "aa_table")]
        r = self.c.post("/v1/pg/batch", {"ops": ops}, headers=bearer(scope_key("pg:invoices:write")))
        problem = self.assert_problem(r, 403, "forbidden")
        self.assertEqual(problem.get("scope"), "pg:zz_table:write", problem)
        self.assertIn("pg:zz_table:write", problem["detail"])

    def test_batch_naming_a_table_too_long_for_a_scope_answers_404(self):
        """No table has a name too long for its write scope to be written down; a batch naming one answers
        404 as for any table that does not exist, whatever the key. Caught: 403 forbidden naming no scope,
        even for a key that may write every table."""
        ops = [{"op": "delete", "table": "a" * 1100, "key": "k"}]
        for key in ("key-root", scope_key("pg:invoices:write")):
            r = self.c.post("/v1/pg/batch", {"ops": ops}, headers=bearer(key))
            self.assertIn("no writable table", self.assert_problem(r, 404, "not_found")["detail"], (key, r))

    def test_lock_set_names_the_first_lock_refused(self):
        """A lock set's acquire, renew and release by a key lacking the scope of two of its locks answer 403
        naming, in the member scope, the first of them in the order of the request's names or tokens (zz,
        though the set takes aa first)."""
        names = ["invoice:set-1", "zz-set", "aa-set"]
        r = self.c.post("/v1/locksets/acquire", {"names": names, "ttl_ms": 5000}, headers=bearer("key-billing"))
        problem = self.assert_problem(r, 403, "forbidden")
        self.assertEqual(problem.get("scope"), "lock:zz-set", problem)
        self.assertIn("lock:zz-set", problem["detail"])
        held = self.c.post("/v1/locksets/acquire", {"names": names, "ttl_ms": 5000}, headers=bearer("key-root"))
        self.assertEqual(held.status, 200, held)
        tokens = [lock["token"] for lock in held.body["locks"]]
        for op, body in (("renew", {"tokens": tokens, "ttl_ms": 5000}), ("release", {"tokens": tokens})):
            r = self.c.post(f"/v1/locksets/{op}", body, headers=bearer("key-billing"))
            self.assertEqual(self.assert_problem(r, 403, "forbidden").get("scope"), "lock:zz-set", (op, r))
        r = self.c.post("/v1/locksets/release", {"tokens": tokens}, headers=bearer("key-root"))
        self.assertEqual(r.status, 200, r)

    def test_malformed_authorization(self):
        for value in ("Basic abc", "Bearer", "Bearer  ", "Bearer a b", "bearer", "Bearer " + "k" * 1025,
                      "Bearer key-root extra", "Token key-root"):
            r = self.c.get("/v1/locks/x", headers={"Authorization": value})
            self.assert_problem(r, 401, "unauthorized")
        # Past limits.connection_buffer_bytes the library refuses the headers itself (docs/api.md).
        r = self.c.get("/v1/locks/x", headers={"Authorization": "Bearer " + "k" * 10240})
        self.assertEqual(r.status, 431, r)
        r = self.c.get("/v1/locks/x", headers={"Authorization": "bearer key-root"})
        self.assertEqual(r.status, 200, r)
        # Spaces and tabs that end a header value are not part of it (RFC 9110 5.5): 401 before the fix.
        r = self.c.get("/v1/locks/x", headers={"Authorization": "Bearer key-root \t"})
        self.assertEqual(r.status, 200, r)

    def test_principal_in_audit_records(self):
        """A refused stale write keeps the writer's key id as principal (Postgres and Redis writes)."""
        root = bearer("key-root")
        lock, key, rkey = unique("aud"), unique("inv"), unique("app:aud")
        old = self.c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 1000}, headers=root).body
        self.c.post(f"/v1/locks/{lock}/release", {"token": old["token"]}, headers=root)
        new = self.c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 1000}, headers=root).body
        for path, body, write_body in ((f"/v1/pg/invoices/{key}", {"row": {"note": "n"}}, {"row": {"note": "o"}}),
                                       (f"/v1/redis/{rkey}", {"value": "n"}, {"value": "o"})):
            r = self.c.request("PUT", path, body, dict(root, **{"Fence-Token": new["token"]}))
            self.assertEqual(r.status, 200, r)
            r = self.c.request("PUT", path, write_body, dict(root, **{"Fence-Token": old["token"]}))
            self.assertEqual(r.status, 409, r)
        for resource in (f"pg:invoices/{key}", f"redis:{rkey}"):
            items = wait_for(lambda: self.c.get(f"/v1/audit/rejections?resource={resource}",
                                                headers=root).body["items"], 10, what="audit record")
            self.assertEqual([i["principal"] for i in items], ["root"], items)

    def test_principal_in_request_log(self):
        r = self.c.get("/v1/locks/invoice:log", headers=bearer("key-billing"))
        self.assertEqual(r.status, 200, r)
        wait_for(lambda: '"principal":"billing"' in self.gw.log_text().replace(" ", ""), 10,
                 what="principal in the request log")


class KeysLifecycleTest(unittest.TestCase):
    def test_sighup_rereads_keys(self):
        """A key added to the file works after SIGHUP, a removed one answers 401; a broken file on SIGHUP
        keeps the keys in force."""
        old = key_entry("old", "key-old", ["lock:*"])
        with Gateway(config=auth_config([old])) as gw:
            c = gw.client()
            self.assertEqual(c.get("/v1/locks/a", headers=bearer("key-old")).status, 200)
            self.assertEqual(c.get("/v1/locks/a", headers=bearer("key-new")).status, 401)
            with open(gw.config_path, "w", encoding="utf-8") as f:
                json.dump(auth_config([key_entry("new", "key-new", ["lock:*"])]), f)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: c.get("/v1/locks/a", headers=bearer("key-new")).status == 200, 10,
                     what="new key in force")
            self.assertEqual(c.get("/v1/locks/a", headers=bearer("key-old")).status, 401)
            with open(gw.config_path, "w", encoding="utf-8") as f:
                f.write('{"auth": {"mode": "required", "keys": [{"id": "x"}]}}')
            gw.signal(signal.SIGHUP)
            wait_for(lambda: "reload_failed" in gw.log_text(), 10, what="reload_failed logged")
            self.assertEqual(c.get("/v1/locks/a", headers=bearer("key-new")).status, 200)
            c.close()

    def test_kept_alive_connection_rechecks(self):
        """A kept-alive connection is not hashed again for the key it presented last, yet another text of
        the same length is refused on it, and a key removed on SIGHUP answers 401 on that same connection."""
        with Gateway(config=auth_config([key_entry("old", "key-old", ["lock:*"])])) as gw:
            conn = httpclient.HTTPConnection("127.0.0.1", gw.port, timeout=10)

            def status(text: str) -> int:
                conn.request("GET", "/v1/locks/a", headers=bearer(text))
                r = conn.getresponse()
                r.read()
                return r.status

            self.assertEqual(status("key-old"), 200)
            sock = conn.sock
            self.assertEqual(status("key-olD"), 401)
            self.assertEqual(status("key-old"), 200)
            with open(gw.config_path, "w", encoding="utf-8") as f:
                json.dump(auth_config([key_entry("new", "key-new", ["lock:*"])]), f)
            gw.signal(signal.SIGHUP)
            c = gw.client()  # waits for the new keys on a connection of its own
            wait_for(lambda: c.get("/v1/locks/a", headers=bearer("key-new")).status == 200, 10,
                     what="new key in force")
            c.close()
            self.assertEqual(status("key-old"), 401)
            self.assertIs(conn.sock, sock, "every call went over one connection")
            conn.close()

    def test_keys_new(self):
        """The printed key works with the printed entry; the entry holds only the hash."""
        p = run_fencegate(["keys", "new", "--id", "ci", "--scope", "lock:ci:*", "--scope", "metrics"])
        self.assertEqual(p.returncode, 0, p.stderr)
        key = next(line.split(": ", 1)[1] for line in p.stdout.splitlines() if line.startswith("key: "))
        entry = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(entry, {"id": "ci", "sha256": hashlib.sha256(key.encode()).hexdigest(),
                                 "scopes": ["lock:ci:*", "metrics"]})
        self.assertNotIn(key, json.dumps(entry))
        with Gateway(config=auth_config([entry])) as gw:
            self.assertEqual(gw.http("GET", "/v1/locks/ci:1", headers=bearer(key)).status, 200)
            self.assertEqual(gw.http("GET", "/metrics", headers=bearer(key)).status, 200)
            self.assertEqual(gw.http("GET", "/v1/locks/other", headers=bearer(key)).status, 403)
        for args in (["keys", "new", "--id", "a b", "--scope", "admin"],
                     ["keys", "new", "--id", "x", "--scope", "lock:a;b"],
                     ["keys", "new", "--id", "x"], ["keys", "old"]):
            p = run_fencegate(args)
            self.assertEqual(p.returncode, 2, (args, p))
            self.assertIn("fencegate keys", p.stderr)

    def test_start_refused_naming_the_entry(self):
        cases = [
            ({"auth": {"mode": "required"}}, "no key is configured"),
            ({"auth": {"mode": "required", "keys": [key_entry("a", "k", ["lock:a b"])]}},
             "auth.keys[0].scopes[0]"),
            ({"auth": {"keys": [key_entry("a", "k", ["admin", "lock:\u00e9"])]}}, "auth.keys[0].scopes[1]"),
            ({"auth": {"keys": [{"id": "a", "sha256": "00", "scopes": ["admin"]}]}}, "auth.keys[0].sha256"),
            ({"auth": {"mode": "sometimes"}}, "auth.mode"),
        ]
        for cfg, named in cases:
            p = run_fencegate(config=cfg)
            self.assertEqual(p.returncode, 2, (cfg, p))
            self.assertIn(named, p.stderr)

    def test_beyond_loopback_defaults(self):
        """Listening on 0.0.0.0 without keys refuses to start; with mode off it starts and warns loudly."""
        p = run_fencegate(env_overrides={"FENCEGATE_LISTEN": "0.0.0.0:0"})
        self.assertEqual(p.returncode, 2, p)
        self.assertIn("no key is configured", p.stderr)
        from harness import free_port
        port = free_port()
        with Gateway(env_overrides={"FENCEGATE_LISTEN": f"0.0.0.0:{port}", "FENCEGATE_AUTH_MODE": "off"}) as gw:
            self.assertIn("auth_off_beyond_loopback", gw.log_text())


if __name__ == "__main__":
    unittest.main()
