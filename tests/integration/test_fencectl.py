# SPDX-License-Identifier: Apache-2.0
"""fencectl end to end against a real gateway: `lock` runs commands one after the other, hands them a
token whose fence is FENCE and that fenced writes accept, stops a command whose lease is lost, passes on
the command's exit status; the scripted commands (acquire, renew, release, status, audit) and the exit
statuses of its refusals (docs/operations.md) (busy 2, lease lost 3, unreachable 4, usage 1).

Owns: the behaviour of the fencectl binary. Must not: test lock semantics beyond what fencectl adds (the
lock tests do), or the table layout of `audit` in detail (the unit tests do).
The binary: FG_CTL, else `fencectl` next to FG_BIN.
"""

import http.server
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, Redis, env, free_port, test_data_dir, wait_for  # noqa: E402

INVOICES = {"tables": {"invoices": {"key": "id", "columns": ["customer", "amount_cents", "status", "note"]}}}

# A command that writes through the gateway with the lease it runs under: PATCH of one invoice row.
PATCH_SCRIPT = r"""
import json, os, sys, urllib.request, urllib.error
url = os.environ["FENCEGATE_URL"] + "/v1/pg/invoices/" + sys.argv[1]
req = urllib.request.Request(url, method="PATCH", data=json.dumps({"set": {"note": sys.argv[2]}}).encode(),
                             headers={"Content-Type": "application/json", "Fence-Token": os.environ["FENCE_TOKEN"]})
try:
    with urllib.request.urlopen(req, timeout=20) as r:
        status, body = r.status, json.load(r)
except urllib.error.HTTPError as e:
    status, body = e.code, json.load(e)
json.dump({"status": status, "body": body, "fence": os.environ["FENCE"], "token": os.environ["FENCE_TOKEN"]},
          open(sys.argv[3], "w"))
"""


