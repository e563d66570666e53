# SPDX-License-Identifier: Apache-2.0
"""The stale-holder story with the Python client: A's lease runs out while it stalls, B takes over and
writes, A's late write is refused by the gateway and audited. Needs a gateway with `invoices` writable
(examples/fencegate.json): FENCEGATE_URL=http://127.0.0.1:8480 python3 examples/stale_holder.py [key]
"""
import sys
import time
import uuid

import fencegate

gw, key = fencegate.Client(), sys.argv[1] if len(sys.argv) > 1 else uuid.uuid4().hex[:8]
a = gw.lock(f"invoice:{key}", ttl_ms=300, renew=False, owner="worker-A").acquire()  # A stalls: nothing renews
time.sleep(0.4)                                                                     # A's 300 ms lease runs out
with gw.lock(f"invoice:{key}", wait_ms=5000, owner="worker-B") as b:                 # B takes over, higher fence
    b.pg("invoices").put(key, customer="acme", status="paid by B")
try:
    a.pg("invoices").patch(key, status="paid by A")                                  # A wakes up and writes
except fencegate.StaleFence as e:
    print(f"A refused: fence {e.presented_fence} < {e.current_fence} stored for {e.resource}")
print("row:", gw.pg("invoices").get(key)["row"]["status"])
for r in gw.audit.rejections(resource=f"pg:invoices/{key}"):
    print("audit:", r["owner"], r["presented_fence"], r["current_fence"], r["reason"])
