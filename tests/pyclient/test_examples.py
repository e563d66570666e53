# SPDX-License-Identifier: Apache-2.0
"""The examples written with the Python client, run against a real gateway: the seed-003 stale-holder
story (examples/stale_holder.py) and the invoice worker service (examples/invoice_worker.py), two
instances of it paying the same invoices concurrently.

Owns: keeping the examples working. Must not: test the client's parts one by one (test_leases.py,
test_retries.py).
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import EXAMPLES, child_env, config, unique  # noqa: E402

from harness import Gateway, Redis, free_port, psql, wait_for  # noqa: E402


def post(url: str) -> dict:
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return {"status": answer.status, **json.loads(answer.read())}
    except urllib.error.HTTPError as e:
        return {"status": e.code, **json.loads(e.read())}


class ExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(config=config())

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_stale_holder_story(self):
        key = unique("story")
        out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "stale_holder.py"), key],
                             env=child_env(self.gw.base), capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertRegex(lines[0], rf"^A refused: fence (\d+) < (\d+) stored for pg:invoices/{key}$")
        presented, current = (int(n) for n in lines[0].split()[3:6:2])
        self.assertLess(presented, current)
        self.assertEqual(lines[1], "row: paid by B")
        self.assertEqual(lines[2], f"audit: worker-A {presented} {current} stale_fence")
        self.assertEqual(len(lines), 3, out.stdout)
        self.assertEqual(psql("SELECT status FROM public.invoices WHERE id = :'k'", {"k": key}), ["paid by B"])

    def test_invoice_workers_pay_each_invoice_once(self):
        """Two worker services, 40 concurrent pay requests over 5 invoices: each invoice is paid exactly
        once, by the worker whose answer says so, in Postgres and Redis, and no write was refused."""
        invoices = [unique("inv") for _ in range(5)]
        for key in invoices:
            psql("INSERT INTO public.invoices (id, status) VALUES (:'k', 'open')", {"k": key})
        workers = []
        for name in ("w1", "w2"):
            port = free_port()
            proc = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "invoice_worker.py"),
                                     "--listen", f"127.0.0.1:{port}", "--name", name, "--work-ms", "30"],
                                    env=child_env(self.gw.base), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            self.addCleanup(self._stop, proc)
            workers.append(f"http://127.0.0.1:{port}")
            wait_for(lambda: self._healthy(workers[-1]), timeout=20, what=f"{name} to serve")
        answers: list = []
        rng = random.Random(15)
        jobs = [(rng.choice(workers), rng.choice(invoices)) for _ in range(40)]

        def run(chunk):
            for base, key in chunk:
                answers.append(post(f"{base}/invoices/{key}/pay"))

        threads = [threading.Thread(target=run, args=(jobs[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(len(answers), 40)
        self.assertTrue(all(a["status"] == 200 for a in answers), answers)
        with Redis() as r:
            for key in invoices:
                paid = [a for a in answers if a["id"] == key and a["paid"]]
                if not any(a["id"] == key for a in answers):
                    continue
                self.assertEqual(len(paid), 1, (key, answers))
                row = psql("SELECT status, note FROM public.invoices WHERE id = :'k'", {"k": key})[0]
                self.assertEqual(row, f"paid|paid by {paid[0]['worker']} fence {paid[0]['fence']}")
                self.assertEqual(r.cmd("GET", f"app:invoice:{key}:state"), "paid")
        audit = psql("SELECT count(*) FROM fencegate.rejections WHERE resource = ANY(string_to_array(:'r', ','))",
                     {"r": ",".join(f"pg:invoices/{key}" for key in invoices)})
        self.assertEqual(audit, ["0"])
        self.assertEqual(post(f"{workers[0]}/invoices/{unique('none')}/pay")["status"], 404)

    @staticmethod
    def _healthy(base: str) -> bool:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    unittest.main()