def ctl_path() -> str:
    path = os.environ.get("FG_CTL") or os.path.join(os.path.dirname(env("FG_BIN")), "fencectl")
    if not os.access(path, os.X_OK):
        raise unittest.SkipTest(f"fencectl not built at {path}")
    return path


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class FencectlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctl = ctl_path()
        cls.gw = Gateway(config=INVOICES)
        cls.env = {k: v for k, v in os.environ.items() if k not in ("FENCE_TOKEN", "FENCE")}
        cls.env["FENCEGATE_URL"] = cls.gw.base
        cls.scratch = test_data_dir()

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def run_ctl(self, *args: str, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([self.ctl, *args], env=kw.pop("env", self.env), capture_output=True, text=True,
                              timeout=timeout, **kw)

    def spawn_ctl(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([self.ctl, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def file(self, name: str) -> str:
        path = os.path.join(self.scratch, f"{name}-{uuid.uuid4().hex[:8]}")
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        return path

    def status(self, name: str) -> dict:
        r = self.run_ctl("status", name, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    # -- lock: one command at a time --------------------------------------------------------------------

    def test_two_lock_runs_never_overlap(self):
        name, log = unique("ctl-excl"), self.file("excl")
        body = f'echo "start $(date +%s%N)" >> {log}; sleep 0.6; echo "end $(date +%s%N)" >> {log}'
        procs = [self.spawn_ctl("lock", name, "--wait", "20000", "--", "sh", "-c", body) for _ in range(2)]
        for p in procs:
            out, err = p.communicate(timeout=40)
            self.assertEqual(p.returncode, 0, err)
        events = [line.split() for line in read(log).splitlines()]
        self.assertEqual([e[0] for e in events], ["start", "end", "start", "end"], events)
        self.assertLessEqual(int(events[1][1]), int(events[2][1]))
        self.assertFalse(self.status(name)["held"])

    def test_command_gets_token_and_fence_and_writes_with_them(self):
        name, key, out = unique("ctl-inv"), unique("inv"), self.file("patch")
        r = self.gw.http("PUT", f"/v1/pg/invoices/{key}", {"row": {"id": key, "note": "new"}},
                         headers={"Fence-Token": self._token(unique("ctl-seed"))})
        if r.status == 404 and r.body.get("detail") == "no such route":
            self.skipTest("PUT /v1/pg/invoices/{key} does not exist yet")
        self.assertEqual(r.status, 200, r)
        inner = (f'{shlex.quote(self.ctl)} status {name} --json > {out}.status && '
                 f'{shlex.quote(self.ctl)} renew {name} --json > {out}.renew && '
                 f'python3 -c {shlex.quote(PATCH_SCRIPT)} {key} by-fencectl {out}')
        r = self.run_ctl("lock", name, "--owner", "ctl-test", "--", "sh", "-c", inner)
        self.assertEqual(r.returncode, 0, r.stderr)
        seen = json.loads(read(out))
        fence = int(seen["fence"])
        self.assertEqual(json.loads(read(out + ".status"))["fence"], fence)
        self.assertEqual(json.loads(read(out + ".renew"))["fence"], fence)
        self.assertEqual(seen["status"], 200, seen)
        self.assertEqual(seen["body"]["fence"], fence)
        self.assertEqual(seen["body"]["row"]["note"], "by-fencectl")
        os.unlink(out + ".status")
        os.unlink(out + ".renew")

        # The command's token is stale once a newer lease wrote: refused, and the audit shows it.
        newer = self._token(unique("ctl-newer"))
        self.assertEqual(self.gw.http("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "newer"}},
                                      headers={"Fence-Token": newer}).status, 200)
        stale = self.gw.http("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "late"}},
                             headers={"Fence-Token": seen["token"]})
        self.assertEqual(stale.status, 409, stale)
        r = self.run_ctl("audit", "--resource", f"pg:invoices/{key}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("stale_fence", r.stdout)
        self.assertIn(f"pg:invoices/{key}", r.stdout)
        self.assertNotIn(seen["token"], r.stdout)
        r = self.run_ctl("audit", "--resource", f"pg:invoices/{key}", "--json")
        items = json.loads(r.stdout)["items"]
        self.assertEqual([(i["presented_fence"], i["lock"]) for i in items], [(fence, name)])

    def test_audit_keeps_one_lease_kind(self):
        """`audit --lease-kind` keeps one kind of lease (GET /v1/audit/rejections?lease_kind=): of a lock and a
        semaphore of one name, each refused a stale write, `--lock N --lease-kind semaphore` lists the
        semaphore's record alone and `--lease-kind lock` the lock's; another kind is a usage error (1)."""
        name, key = unique("ctl-kind"), unique("inv")
        lock = self._lease(f"/v1/locks/{name}/acquire", {"ttl_ms": 60000})
        sem = self._lease(f"/v1/semaphores/{name}/acquire", {"limit": 2, "ttl_ms": 60000})
        r = self.gw.http("PUT", f"/v1/pg/invoices/{key}", {"row": {"id": key, "note": "newer"}},
                         headers={"Fence-Token": self._token(unique("ctl-newer"))})
        self.assertEqual(r.status, 200, r)
        for older in (lock, sem):
            r = self.gw.http("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "late"}},
                             headers={"Fence-Token": older["token"]})
            self.assertEqual(r.status, 409, r)
        for kind, lease in (("lock", lock), ("semaphore", sem)):
            r = self.run_ctl("audit", "--lock", name, "--lease-kind", kind, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            items = json.loads(r.stdout)["items"]
            self.assertEqual([(i["lease_kind"], i["presented_fence"]) for i in items], [(kind, lease["fence"])])
            r = self.run_ctl("audit", "--lock", name, "--lease-kind", kind)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.count(name), 1, r.stdout)
        r = self.run_ctl("audit", "--lock", name, "--json")
        self.assertEqual(len(json.loads(r.stdout)["items"]), 2, r.stdout)
        r = self.run_ctl("audit", "--lease-kind", "sem")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--lease-kind: expected lock or semaphore", r.stderr)
        r = self.run_ctl("audit", "--help")
        self.assertIn("--lease-kind K", r.stdout)

    def test_audit_says_when_the_default_page_is_full(self):
        """`audit` without --limit lists the gateway's default page, the 100 oldest records, and said nothing of
        the ones after it, the newest: only a page of an explicit --limit printed the --after-id hint. Of 101
        refused writes on one resource, `audit --resource R` prints 100 and the hint, and the page after them
        the last record, without a hint."""
        key = unique("inv")
        older, newer = self._token(unique("ctl-older")), self._token(unique("ctl-newer"))
        r = self.gw.http("PUT", f"/v1/pg/invoices/{key}", {"row": {"id": key, "note": "newer"}},
                         headers={"Fence-Token": newer})
        self.assertEqual(r.status, 200, r)
        for _ in range(101):
            r = self.gw.http("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "late"}},
                             headers={"Fence-Token": older})
            self.assertEqual(r.status, 409, r)
        resource = f"pg:invoices/{key}"
        r = self.run_ctl("audit", "--resource", resource)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(resource), 100, r.stdout)
        hint = re.search(r"add --after-id (\d+)", r.stderr)
        self.assertIsNotNone(hint, r.stderr)
        r = self.run_ctl("audit", "--resource", resource, "--after-id", hint.group(1))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(resource), 1, r.stdout)
        self.assertEqual(r.stderr, "")

    def _lease(self, path: str, body: dict) -> dict:
        r = self.gw.http("POST", path, body)
        self.assertEqual(r.status, 200, r)
        return r.body

    def _token(self, lock: str) -> str:
        r = self.gw.http("POST", f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000})
        self.assertEqual(r.status, 200, r)
        return r.body["token"]

    # -- lock: a lost lease stops the command -----------------------------------------------------------

    def test_lost_lease_stops_the_command_within_one_renewal(self):
        name, log, pidfile = unique("ctl-lost"), self.file("lost"), self.file("pid")
        body = f"echo started > {log}; sleep 30 & echo $! > {pidfile}; wait; echo finished >> {log}"
        p = self.spawn_ctl("lock", name, "--ttl", "1500", "--grace", "3000", "--", "sh", "-c", body)
        wait_for(lambda: os.path.exists(pidfile) and read(pidfile).strip(), timeout=15,
                 what="the command to start")
        sleeper = int(read(pidfile))
        with Redis() as r:
            self.assertEqual(r.cmd("DEL", f"fg:lk:{{{name}}}:h"), 1)
        deleted = time.monotonic()
        out, err = p.communicate(timeout=20)
        took = time.monotonic() - deleted
        self.assertEqual(p.returncode, 3, err)
        self.assertIn("lost", err)
        self.assertLess(took, 0.5 + 2.0, f"fencectl took {took:.2f}s after the lease was deleted")
        self.assertEqual(read(log), "started\n")
        # The whole process group went, not only the shell.
        wait_for(lambda: not _alive(sleeper), timeout=5, what="the command's child to be killed")

    # -- exit statuses ----------------------------------------------------------------------------------

    def test_command_status_is_passed_on(self):
        name = unique("ctl-rc")
        self.assertEqual(self.run_ctl("lock", name, "--", "sh", "-c", "exit 7").returncode, 7)
        self.assertEqual(self.run_ctl("lock", name, "--", "sh", "-c", "kill -TERM $$").returncode, 128 + 15)
        r = self.run_ctl("lock", name, "--", "/nonexistent/command")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertFalse(self.status(name)["held"])

    def test_busy_is_2(self):
        name = unique("ctl-busy")
        self._token(name)
        r = self.run_ctl("lock", name, "--", "true")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("lock_busy", r.stderr)
        self.assertEqual(self.run_ctl("acquire", name).returncode, 2)

    def test_unreachable_is_4_and_usage_is_1(self):
        r = self.run_ctl("--url", f"http://127.0.0.1:{free_port()}", "lock", "x", "--", "true")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("unreachable", r.stderr)
        self.assertEqual(self.run_ctl("status", "bad name").returncode, 1)
        self.assertEqual(self.run_ctl("lock", "x").returncode, 1)
        r = self.run_ctl("lock", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: fencectl lock", r.stdout)

    # -- the scripted commands --------------------------------------------------------------------------

    def test_acquire_renew_release_from_a_script(self):
        name = unique("ctl-script")
        r = self.run_ctl("acquire", name, "--ttl", "5000", "--owner", "script")
        self.assertEqual(r.returncode, 0, r.stderr)
        values = dict(line.removeprefix("export ").split("=", 1) for line in r.stdout.splitlines())
        token, fence = values["FENCE_TOKEN"], int(values["FENCE"])
        st = self.status(name)
        self.assertEqual((st["held"], st["fence"], st["owner"]), (True, fence, "script"))
        self.assertNotIn(token, json.dumps(st))
        r = self.run_ctl("status", name)
        self.assertIn(f"held, fence {fence}", r.stdout)
        r = self.run_ctl("renew", name, "--ttl", "8000", env=dict(self.env, FENCE_TOKEN=token))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"export FENCE={fence}\n", r.stdout)
        self.assertEqual(self.run_ctl("release", name, "--token", token).returncode, 0)
        self.assertEqual(self.run_ctl("release", name, "--token", token).returncode, 0)
        r = self.run_ctl("renew", name, "--token", token, "--json")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(json.loads(r.stdout)["type"], "/problems/lease_lost")

    def test_acquire_exports_the_lease_to_commands_run_after_eval(self):
        name = unique("ctl-eval")
        script = f'eval "$({shlex.quote(self.ctl)} acquire {name} --ttl 5000)" && sh -c \'echo "$FENCE $FENCE_TOKEN"\''
        r = subprocess.run(["sh", "-c", script], env=self.env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        fence, token = r.stdout.split()
        self.assertEqual(self.status(name)["fence"], int(fence))
        self.assertEqual(self.run_ctl("release", name, "--token", token).returncode, 0)

    def test_max_hold_deadline_is_3(self):
        """max_hold_ms caps the hold (API 1.1): a renewal before the deadline is granted up to it, one after
        it finds the lease ended there (409 max_hold_exceeded, the renewal having been cut): a lost lease
        for every command, exit 3; `lock` stops its command when the hold reaches the deadline."""
        name = unique("ctl-hold")
        # 3 s: the renewal below comes well within the lease on a loaded machine
        r = self.run_ctl("acquire", name, "--ttl", "3000", "--max-hold", "3000")
        self.assertEqual(r.returncode, 0, r.stderr)
        token = dict(line.removeprefix("export ").split("=", 1) for line in r.stdout.splitlines())["FENCE_TOKEN"]
        r = self.run_ctl("renew", name, "--token", token, "--ttl", "5000")
        self.assertEqual(r.returncode, 0, r.stderr)  # granted, up to the deadline
        time.sleep(3.2)  # past the deadline
        r = self.run_ctl("renew", name, "--token", token, "--ttl", "1000")
        self.assertEqual(r.returncode, 3, r.stderr)
        started = time.monotonic()
        r = self.run_ctl("lock", name + "-run", "--ttl", "300", "--max-hold", "300", "--", "sleep", "20")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertLess(time.monotonic() - started, 10)

    def test_lost_lease_with_a_hung_gateway_is_bounded_and_not_called_unreachable(self):
        """With the gateway frozen (SIGSTOP), renewals get no answer until the lease runs out: fencectl stops the
        command, tries once to give the lease back for at most CTL_GIVE_BACK_MS (2 s) and exits 3, without
        calling a gateway that only took longer than the lease's remaining time "unreachable". Caught: the
        give-back with the 30 s timeout of ordinary calls (took ~32 s), and the old report of the last attempt
        ("gateway unreachable: ...")."""
        gw = Gateway(config=INVOICES)
        try:
            name, pidfile = unique("ctl-hung"), self.file("hung")
            p = subprocess.Popen([self.ctl, "lock", name, "--ttl", "1500", "--grace", "500", "--", "sh", "-c",
                                  f"echo $$ > {pidfile}; exec sleep 60"],
                                 env=dict(self.env, FENCEGATE_URL=gw.base), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            wait_for(lambda: os.path.exists(pidfile) and read(pidfile).strip(), timeout=15,
                     what="the command to start")
            os.kill(gw.proc.pid, signal.SIGSTOP)
            frozen = time.monotonic()
            out, err = p.communicate(timeout=40)
            took = time.monotonic() - frozen
            self.assertEqual(p.returncode, 3, err)
            self.assertIn("no renewal got through", err)
            self.assertNotIn("unreachable", err)
            # At most the lease (1.5 s), the grace period (0.5 s) and the bounded give-back (2 s), plus slack.
            self.assertLess(took, 1.5 + 0.5 + 2.0 + 3.0, err)
        finally:
            os.kill(gw.proc.pid, signal.SIGCONT)
            gw.stop()

    def test_semaphore_runs(self):
        name, log = unique("ctl-sem"), self.file("sem")
        body = f'echo "$FENCE" >> {log}; sleep 0.3'
        procs = [self.spawn_ctl("sem", name, "--limit", "2", "--wait", "20000", "--", "sh", "-c", body)
                 for _ in range(3)]
        for p in procs:
            out, err = p.communicate(timeout=40)
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(len(set(read(log).split())), 3)
        r = self.run_ctl("status", name, "--sem", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["holders"], 0)


def serve_http(test: unittest.TestCase, body: bytes, content_type: str) -> str:
    """The URL of an HTTP server that answers every GET and POST 200 with body, until test ends."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    test.addCleanup(server.server_close)
    test.addCleanup(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}"


class ForeignAnswerTest(unittest.TestCase):
    """A 2xx answer that is not the gateway's (a web page, another service's JSON, a proxy's answer at a wrong
    --url) exits 5 naming what came, for every command: never exit 0 with an empty grant ("export
    FENCE_TOKEN=''"), a lock shown free, "nothing to revoke", "no rejected writes", nothing printed for
    --json, nor a crash (`watch` passed the absent reason to puts)."""

    COMMANDS = (["acquire", "x"], ["acquire", "x", "--json"], ["status", "x"], ["status", "x", "--sem", "--json"],
                ["watch", "x", "--fence", "5"], ["watch", "x", "--fence", "5", "--json"], ["audit"], ["list"],
                ["list", "--json"], ["revoke", "x"], ["renew", "x", "--token", "t"],
                ["release", "x", "--token", "t"], ["lock", "x", "--", "true"], ["lock", "--set", "a,b", "--", "true"])

    def check(self, url: str, says: str) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("FENCE", "FENCEGATE_"))}
        environ["FENCEGATE_URL"] = url
        for args in self.COMMANDS:
            with self.subTest(args=args):
                r = subprocess.run([ctl_path(), *args], env=environ, capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 5, f"stdout {r.stdout!r} stderr {r.stderr!r}")
                self.assertEqual(r.stdout, "")
                self.assertIn(says, r.stderr)
                self.assertIn("is the URL the gateway's?", r.stderr)
                self.assertNotIn("runtime error", r.stderr)

    def test_a_web_page(self):
        self.check(serve_http(self, b"<html><body>It works!</body></html>", "text/html"),
                   "the HTTP 200 answer is not a JSON object (Content-Type: text/html)")

    def test_json_of_another_service(self):
        self.check(serve_http(self, b'{"status": "ok"}', "application/json"), "the HTTP 200 answer lacks '")


class CacertTest(unittest.TestCase):
    """--cacert (or FENCEGATE_CACERT) naming a file that holds no CA certificate is a usage error (exit 1) and
    says so; it exited 4 as "gateway unreachable: --cacert F: no CA certificate could be read", which sent the
    operator after the network and the gateway rather than the command line."""

    def test_a_cacert_without_a_ca_is_a_usage_error(self):
        https = serve_http(self, b"{}", "application/json").replace("http://", "https://")
        environ = {k: v for k, v in os.environ.items() if not k.startswith("FENCE")}
        for how in (["--cacert", "/nonexistent/ca.pem"], ["--cacert", os.path.abspath(__file__)]):
            with self.subTest(how=how):
                r = subprocess.run([ctl_path(), "--url", https, *how, "status", "x"], env=environ,
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stderr, f"fencectl: --cacert {how[1]}: no CA certificate could be read\n")
        r = subprocess.run([ctl_path(), "--url", https, "status", "x"], capture_output=True, text=True, timeout=30,
                           env=dict(environ, FENCEGATE_CACERT="/nonexistent/ca.pem"))
        self.assertEqual(r.returncode, 1, r.stderr)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main()
