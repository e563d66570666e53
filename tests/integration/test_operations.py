# SPDX-License-Identifier: Apache-2.0
"""What an operator sees of a running gateway, beyond the request semantics: the readiness and stopping
notices of the sd_notify protocol (Type=notify units), start-up failures as JSON lines, probes kept off
the request log at the default level, the problem code on each refused request's line, stale_write events
for Postgres writes as for Redis ones, and the process_* and fencegate_backend_up metrics.

Owns: those operator-facing outputs. Must not: test the behaviour behind the calls (other files do), or
the lease and write metrics (test_metrics.py does).
"""

import json
import os
import socket
import subprocess
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, env, free_port, run_fencegate, same_slot, test_data_dir  # noqa: E402

INVOICES = {"tables": {"invoices": {"key": "id", "columns": ["customer", "amount_cents", "status", "note"]}},
            "redis_prefixes": ["ops:"]}


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def request_lines(gw: Gateway) -> list[dict]:
    return [line for line in json_lines(gw.log_text()) if line.get("event") == "request"]


class NotifyTest(unittest.TestCase):
    """READY=1 once the gateway serves, STOPPING=1 when SIGTERM starts the drain; both the path and the
    abstract-namespace forms of NOTIFY_SOCKET. Caught: a gateway that sends no READY=1 (the wait for it timed
    out, as systemd's start-up would)."""

    def run_with(self, address: str, bind_to) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(bind_to)
        sock.settimeout(30)
        gw = Gateway(env_overrides={"NOTIFY_SOCKET": address}, start=False)
        port = free_port()
        proc = subprocess.Popen([env("FG_BIN")], env=gw._environment(port), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            ready = sock.recv(4096).decode()
            # Ready means serving: the very next request is answered.
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
                self.assertIn(b" 200 ", c.recv(4096).split(b"\r\n")[0] + b" ")
            self.assertIn("READY=1", ready.split("\n"))
            proc.terminate()
            stopping = sock.recv(4096).decode()
            self.assertIn("STOPPING=1", stopping.split("\n"))
            _, err = proc.communicate(timeout=20)
            self.assertEqual(proc.returncode, 0, err)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sock.close()

    def test_path_socket(self):
        path = os.path.join(test_data_dir(), f"notify-{uuid.uuid4().hex[:8]}.sock")
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        self.run_with(path, path)

    def test_abstract_socket(self):
        name = f"fencegate-test-{uuid.uuid4().hex[:8]}"
        self.run_with("@" + name, "\0" + name)


class StartupFailureTest(unittest.TestCase):
    def test_configuration_error_is_one_json_line(self):
        r = run_fencegate(config={"tables": {"no_such_table_here": {"key": "id", "columns": ["x"]}},
                                  "bogus_key": 1})
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertIsInstance(json.loads(line), dict, line)
        failed = [line for line in json_lines(r.stderr) if line["event"] == "startup_failed"]
        self.assertEqual(len(failed), 1, r.stderr)
        self.assertEqual((failed[0]["level"], failed[0]["code"]), ("error", "config"))
        self.assertIn("bogus_key", failed[0]["detail"])

    def test_a_taken_port_is_one_json_line(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            r = run_fencegate(env_overrides={"FENCEGATE_LISTEN": f"127.0.0.1:{port}"})
        self.assertNotEqual(r.returncode, 0, r.stderr)
        for line in r.stderr.splitlines():
            self.assertIsInstance(json.loads(line), dict, line)
        failed = [line for line in json_lines(r.stderr) if line["event"] == "startup_failed"]
        self.assertEqual(len(failed), 1, r.stderr)
        self.assertIn(str(port), failed[0]["detail"])


class RequestLogTest(unittest.TestCase):
    def test_probes_are_off_the_log_by_default_and_on_at_debug(self):
        """Caught: logging every route at info (the harness's own /readyz polls showed up)."""
        for level, logged in (("info", False), ("debug", True)):
            with Gateway(env_overrides={"FENCEGATE_LOG_LEVEL": level}) as gw:
                for path in ("/healthz", "/readyz", "/metrics"):
                    self.assertEqual(gw.http("GET", path).status, 200)
                self.assertEqual(gw.http("GET", "/v1/locks/ops-probe").status, 200)
                lines = request_lines(gw)
            routes = {line["route"] for line in lines}
            self.assertIn("lock_status", routes)
            for probe in ("healthz", "readyz", "metrics"):
                self.assertEqual(probe in routes, logged, (level, probe, routes))

    def test_refusals_name_their_problem_and_stale_writes_are_events(self):
        # One slot on a cluster: old's fence below new's, and the Redis key meets no floor they are below.
        redis_key, lock, new_lock = same_slot("ops:ops", "ops-lock", "ops-lock-2")
        key = redis_key.removeprefix("ops:")
        with Gateway(config=INVOICES) as gw:
            old = gw.http("POST", f"/v1/locks/{lock}/acquire", {"ttl_ms": 60000}).body["token"]
            self.assertEqual(gw.http("POST", f"/v1/locks/{lock}/acquire", {}).status, 409)
            new = gw.http("POST", f"/v1/locks/{new_lock}/acquire", {"ttl_ms": 60000}).body["token"]
            self.assertEqual(gw.http("GET", "/v1/nothing-here").status, 404)
            path = f"/v1/pg/invoices/{key}"
            self.assertEqual(gw.http("PUT", path, {"row": {"note": "new"}}, headers={"Fence-Token": new}).status,
                             200)
            self.assertEqual(gw.http("PATCH", path, {"set": {"note": "old"}},
                                     headers={"Fence-Token": old}).status, 409)
            batch = {"ops": [{"op": "patch", "table": "invoices", "key": key, "set": {"note": "older"}}]}
            self.assertEqual(gw.http("POST", "/v1/pg/batch", batch, headers={"Fence-Token": old}).status, 409)
            rkey = f"/v1/redis/ops:{key}"
            self.assertEqual(gw.http("PUT", rkey, {"value": "n"}, headers={"Fence-Token": new}).status, 200)
            self.assertEqual(gw.http("PUT", rkey, {"value": "o"}, headers={"Fence-Token": old}).status, 409)
            lines = json_lines(gw.log_text())
        requests = [line for line in lines if line.get("event") == "request"]
        problems = {(line["route"], line["status"], line.get("problem")) for line in requests}
        self.assertIn(("lock_acquire", 409, "lock_busy"), problems)
        self.assertIn(("none", 404, "not_found"), problems)
        self.assertIn(("pg_patch", 409, "stale_fence"), problems)
        for line in requests:
            self.assertEqual("problem" in line, line["status"] >= 400, line)
            self.assertTrue(line["request_id"], line)
        stale = [line for line in lines if line.get("event") == "stale_write"]
        got = sorted((line["resource"], line["method"]) for line in stale)
        self.assertEqual(got, sorted([(f"pg:invoices/{key}", "PATCH"), (f"pg:invoices/{key}", "POST"),
                                      (f"redis:ops:{key}", "PUT")]), stale)
        for line in stale:
            self.assertEqual(line["level"], "warn")
            self.assertLess(line["presented_fence"], line["current_fence"])
            self.assertEqual(line["client"], "127.0.0.1")


class ProcessMetricsTest(unittest.TestCase):
    def test_process_and_backend_metrics(self):
        with Gateway() as gw:
            text = gw.http("GET", "/metrics").body
            pid = gw.proc.pid
            values = {}
            for line in text.splitlines():
                if line and not line.startswith("#"):
                    name, _, value = line.rpartition(" ")
                    values[name] = float(value)
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        self.assertEqual(values['fencegate_backend_up{backend="redis"}'], 1)
        self.assertEqual(values['fencegate_backend_up{backend="postgres"}'], 1)
        self.assertGreater(values["process_resident_memory_bytes"], 1 << 20)
        self.assertGreaterEqual(values["process_virtual_memory_bytes"], values["process_resident_memory_bytes"])
        self.assertGreater(values["process_cpu_seconds_total"], 0)
        self.assertLessEqual(abs(values["process_open_fds"] - fds), 5, (values["process_open_fds"], fds))
        self.assertGreater(values["process_max_fds"], values["process_open_fds"])
        self.assertLess(abs(values["process_start_time_seconds"] - time.time()), 120)


if __name__ == "__main__":
    unittest.main()
