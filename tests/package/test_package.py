# SPDX-License-Identifier: Apache-2.0
"""The Debian package and the hardened Release build, end to end on this machine:

- a Release build (-DCMAKE_INSTALL_PREFIX=/usr) carries the hardening of dpkg-buildflags: PIE, full RELRO
  with immediate binding, the stack protector and _FORTIFY_SOURCE (checked with readelf on both binaries);
- `cpack -G DEB` makes a package whose Depends names the libraries the binaries link and adduser, whose
  conffiles hold the configuration, and which holds the binaries, the unit, the man pages and the completion;
- `dpkg -i` creates the system user `fencegate`, lets it read the configuration, enables the unit without
  starting it; the installed `fencegate --version`, `fencectl --version` and `fencegate migrate` (against
  the test Postgres) work; the installed binary started with the installed configuration, as the
  `fencegate` user, with the source tree hidden (a tmpfs over it in a private mount namespace), reports
  READY=1 and answers /healthz; then `dpkg --purge` removes every file it installed.

Caught: the Debug test build (no hardening flags) failed the readelf checks; a package without the
postinst (no user, unit not enabled) failed the install test.
Needs root, dpkg and cpack; skipped otherwise. Installs are serialized across checkouts with a lock file.
Environment: FG_BUILD_DIR (a pkg/ build goes below it), FG_TEST_REDIS_URL, FG_TEST_PG_DSN.
"""

import fcntl
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LOCK_FILE = "/run/lock/fencegate-package-test.lock"
LIBRARIES = ("libhiredis", "libpq5", "libmicrohttpd", "libjansson", "libssl", "libc6")
INSTALLED = ("/usr/bin/fencegate", "/usr/bin/fencectl", "/etc/fencegate/fencegate.json",
             "/lib/systemd/system/fencegate.service", "/usr/share/man/man8/fencegate.8.gz",
             "/usr/share/man/man1/fencectl.1.gz", "/usr/share/bash-completion/completions/fencectl")
WANTS = "/etc/systemd/system/multi-user.target.wants/fencegate.service"
SIGNING = "/etc/fencegate/signing.json"


