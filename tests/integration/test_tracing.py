# SPDX-License-Identifier: Apache-2.0
"""W3C Trace Context (docs/api.md, "Tracing"): the trace id of a request's `traceparent` header is on its
request log line, on the audit record of a write it had refused (Postgres and Redis writes alike, the
latter through the audit stream), and in the application_name of the Postgres session that ran its
statements (`fencegate/<trace id>`); an invalid header is ignored everywhere.

Broken variants this caught when tried: the Redis write scripts without the trace id in their audit
entry (the record's trace_id was null), and a session named once per connection (the second trace's
statements ran under the first trace's name).

Owns: where the trace id goes. Must not: test the refusals themselves (the write tests do).
"""

import json
import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, psql, same_slot, wait_for  # noqa: E402
from pg_helpers import acquire, config, headers, rejections, tokens, write  # noqa: E402


def new_trace() -> tuple[str, str]:
    """(traceparent header, its trace id)."""
    trace = uuid.uuid4().hex
    return f"00-{trace}-{uuid.uuid4().hex[:16]}-01", trace


# A table whose rows keep the application_name of the session that inserted them.
PROBE_SQL = """
CREATE TABLE IF NOT EXISTS public.trace_probe (
    id   text PRIMARY KEY,
    note text,
    app  text DEFAULT current_setting('application_name')
);
"""


class TracingTest(GatewayTest):
    gateway_config = {**config(trace_probe={"key": "id", "columns": ["note"]}), "redis_prefixes": ["app:"]}

    @classmethod
    def setUpClass(cls) -> None:
        psql(PROBE_SQL)
        super().setUpClass()

    def log_lines(self, request_id: str) -> list[dict]:
        lines = [json.loads(line) for line in self.gw.log_text().splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("request_id") == request_id and line.get("event") == "request"]

    def test_refused_writes_carry_the_trace_id(self):
        lock, key = f"tr-{uuid.uuid4().hex[:8]}", f"tr-{uuid.uuid4().hex[:10]}"
        (old, _), (new, _) = tokens(self.c, lock, 2)
        self.assertEqual(write(self.c, "PUT", "invoices", key, {"row": {"note": "new"}}, new).status, 200)
        traceparent, trace = new_trace()
        h = {**headers(old), "traceparent": traceparent, "X-Request-Id": f"req-{trace[:12]}"}
        r = self.c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "late"}}, h)
        self.assertEqual(r.status, 409, r)
        self.assertEqual([line["trace_id"] for line in self.log_lines(f"req-{trace[:12]}")], [trace])
        self.assertEqual([row["trace_id"] for row in rejections(f"pg:invoices/{key}")], [trace])
        # The same through Redis: the record comes from the audit stream.
        rkey = same_slot("app:tr", like=lock)[0]  # on a Redis Cluster no write floor there is above lock's fences
        self.assertEqual(self.c.request("PUT", f"/v1/redis/{rkey}", {"value": "v"}, headers(new)).status, 200)
        traceparent, trace = new_trace()
        r = self.c.request("PUT", f"/v1/redis/{rkey}", {"value": "late"}, {**headers(old), "traceparent": traceparent})
        self.assertEqual(r.status, 409, r)
        wait_for(lambda: rejections(f"redis:{rkey}"), timeout=10, what="the Redis refusal's audit record")
        self.assertEqual([row["trace_id"] for row in rejections(f"redis:{rkey}")], [trace])
        audit = self.c.get(f"/v1/audit/rejections?resource=redis:{rkey}").body
        self.assertEqual([item["trace_id"] for item in audit["items"]], [trace])

    def test_invalid_headers_are_ignored(self):
        lock, key = f"tr-{uuid.uuid4().hex[:8]}", f"tr-{uuid.uuid4().hex[:10]}"
        (old, _), (new, _) = tokens(self.c, lock, 2)
        self.assertEqual(write(self.c, "PUT", "invoices", key, {"row": {"note": "new"}}, new).status, 200)
        bad = f"00-{uuid.uuid4().hex.upper()}-{uuid.uuid4().hex[:16]}-01"
        rid = f"req-{uuid.uuid4().hex[:12]}"
        r = self.c.request("PATCH", f"/v1/pg/invoices/{key}", {"set": {"note": "late"}},
                           {**headers(old), "traceparent": bad, "X-Request-Id": rid})
        self.assertEqual(r.status, 409, r)
        self.assertNotIn("trace_id", self.log_lines(rid)[0])
        self.assertEqual([row["trace_id"] for row in rejections(f"pg:invoices/{key}")], [None])

    def test_postgres_sessions_are_named_after_the_trace(self):
        token, _ = acquire(self.c, f"tr-{uuid.uuid4().hex[:8]}")
        runs = []
        for traced in (True, True, False):
            key, (traceparent, trace) = f"tr-{uuid.uuid4().hex[:10]}", new_trace()
            h = {**headers(token), **({"traceparent": traceparent} if traced else {})}
            r = self.c.request("PUT", f"/v1/pg/trace_probe/{key}", {"row": {"note": "n"}}, h)
            self.assertEqual(r.status, 200, r)
            runs.append((key, f"fencegate/{trace}" if traced else "fencegate"))
        for key, name in runs:
            self.assertEqual(psql("SELECT app FROM public.trace_probe WHERE id = :'k'", {"k": key}), [name])

if __name__ == "__main__":
    unittest.main()
