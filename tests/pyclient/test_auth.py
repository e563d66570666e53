# SPDX-License-Identifier: Apache-2.0
"""The Python client against a gateway that requires API keys: the bearer key goes with every call,
the background renewals and watches included; a missing or unknown key raises Unauthorized, a key
without the scope raises Forbidden naming it.

Owns: the client's side of authentication. Must not: test the gateway's scope matching (the gateway's
own auth tests do).
"""

import hashlib
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import config, unique  # noqa: E402

import fencegate  # noqa: E402
from harness import Gateway, psql  # noqa: E402

BILLING_KEY = "pyclient-billing-key-0123456789abcdef"
READER_KEY = "pyclient-reader-key-0123456789abcdef"


def entry(key_id: str, key: str, scopes: list) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(key.encode()).hexdigest(), "scopes": scopes}


class AuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        keys = [entry("billing", BILLING_KEY, ["lock:pyauth:*", "pg:invoices:read", "pg:invoices:write",
                                               "redis:app:*:write", "audit:read"]),
                entry("reader", READER_KEY, ["pg:invoices:read", "lock:pyauth:*"])]
        cls.gw = Gateway(config=config(auth={"mode": "required", "keys": keys}))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def client(self, key=None) -> fencegate.Client:
        client = fencegate.Client(self.gw.base, api_key=key or "")
        self.addCleanup(client.close)
        return client

    def test_key_goes_with_every_call_renewals_included(self):
        """A 2 s lease held for 5 s under auth: the renewals (their own threads and connections)
        carry the key too. (Caught: renewals sent without the Authorization header; the lease was lost
        with reason "unauthorized".)"""
        billing = self.client(BILLING_KEY)
        key = unique("auth")
        with billing.lock(f"pyauth:{key}", ttl_ms=2000) as lease:
            time.sleep(5.0)
            self.assertFalse(lease.lost.is_set(), lease.lost_reason)
            lease.pg("invoices").put(key, status="open")
            lease.redis.put(f"app:{key}", "v")
        self.assertEqual(billing.pg("invoices").get(key)["row"]["status"], "open")
        self.assertEqual(list(billing.audit.rejections(resource=f"pg:invoices/{key}")), [])

    def test_key_from_the_environment(self):
        """Without api_key, the client takes $FENCEGATE_KEY, as fencectl does."""
        os.environ["FENCEGATE_KEY"] = BILLING_KEY
        try:
            client = fencegate.Client(self.gw.base)
        finally:
            del os.environ["FENCEGATE_KEY"]
        self.addCleanup(client.close)
        with client.lock(f"pyauth:{unique()}") as lease:
            self.assertFalse(lease.lost.is_set())

    def test_missing_or_unknown_key_is_unauthorized(self):
        for client in (self.client(), self.client("not-a-key-of-this-gateway")):
            with self.assertRaises(fencegate.Unauthorized) as caught:
                client.lock(f"pyauth:{unique()}").acquire()
            self.assertEqual(caught.exception.status, 401)
            with self.assertRaises(fencegate.Unauthorized):
                client.pg("invoices").get("x")
        self.assertTrue(self.client().ready())

    def test_key_without_scope_is_forbidden(self):
        billing, reader = self.client(BILLING_KEY), self.client(READER_KEY)
        with self.assertRaises(fencegate.Forbidden) as caught:
            billing.lock("other:1").acquire()
        self.assertEqual(caught.exception.scope, "lock:other:1")
        key = unique("auth")
        psql("INSERT INTO public.invoices (id, note) VALUES (:'k', 'before')", {"k": key})
        with reader.lock(f"pyauth:{key}") as lease:
            with self.assertRaises(fencegate.Forbidden) as caught:
                lease.pg("invoices").patch(key, note="reader")
            self.assertEqual(caught.exception.scope, "pg:invoices:write")
            self.assertFalse(lease.lost.is_set())
        self.assertEqual(reader.pg("invoices").get(key)["row"]["note"], "before")
        with self.assertRaises(fencegate.Forbidden):
            list(reader.audit.rejections())


if __name__ == "__main__":
    unittest.main()