def project_version() -> str:
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(\s*fencegate\s+VERSION\s+([0-9.]+)", f.read()).group(1)


def sh(*argv: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)


def must(*argv: str, timeout: float = 600, **kw) -> str:
    r = sh(*argv, timeout=timeout, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def hardening_problems(binary: str) -> list[str]:
    """What binary lacks of the Release hardening (empty: nothing)."""
    header, dynamic = must("readelf", "-hW", binary), must("readelf", "-dW", binary)
    segments, symbols = must("readelf", "-lW", binary), must("readelf", "--dyn-syms", "-W", binary)
    problems = []
    if not re.search(r"Type:\s+DYN", header) or not re.search(r"FLAGS_1.*\bPIE\b", dynamic):
        problems.append("not PIE")
    if "GNU_RELRO" not in segments:
        problems.append("no RELRO")
    if not re.search(r"\(FLAGS\).*\bBIND_NOW\b", dynamic) or not re.search(r"FLAGS_1.*\bNOW\b", dynamic):
        problems.append("no BIND_NOW (-z now)")
    if "__stack_chk_fail" not in symbols:
        problems.append("no stack protector")
    if not re.search(r"__\w+_chk\b", symbols.replace("__stack_chk_fail", "")):
        problems.append("no _FORTIFY_SOURCE checks")
    return problems


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or not shutil.which("dpkg") or not shutil.which("cpack"):
            raise unittest.SkipTest("needs root, dpkg and cpack")
        cls.build = os.path.join(os.environ["FG_BUILD_DIR"], "pkg")
        cls.version = project_version()
        must("cmake", "-S", ROOT, "-B", cls.build, "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_INSTALL_PREFIX=/usr",
             "-DFG_TESTS=OFF")
        must("cmake", "--build", cls.build, "-j", str(os.cpu_count() or 2), timeout=1200)
        for old in glob.glob(os.path.join(cls.build, "*.deb")):
            os.unlink(old)
        must("cpack", "-G", "DEB", cwd=cls.build)
        debs = glob.glob(os.path.join(cls.build, "*.deb"))
        assert len(debs) == 1, debs
        cls.deb = debs[0]

    def test_release_build_is_hardened(self):
        for name in ("fencegate", "fencectl"):
            self.assertEqual(hardening_problems(os.path.join(self.build, name)), [], name)

    def test_package_metadata(self):
        fields = {f: must("dpkg-deb", "-f", self.deb, f).strip() for f in ("Package", "Version", "Depends")}
        self.assertEqual(fields["Package"], "fencegate")
        self.assertEqual(fields["Version"], self.version)
        depends = [d.strip().split()[0] for d in fields["Depends"].split(",")]
        for lib in LIBRARIES + ("adduser",):
            self.assertTrue(any(d.startswith(lib) for d in depends), (lib, fields["Depends"]))
        control = os.path.join(self.build, "control-check")
        shutil.rmtree(control, ignore_errors=True)
        must("dpkg-deb", "-e", self.deb, control)
        with open(os.path.join(control, "conffiles"), encoding="utf-8") as f:
            self.assertEqual(f.read().split(), ["/etc/fencegate/fencegate.json"])
        for script in ("postinst", "prerm", "postrm"):
            self.assertTrue(os.access(os.path.join(control, script), os.X_OK), script)
        contents = must("dpkg-deb", "-c", self.deb)
        for path in INSTALLED:
            self.assertIn("." + path, contents)
        # the configuration names passwords: never world-readable, not even before postinst runs
        [config] = [line for line in contents.splitlines() if line.endswith("./etc/fencegate/fencegate.json")]
        self.assertTrue(config.startswith("-rw-r----- "), config)

    def test_install_run_and_purge(self):
        with open(LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one dpkg run of this test at a time on the machine
            if sh("dpkg", "-s", "fencegate").returncode == 0:
                must("dpkg", "--purge", "fencegate")
            must("dpkg", "-i", self.deb, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            try:
                self.check_installed()
                self.check_runs()
            finally:
                listed = must("dpkg", "-L", "fencegate").split()
                must("dpkg", "--purge", "fencegate")
            self.assertNotEqual(sh("dpkg", "-s", "fencegate").returncode, 0)
            left = [p for p in listed if (os.path.isfile(p) or os.path.islink(p)) and not os.path.isdir(p)]
            self.assertEqual(left, [])
            self.assertFalse(os.path.lexists(WANTS))
            self.assertFalse(os.path.exists("/etc/fencegate"))

    def check_installed(self):
        for path in INSTALLED:
            self.assertTrue(os.path.isfile(path), path)
        user = must("getent", "passwd", "fencegate").strip().split(":")
        self.assertLess(int(user[2]), 1000, user)  # a system user
        self.assertIn("nologin", user[6])
        group = must("getent", "group", "fencegate").split(":")[2]
        for path in ("/etc/fencegate/fencegate.json", SIGNING):
            st = os.stat(path)
            self.assertEqual((st.st_mode & 0o777, st.st_uid, str(st.st_gid)), (0o640, 0, group), path)
        # the signing key is generated at install, one per machine, and the configuration names it
        with open(SIGNING, encoding="utf-8") as f:
            [key] = json.load(f)
        self.assertEqual(len(key["secret"]), 64)
        with open("/etc/fencegate/fencegate.json", encoding="utf-8") as f:
            self.assertEqual(json.load(f)["secret_file"], SIGNING)
        # Enabled (the wants link), not started (no process runs the installed binary).
        self.assertEqual(os.path.realpath(WANTS), os.path.realpath("/lib/systemd/system/fencegate.service"))
        for exe in glob.glob("/proc/[0-9]*/exe"):
            try:
                self.assertNotEqual(os.readlink(exe), "/usr/bin/fencegate", exe)
            except OSError:
                pass
        self.assertEqual(must("/usr/bin/fencegate", "--version"), f"fencegate {self.version}\n")
        self.assertEqual(must("/usr/bin/fencectl", "--version"), f"fencectl {self.version}\n")

    def as_service(self, argv: list[str]) -> list[str]:
        """argv run as the fencegate user with the source tree hidden under an empty tmpfs."""
        inner = ["setpriv", "--reuid=fencegate", "--regid=fencegate", "--init-groups", "--", *argv]
        if sh("unshare", "-m", "true").returncode != 0:
            return inner  # no mount namespaces here: still runs as the service user from /
        return ["unshare", "-m", "sh", "-c", f'mount -t tmpfs none "$0" && exec "$@"', ROOT, *inner]

    def service_env(self, port: int, notify: str) -> dict[str, str]:
        e = {k: v for k, v in os.environ.items() if not k.startswith("FENCEGATE_")}
        e.update(FENCEGATE_CONFIG="/etc/fencegate/fencegate.json", FENCEGATE_LISTEN=f"127.0.0.1:{port}",
                 FENCEGATE_REDIS_URL=os.environ["FG_TEST_REDIS_URL"],
                 FENCEGATE_PG_DSN=os.environ["FG_TEST_PG_DSN"], NOTIFY_SOCKET=notify)
        return e

    def check_runs(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        notify = "@fencegate-pkg-" + os.urandom(4).hex()
        env = self.service_env(port, notify)
        r = sh(*self.as_service(["/usr/bin/fencegate", "migrate"]), env=env, cwd="/", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as ready:
            ready.bind("\0" + notify[1:])
            ready.settimeout(60)
            proc = subprocess.Popen(self.as_service(["/usr/bin/fencegate"]), env=env, cwd="/",
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            try:
                self.assertIn("READY=1", ready.recv(4096).decode().split("\n"))
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as resp:
                    self.assertEqual(resp.status, 200)
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/openapi.json", timeout=10) as resp:
                    self.assertEqual(json.load(resp)["info"]["version"], self.version)
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, 0, err)
                self.assertNotIn("signing_key_in_database", err)  # signs with signing.json
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()


if __name__ == "__main__":
    sys.exit(unittest.main())
