# SPDX-License-Identifier: Apache-2.0
"""fencectl and the 1.1 lease features: `revoke`, `watch`, `lock --set`, and `lock`/`sem` stopping their
command within 100 ms of a revoke (the watch), not at the next renewal (a third of the TTL away).

- `fencectl lock NAME -- cmd` with a 30 s TTL; an operator revokes the lease: the command is gone within
  100 ms of the revoke's answer (BOUND_S on a loaded machine) and fencectl exits 3; the same for a semaphore
  slot and for one lock of a `lock --set`;
- `fencectl lock --set A,B,C -- cmd` runs cmd with FENCE_TOKENS and FENCES (in the order given) while every
  lock is held, and releases them all;
- `fencectl renew` / `release` of a revoked lease name the revoke and its reason;
- `fencectl list PREFIX` lists the locks and semaphores under PREFIX (--limit, --sem, --json);
- `fencectl watch` prints how a lease ended (exit 0) or that it still holds after --wait (exit 2);
  `fencectl revoke` prints the revoked fence or "nothing to revoke"; usage errors exit 1.

Broken variant this file caught when tried: fencectl without its watcher threads (the revoked command ran
on until the next renewal, 10 s later, and the bound failed).

Owns: fencectl's revoke, watch, list and --set. Must not: depend on renewals to notice a revoke.
"""

import json
import os
import subprocess
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, metric, test_data_dir, wait_for  # noqa: E402
from test_fencectl import ctl_path  # noqa: E402

