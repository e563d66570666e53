# SPDX-License-Identifier: Apache-2.0
"""The Python client over HTTPS: it verifies the gateway's certificate against the CA file it is given
(and refuses, without retrying, a certificate it cannot verify), and keeps one TLS connection alive across
calls. Against the gateway's own TLS, and against the test proxy terminating TLS in front of a plain
gateway (to count connections). Certificates are made here with the openssl command, for 127.0.0.1.

Owns: the client's side of HTTPS. Must not: test the gateway's own TLS configuration.
"""

import os
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import FaultProxy, config, unique, wait_ready  # noqa: E402

import fencegate  # noqa: E402
from harness import Gateway  # noqa: E402


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certificates(folder: str) -> tuple:
    """A CA, and a certificate it signed for 127.0.0.1 and localhost; returns (ca, cert, key) paths."""
    ca, ca_key = os.path.join(folder, "ca.pem"), os.path.join(folder, "ca.key")
    cert, key, csr = (os.path.join(folder, n) for n in ("server.pem", "server.key", "server.csr"))
    ext = os.path.join(folder, "ext.cnf")
    with open(ext, "w", encoding="utf-8") as f:
        f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=pyclient test CA",
            "-keyout", ca_key, "-out", ca)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
            "-extfile", ext, "-out", cert)
    return ca, cert, key


class TlsGateway(Gateway):
    """A Gateway serving HTTPS with the given certificate, whose readiness is asked over HTTPS."""

    def __init__(self, ca: str, cert: str, key: str, **kw) -> None:
        self.ca = ca
        super().__init__(env_overrides={"FENCEGATE_TLS_CERT": cert, "FENCEGATE_TLS_KEY": key}, **kw)

    def _wait_ready(self) -> None:
        wait_ready(self, f"https://127.0.0.1:{self.port}", self.ca)


class HttpsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.ca, cert, key = make_certificates(cls.folder.name)
        cls.cert, cls.key = cert, key
        cls.other_ca = os.path.join(cls.folder.name, "other-ca.pem")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=another CA",
                "-keyout", os.path.join(cls.folder.name, "other-ca.key"), "-out", cls.other_ca)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        cls.gw = Gateway(config=config())
        cls.proxy = FaultProxy(cls.gw.port, tls=tls)

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        cls.gw.stop()
        cls.folder.cleanup()

    def test_lease_and_writes_over_https_with_the_ca_file(self):
        """Everything over one verified TLS connection kept alive, the renewals over their own."""
        client = fencegate.Client(self.proxy.url, ca_file=self.ca)
        self.addCleanup(client.close)
        before = self.proxy.connections
        key = unique("tls")
        with client.lock(unique("tls"), ttl_ms=1500, watch=False) as lease:
            lease.pg("invoices").put(key, note="over tls")
            for _ in range(10):
                client.lock_status(lease.name)
                time.sleep(0.05)
            time.sleep(0.6)
            self.assertFalse(lease.lost.is_set(), lease.lost_reason)
        self.assertEqual(client.pg("invoices").get(key)["row"]["note"], "over tls")
        self.assertEqual(self.proxy.connections - before, 2)  # this thread's, and the renewals'

    def test_gateway_serving_https(self):
        """The gateway's own TLS: a lease kept alive over several TTLs (renewals and watch over HTTPS),
        fenced writes and the audit trail."""
        with TlsGateway(self.ca, self.cert, self.key, config=config()) as gw:
            client = fencegate.Client(f"https://127.0.0.1:{gw.port}", ca_file=self.ca)
            self.addCleanup(client.close)
            key = unique("tls")
            with client.lock(unique("tls"), ttl_ms=2000) as lease:
                time.sleep(5.0)
                self.assertFalse(lease.lost.is_set(), lease.lost_reason)
                lease.pg("invoices").put(key, note="gateway tls")
            self.assertEqual(client.pg("invoices").get(key)["row"]["note"], "gateway tls")
            self.assertEqual(list(client.audit.rejections(resource=f"pg:invoices/{key}")), [])
            with self.assertRaises(fencegate.GatewayUnreachable):
                fencegate.Client(f"https://127.0.0.1:{gw.port}", ca_file=self.other_ca).lock_status("x")

    def test_unverifiable_certificate_is_refused_at_once(self):
        """No CA file (the system's CAs), or another CA's: GatewayUnreachable naming TLS, not retried.
        (Caught: retrying it like a refused connection; the call slept through the whole backoff.)
        Counted, not timed: the client must not pause for a retry at all."""
        for client in (fencegate.Client(self.proxy.url), fencegate.Client(self.proxy.url, ca_file=self.other_ca)):
            with mock.patch("fencegate.transport.time.sleep") as backoff:
                with self.assertRaises(fencegate.GatewayUnreachable) as caught:
                    client.lock_status("x")
            self.assertFalse(caught.exception.sent)
            self.assertIn("TLS", str(caught.exception))
            self.assertEqual(backoff.call_count, 0, "a certificate error was retried")
            client.close()


if __name__ == "__main__":
    unittest.main()
