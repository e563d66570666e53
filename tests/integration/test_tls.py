# SPDX-License-Identifier: Apache-2.0
"""HTTPS: a gateway with tls_cert_file/tls_key_file answers curl and Python clients that trust the CA, a
plain HTTP request to its port fails cleanly (no answer, the gateway serves on), a target in absolute form
naming http:// is refused (421), an expired certificate or a key of another certificate is refused at start
with a clear message, SIGHUP swaps the certificate for new sessions, and a broken certificate on SIGHUP
keeps the one in force. The probe listener speaks HTTPS too. Certificates are made here with the openssl command (a throw-away CA in the test's
scratch folder).

Broken variant caught while writing this (tried, then reverted): the expiry check skipped (check_dates
always 0: the expired certificate started, test_expired_or_wrong_certificate_refused failed).

Owns: HTTPS of the gateway (docs/api.md "HTTPS"). Must not: test fencectl (test_fencectl.py).
"""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, HarnessError, free_port, run_fencegate, test_data_dir, wait_for  # noqa: E402

CA_CNF = """[ ca ]
default_ca = CA_default
[ CA_default ]
dir = {dir}
database = {dir}/index.txt
new_certs_dir = {dir}
serial = {dir}/serial
default_md = sha256
policy = policy_any
copy_extensions = copy
[ policy_any ]
commonName = supplied
"""


def openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


class Pki:
    """A CA and server certificates for 127.0.0.1 / localhost, in a fresh folder."""

    def __init__(self) -> None:
        self.dir = os.path.join(test_data_dir(), f"pki-{os.getpid()}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "ca.cnf"), "w") as f:
            f.write(CA_CNF.format(dir=self.dir))
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write("1000\n")
        with open(os.path.join(self.dir, "ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=fencegate-test-ca", "-days", "2",
                cwd=self.dir)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def server(self, name: str, start: str | None = None, end: str | None = None) -> tuple[str, str]:
        """(cert, key) paths of a new server certificate; start/end (YYYYMMDDHHMMSSZ) for odd dates."""
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=self.dir)
        dates = ["-startdate", start, "-enddate", end] if start else ["-days", "2"]
        openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in",
                f"{name}.csr", "-out", f"{name}.pem", "-notext", "-extfile", "ext", *dates, cwd=self.dir)
        return self.path(f"{name}.pem"), self.path(f"{name}.key")


class TlsGateway(Gateway):
    """A Gateway whose readiness and requests go over HTTPS, trusting ca."""

    def __init__(self, ca: str, **kw):
        self.ssl = ssl.create_default_context(cafile=ca)
        super().__init__(**kw)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HarnessError(f"{self.name} exited: {self.log_tail()}")
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise HarnessError(f"{self.name} not ready over HTTPS: {self.log_tail()}")

    def get(self, path: str, host: str = "127.0.0.1") -> tuple[int, dict]:
        """(status, peer certificate) of one HTTPS GET."""
        import http.client
        conn = http.client.HTTPSConnection(host, self.port, context=self.ssl, timeout=10)
        try:
            conn.request("GET", path)
            status = conn.getresponse().status
            return status, conn.sock.getpeercert()
        finally:
            conn.close()