# The contract's 100 ms holds on an idle machine; 3 s allows for a loaded one (as test_lease_revoke.py's
# WatchTest) and is still well short of the next renewal the broken variant waited for: a third of the 30 s TTL,
# 10 s after the grant (the wait below gives up at 5 s, which fails the bound too).
BOUND_S = 3.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class FencectlLeaseTest(GatewayTest):
    @classmethod
    def setUpClass(cls):
        cls.ctl = ctl_path()
        super().setUpClass()

    def run_ctl(self, *args, timeout=30):
        return subprocess.run([self.ctl, "--url", self.gw.base, *args], capture_output=True, text=True,
                              timeout=timeout)

    def start_held(self, *args, watches=1):
        """Starts fencectl running a shell that records its pid and environment, then sleeps; returns once the
        gateway counts the watches of fencectl's watcher threads parked (one a lease held)."""
        out = os.path.join(test_data_dir(), unique("ctl-env"))
        script = f'echo $$ > {out}.pid; env > {out}.env; exec sleep 60'
        proc = subprocess.Popen([self.ctl, "--url", self.gw.base, *args, "--", "sh", "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: os.path.exists(out + ".env") and os.path.getsize(out + ".env") > 0, timeout=20,
                 what="the command to start")
        wait_for(lambda: metric(self.gw, "fencegate_watches") >= watches, what="the watchers parked")
        with open(out + ".pid") as f:
            pid = int(f.read())
        with open(out + ".env") as f:
            environ = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        return proc, pid, environ

    def assert_stopped_quickly(self, proc, pid, revoke):
        r = revoke()
        t0 = time.monotonic()
        self.assertEqual(r.status, 200, r)
        while alive(pid) and time.monotonic() - t0 < 5:
            time.sleep(0.002)
        gone_after = time.monotonic() - t0
        self.assertLess(gone_after, BOUND_S, f"command still ran {gone_after:.3f} s after the revoke")
        self.assertEqual(proc.wait(10), 3)
        self.assertIn("revoked", proc.stderr.read())

    def test_lock_command_stopped_at_revoke(self):
        name = unique("ctl-rv")
        proc, pid, environ = self.start_held("lock", name, "--ttl", "30000")
        self.assertIn("FENCE_TOKEN", environ)
        self.assert_stopped_quickly(proc, pid, lambda: self.c.post(f"/v1/locks/{name}/revoke", {}))

    def test_sem_command_stopped_at_revoke(self):
        name = unique("ctl-sem")
        proc, pid, environ = self.start_held("sem", name, "--limit", "2", "--ttl", "30000")
        fence = int(environ["FENCE"])
        self.assert_stopped_quickly(proc, pid,
                                    lambda: self.c.post(f"/v1/semaphores/{name}/revoke", {"fence": fence}))

    def test_lock_set(self):
        names = [unique("ctl-set-c"), unique("ctl-set-a"), unique("ctl-set-b")]
        proc, pid, environ = self.start_held("lock", "--set", ",".join(names), "--ttl", "30000", watches=3)
        tokens, fences = environ["FENCE_TOKENS"].split(","), environ["FENCES"].split(",")
        self.assertEqual(len(tokens), 3)
        for name, fence in zip(names, fences):
            status = self.c.get(f"/v1/locks/{name}").body
            self.assertEqual((status["held"], status["fence"]), (True, int(fence)))
        self.assert_stopped_quickly(proc, pid, lambda: self.c.post(f"/v1/locks/{names[1]}/revoke", {}))
        wait_for(lambda: not any(self.c.get(f"/v1/locks/{n}").body["held"] for n in names), timeout=5,
                 what="the other locks of the set to be given back")

    def test_lock_set_runs_and_releases(self):
        names = [unique("ctl-set"), unique("ctl-set")]
        r = self.run_ctl("lock", "--set", ",".join(names), "--", "sh", "-c",
                         'test -n "$FENCE_TOKENS" && test -n "$FENCES" && exit 7')
        self.assertEqual(r.returncode, 7, r.stderr)
        for n in names:
            self.assertFalse(self.c.get(f"/v1/locks/{n}").body["held"])

    def test_watch_and_revoke_commands(self):
        name = unique("ctl-w")
        lease = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000}).body
        r = self.run_ctl("watch", name, "--fence", str(lease["fence"]), "--wait", "100")
        self.assertEqual((r.returncode, r.stdout.startswith("held")), (2, True), r)
        r = self.run_ctl("revoke", name, "--reason", "test")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, f"revoked fence {lease['fence']}"), r)
        r = self.run_ctl("watch", name, "--fence", str(lease["fence"]))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "revoked"), r)
        r = self.run_ctl("revoke", name, "--json")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, '{"revoked_fence":null}'), r)
        for bad in (["watch", name], ["revoke", name, "--fence", "3"], ["revoke", name, "--sem"],
                    ["lock", "--set", "a,a", "--", "true"], ["lock", "x", "--set", "a", "--", "true"],
                    ["lock", "--set", "bad name", "--", "true"]):
            self.assertEqual(self.run_ctl(*bad).returncode, 1, bad)

    def test_renew_and_release_of_a_revoked_lease_name_the_reason(self):
        name = unique("ctl-rr")
        lease = self.c.post(f"/v1/locks/{name}/acquire", {"ttl_ms": 30000}).body
        self.assertEqual(self.run_ctl("revoke", name, "--reason", "stuck in GC").returncode, 0)
        for command in ("renew", "release"):
            r = self.run_ctl(command, name, "--token", lease["token"])
            self.assertEqual(r.returncode, 3, r)
            self.assertIn("revoked by an operator: stuck in GC", r.stderr, r)
            r = self.run_ctl(command, name, "--token", lease["token"], "--json")
            body = json.loads(r.stdout)
            self.assertEqual((body["type"], body["reason"], body["revoke_reason"]),
                             ("/problems/lease_lost", "revoked", "stuck in GC"), body)
        # A lease that merely expired keeps the plain answer: nothing claims a revoke.
        short = self.c.post(f"/v1/locks/{unique('ctl-rx')}/acquire", {"ttl_ms": 100}).body
        time.sleep(0.3)
        r = self.run_ctl("renew", short["lock"], "--token", short["token"], "--json")
        self.assertEqual(r.returncode, 3, r)
        self.assertNotIn("reason", json.loads(r.stdout))

    def test_list_by_prefix(self):
        prefix = unique("ctl-ls") + ":"
        held = {n: self.c.post(f"/v1/locks/{prefix}{n}/acquire", {"ttl_ms": 30000, "owner": f"own-{n}"}).body
                for n in ("a", "b", "c")}
        sem = self.c.post(f"/v1/semaphores/{prefix}pool/acquire", {"limit": 3, "owner": "w1"}).body
        self.c.post(f"/v1/locks/other-{prefix}x/acquire", {})
        r = self.run_ctl("list", prefix)
        self.assertEqual(r.returncode, 0, r)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["KIND", "NAME", "HELD", "FENCE", "OWNER", "EXPIRES", "IN", "WAITING"])
        rows = [line.split() for line in lines[1:]]
        self.assertEqual([row[:4] for row in rows],
                         [["lock", f"{prefix}{n}", "yes", str(held[n]["fence"])] for n in ("a", "b", "c")]
                         + [["semaphore", f"{prefix}pool", "1/3", str(sem["fence"])]])
        self.assertEqual([row[4] for row in rows], ["own-a", "own-b", "own-c", "w1"])
        self.assertNotIn("other-", r.stdout)
        self.assertNotIn(held["a"]["token"], r.stdout)
        # --limit stops after N of each kind, whatever the page size; --sem lists semaphores only.
        r = self.run_ctl("list", prefix, "--limit", "2", "--json")
        listed = json.loads(r.stdout)
        self.assertEqual([i["lock"] for i in listed["locks"]], [f"{prefix}a", f"{prefix}b"])
        self.assertEqual([i["semaphore"] for i in listed["semaphores"]], [f"{prefix}pool"])
        r = self.run_ctl("list", prefix, "--sem", "--json")
        self.assertEqual(set(json.loads(r.stdout)), {"semaphores"})
        r = self.run_ctl("list", unique("ctl-none"))
        self.assertEqual((r.returncode, r.stdout.startswith("nothing held or waited for under")), (0, True), r)
        self.assertEqual(self.run_ctl("list", "bad prefix").returncode, 1)


if __name__ == "__main__":
    unittest.main()
