# SPDX-License-Identifier: Apache-2.0
"""Serving the operator console: /ui/ and its files come from the binary with a strict
Content-Security-Policy, the page holds no inline script or style, and "ui": false removes the routes.

Owns: the HTTP side of the console (the browser side is test_console_browser.py). Must not: need a
browser.
"""

import hashlib
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, run_fencegate, same_slot  # noqa: E402

FILES = {"/ui/": "text/html", "/ui": "text/html", "/ui/index.html": "text/html",
         "/ui/console.js": "text/javascript", "/ui/console.css": "text/css", "/ui/favicon.svg": "image/svg+xml"}


class ConsoleServingTest(unittest.TestCase):
    def test_files_carry_a_strict_csp_and_their_content_type(self):
        with Gateway() as gw, gw.client() as c:
            for path, ctype in FILES.items():
                r = c.get(path)
                self.assertEqual(r.status, 200, (path, r))
                self.assertTrue(r.headers["content-type"].startswith(ctype), (path, r.headers))
                csp = r.headers["content-security-policy"]
                self.assertIn("default-src 'none'", csp)
                self.assertIn("script-src 'self'", csp)
                self.assertIn("connect-src 'self'", csp)
                self.assertIn("frame-ancestors 'none'", csp)
                self.assertNotIn("unsafe-inline", csp)
                self.assertNotIn("unsafe-eval", csp)
                self.assertEqual(r.headers["x-content-type-options"], "nosniff")
            for path in ("/ui/nope.js", "/ui/index.txt", "/ui/..%2Fconsole.js"):
                r = c.get(path)
                self.assertIn(r.status, (400, 404), (path, r))
            self.assertEqual(c.get("/v1/whoami").body, {"auth": "off", "principal": None, "scopes": ["admin"]})

    def test_every_answer_forbids_content_type_sniffing(self):
        """The console keeps its API key in the session storage of the gateway's origin, and API answers
        carry what any writer stored (a Redis value, an owner, a lock's name): none may be read by a
        browser as anything but its declared type, so every answer says `X-Content-Type-Options: nosniff`,
        not only the console's files. Caught before the fix: JSON, problem+json, the metrics text and a
        204 went without it. The key and its lock share a slot on a Redis Cluster, so that no write floor
        there refuses the write (docs/cluster.md): with names of two slots it once answered 409."""
        key, lock = same_slot("app:sniff", "sniff")
        with Gateway(config={"redis_prefixes": ["app:"]}) as gw, gw.client() as c:
            token = c.post(f"/v1/locks/{lock}/acquire", {"ttl_ms": 10000}).body["token"]
            answers = [c.get("/v1/whoami"), c.get(f"/v1/locks/{lock}"), c.get("/metrics"), c.get("/nope"),
                       c.request("PUT", f"/v1/redis/{key}", {"value": "<script>alert(1)</script>"},
                                 headers={"Fence-Token": token, "Prefer": "return=minimal"}),
                       c.get(f"/v1/redis/{key}"), c.post(f"/v1/locks/{lock}/release", "{"), c.get("/ui/nope.js")]
            self.assertEqual([r.status for r in answers], [200, 200, 200, 404, 204, 200, 400, 404], answers)
            for r in answers:
                self.assertEqual(r.headers.get("x-content-type-options"), "nosniff", r)

    def test_the_page_has_no_inline_script_style_or_external_reference(self):
        with Gateway() as gw, gw.client() as c:
            page = c.get("/ui/").body
            scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page, re.S)
            self.assertTrue(scripts)
            for attrs, body in scripts:
                self.assertIn('src="/ui/', attrs)
                self.assertEqual(body.strip(), "")
            self.assertNotRegex(page, r"\son[a-z]+\s*=", "inline event handlers")
            self.assertNotRegex(page, r"\sstyle\s*=|<style", "inline styles")
            self.assertNotRegex(page, r"(src|href)=\"(https?:)?//", "references outside the gateway")
            js = c.get("/ui/console.js").body
            self.assertNotRegex(js, r"https?://(?!www\.w3\.org/2000/svg)", "the script calls only the gateway")
            self.assertNotIn("eval(", js)
            self.assertNotIn("document.cookie", js)
            self.assertIn("sessionStorage", js)

    def test_whoami_with_auth_names_the_key_and_its_scopes(self):
        auth = {"mode": "required", "keys": [
            {"id": "ops", "sha256": hashlib.sha256(b"ops-key").hexdigest(), "scopes": ["admin"]},
            {"id": "viewer", "sha256": hashlib.sha256(b"viewer-key").hexdigest(), "scopes": ["lock:*"]}]}
        with Gateway(config={"auth": auth}) as gw, gw.client() as c:
            self.assertEqual(c.get("/v1/whoami").body, {"auth": "required", "principal": None, "scopes": []})
            r = c.get("/v1/whoami", headers={"Authorization": "Bearer wrong"})
            self.assertEqual(r.body, {"auth": "required", "principal": None, "scopes": []})
            r = c.get("/v1/whoami", headers={"Authorization": "Bearer viewer-key"})
            self.assertEqual(r.body, {"auth": "required", "principal": "viewer", "scopes": ["lock:*"]})
            r = c.get("/v1/whoami", headers={"Authorization": "Bearer ops-key"})
            self.assertEqual(r.body["principal"], "ops")
            self.assertEqual(c.get("/ui/").status, 200, "the page itself needs no key")

    def test_ui_false_removes_the_routes(self):
        with Gateway(config={"ui": False}) as gw, gw.client() as c:
            for path in FILES:
                r = c.get(path)
                self.assertEqual(r.status, 404, (path, r))
                self.assertEqual(r.body["type"], "/problems/not_found")
            self.assertEqual(c.get("/healthz").status, 200)

    def test_ui_must_be_a_boolean(self):
        r = run_fencegate(config={"ui": "no"})
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("'ui' must be true or false", r.stderr + r.stdout)

if __name__ == "__main__":
    unittest.main()
