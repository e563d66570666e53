# SPDX-License-Identifier: Apache-2.0
"""A small invoice worker service built on the fencegate Python client, end to end.

    POST /invoices/<id>/pay   takes the lock invoice:<id> (waiting up to --wait-ms), reads the row, and
                              if it is still unpaid "charges" it (--work-ms of work) and marks it paid:
                              the row in Postgres and app:invoice:<id>:state in Redis, both fenced writes
                              under the lease. Answers {"id", "paid": true|false, "fence", "worker"};
                              "paid": false when another request had paid it already.
    GET  /healthz             200 while the service runs.

Any number of workers may run side by side: the lock makes each payment happen once, and the fence makes
a worker that stalled past its lease unable to overwrite a newer payment. A worker whose lease is lost
while it works answers 503 and writes nothing.

    FENCEGATE_URL=http://127.0.0.1:8480 python3 examples/invoice_worker.py --listen 127.0.0.1:8500 --name w1
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Tuple

import fencegate

PAY = re.compile(r"^/invoices/([A-Za-z0-9_.-]{1,100})/pay$")


class Worker:
    """Pays invoices through the gateway; one shared client for all request threads."""

    def __init__(self, client: fencegate.Client, name: str, wait_ms: int, work_ms: int) -> None:
        self.client = client
        self.name = name
        self.wait_ms = wait_ms
        self.work_s = work_ms / 1000.0

    def pay(self, invoice: str) -> Tuple[int, Dict[str, Any]]:
        """Pays one invoice; returns the HTTP status and body of the answer."""
        try:
            with self.client.lock(f"invoice:{invoice}", ttl_ms=5000, wait_ms=self.wait_ms, owner=self.name) as lease:
                row = self.client.pg("invoices").get(invoice)["row"]
                if row["status"] == "paid":
                    return 200, {"id": invoice, "paid": False, "fence": lease.fence, "worker": self.name}
                if lease.lost.wait(self.work_s):  # the "charge": stop at once if the lease goes
                    raise fencegate.LeaseLost(None, "lease_lost", detail="lost while charging")
                lease.pg("invoices").patch(invoice, status="paid", note=f"paid by {self.name} fence {lease.fence}")
                lease.redis.put(f"app:invoice:{invoice}:state", "paid")
                return 200, {"id": invoice, "paid": True, "fence": lease.fence, "worker": self.name}
        except fencegate.NotFound:
            return 404, {"error": f"no invoice {invoice}"}
        except (fencegate.LockBusy, fencegate.LeaseLost, fencegate.StaleFence, fencegate.GatewayUnreachable,
                fencegate.BackendUnavailable) as e:
            return 503, {"error": str(e)}


def handler_for(worker: Worker) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/healthz":
                self._answer(200, {"ok": True})
            else:
                self._answer(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            match = PAY.match(self.path)
            if match:
                self._answer(*worker.pay(match.group(1)))
            else:
                self._answer(404, {"error": "not found"})

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description="Invoice worker service on fencegate.")
    parser.add_argument("--listen", default="127.0.0.1:8500", help="host:port to serve (default %(default)s)")
    parser.add_argument("--name", default="worker", help="owner name shown in lock status and audit records")
    parser.add_argument("--wait-ms", type=int, default=10000, help="longest wait for an invoice's lock")
    parser.add_argument("--work-ms", type=int, default=50, help="how long the simulated charge takes")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    worker = Worker(fencegate.Client(owner=args.name), args.name, args.wait_ms, args.work_ms)
    server = ThreadingHTTPServer((host, int(port)), handler_for(worker))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"{args.name} serving on {args.listen}", flush=True)
    server.serve_forever()
    worker.client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