def tls_env(cert: str, key: str) -> dict:
    return {"FENCEGATE_TLS_CERT": cert, "FENCEGATE_TLS_KEY": key}


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.cert, cls.key = cls.pki.server("first")

    def test_https_with_curl_and_plain_http_refused(self):
        with TlsGateway(self.pki.path("ca.pem"), env_overrides=tls_env(self.cert, self.key)) as gw:
            for host in ("127.0.0.1", "localhost"):
                p = subprocess.run(["curl", "-sS", "--cacert", self.pki.path("ca.pem"),
                                    f"https://{host}:{gw.port}/v1/locks/tls-a"],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn('"held":false', p.stdout)
            p = subprocess.run(["curl", "-sS", f"https://127.0.0.1:{gw.port}/healthz"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 60, p)  # unknown CA: curl refuses the certificate
            with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                data = b""
                try:
                    while chunk := s.recv(4096):
                        data += chunk
                except (ConnectionResetError, socket.timeout):
                    pass
            self.assertNotIn(b"HTTP/1.1 200", data)
            self.assertNotIn(b"status", data)
            self.assertEqual(gw.get("/healthz")[0], 200)

    def test_the_probe_listener_speaks_https_too(self):
        """The probe listener (probe_listen) serves what the API's port serves: HTTPS with the same
        certificate; plain HTTP gets no answer."""
        port = free_port()
        env = dict(tls_env(self.cert, self.key), FENCEGATE_PROBE_LISTEN=f"127.0.0.1:{port}")
        with TlsGateway(self.pki.path("ca.pem"), env_overrides=env):
            p = subprocess.run(["curl", "-sS", "--cacert", self.pki.path("ca.pem"),
                                f"https://127.0.0.1:{port}/readyz"], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn('"redis":"up"', p.stdout)
            p = subprocess.run(["curl", "-sS", "-m", "5", f"http://127.0.0.1:{port}/healthz"],
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(p.returncode, 0, p)
            self.assertNotIn("ok", p.stdout)

    def tls_exchange(self, gw, target):
        """Every byte of the answer to GET target over TLS on a connection of its own."""
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
        request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(request.encode())
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
        return data

    def test_a_target_of_the_other_scheme_is_refused(self):
        """RFC 9110 7.4: a target that does not match the connection it came on is misdirected. "http://..."
        sent over TLS answers 421 and the connection closes; "https://..." is served. Failed before the fix:
        the http target was served (200)."""
        with TlsGateway(self.pki.path("ca.pem"), env_overrides=tls_env(self.cert, self.key)) as gw:
            data = self.tls_exchange(gw, f"http://127.0.0.1:{gw.port}/healthz")
            self.assertTrue(data.startswith(b"HTTP/1.1 421 "), data)
            self.assertIn(b"this port serves https", data)
            self.assertIn(b"connection: close", data.lower())
            data = self.tls_exchange(gw, f"https://127.0.0.1:{gw.port}/healthz")
            self.assertTrue(data.startswith(b"HTTP/1.1 200 "), data)

    def test_expired_or_wrong_certificate_refused(self):
        expired, expired_key = self.pki.server("expired", "20200101000000Z", "20200102000000Z")
        future, future_key = self.pki.server("future", "20991231000000Z", "20991231235959Z")
        other_cert, other_key = self.pki.server("other")
        cases = [
            (tls_env(expired, expired_key), "expired on 2020-01-02"),
            (tls_env(future, future_key), "not valid before 2099-12-31"),
            (tls_env(self.cert, other_key), "does not belong to the certificate"),
            (tls_env(self.cert, self.pki.path("missing.key")), "cannot read"),
            (tls_env(self.pki.path("ca.cnf"), self.key), "no PEM certificate"),
            ({"FENCEGATE_TLS_CERT": self.cert}, "go together"),
        ]
        for env, message in cases:
            p = run_fencegate(env_overrides=env)
            self.assertEqual(p.returncode, 2, (env, p))
            self.assertIn(message, p.stderr)

    def test_sighup_swaps_the_certificate(self):
        live_cert, live_key = self.pki.path("live.pem"), self.pki.path("live.key")
        shutil.copy(self.cert, live_cert)
        shutil.copy(self.key, live_key)
        with TlsGateway(self.pki.path("ca.pem"), env_overrides=tls_env(live_cert, live_key)) as gw:
            first_serial = gw.get("/healthz")[1]["serialNumber"]
            second, second_key = self.pki.server("second")
            # The files named at start are replaced, as a certificate renewal does.
            shutil.copy(second, live_cert + ".new")
            os.replace(live_cert + ".new", live_cert)
            shutil.copy(second_key, live_key + ".new")
            os.replace(live_key + ".new", live_key)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: gw.get("/healthz")[1]["serialNumber"] != first_serial, 10,
                     what="new certificate served")
            served = gw.get("/healthz")[1]["serialNumber"]
            # A certificate whose key is not the one named: logged, the certificate in force stays.
            third, _ = self.pki.server("third")
            shutil.copy(third, live_cert)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: "reload_failed" in gw.log_text(), 10, what="reload_failed")
            self.assertEqual(gw.get("/healthz")[1]["serialNumber"], served)


class FencectlTlsTest(unittest.TestCase):
    """fencectl over https with --cacert (or FENCEGATE_CACERT) and an API key from FENCEGATE_KEY."""

    def test_fencectl_https_with_key(self):
        import hashlib
        pki = Pki()
        cert, key = pki.server("ctl")
        ctl = os.environ.get("FG_CTL") or os.path.join(os.path.dirname(os.environ["FG_BIN"]), "fencectl")
        entry = {"id": "ctl", "sha256": hashlib.sha256(b"ctl-key").hexdigest(), "scopes": ["lock:ctl:*"]}
        config = {"auth": {"mode": "required", "keys": [entry]}}
        with TlsGateway(pki.path("ca.pem"), env_overrides=tls_env(cert, key), config=config) as gw:
            base = {k: v for k, v in os.environ.items() if not k.startswith("FENCEGATE_")}
            url = f"https://localhost:{gw.port}"

            def run(*args, **env):
                return subprocess.run([ctl, "--url", url, *args], env=dict(base, **env), capture_output=True,
                                      text=True, timeout=30)
            p = run("status", "ctl:a", "--cacert", pki.path("ca.pem"), FENCEGATE_KEY="ctl-key")
            self.assertEqual(p.returncode, 0, p)
            p = run("status", "ctl:a", FENCEGATE_CACERT=pki.path("ca.pem"), FENCEGATE_KEY="ctl-key")
            self.assertEqual(p.returncode, 0, p)
            p = run("acquire", "ctl:b", "--ttl", "1000", FENCEGATE_CACERT=pki.path("ca.pem"),
                    FENCEGATE_KEY="ctl-key")
            self.assertEqual(p.returncode, 0, p)
            p = run("status", "ctl:a", FENCEGATE_CACERT=pki.path("ca.pem"))
            self.assertEqual(p.returncode, 5, p)  # no key: 401
            self.assertIn("unauthorized", p.stderr + p.stdout)
            p = run("status", "ctl:a", FENCEGATE_KEY="ctl-key")  # the system's CAs do not know ours
            self.assertEqual(p.returncode, 4, p)
            self.assertIn("certificate", p.stderr)
            p = subprocess.run([ctl, "--url", f"http://localhost:{gw.port}", "status", "ctl:a"],
                               env=dict(base, FENCEGATE_KEY="ctl-key"), capture_output=True, text=True, timeout=30)
            self.assertNotEqual(p.returncode, 0, p)


if __name__ == "__main__":
    unittest.main()
