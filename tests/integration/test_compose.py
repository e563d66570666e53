# SPDX-License-Identifier: Apache-2.0
"""docker-compose.yml: it parses, names the three services (Redis with AOF and noeviction, Postgres, the
gateway built by the Dockerfile) and gives the gateway the environment it reads; the files it mounts exist;
images are pinned to exact versions, passwords come from .env (deploy/compose.env.example names them all)
and the gateway has a healthcheck that asks /readyz on its probe listener (run here against a real gateway,
with bash as in the image). Also checks that the systemd unit (as configured into the build) and `fencegate --help/--version`
name the same settings, and that the unit waits for readiness (Type=notify).

Owns: the deployment files' agreement with the gateway. Must not: run docker (CI has none).
"""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, env, free_port  # noqa: E402

import yaml  # python3-yaml, installed by scripts/deps.sh  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GATEWAY_ENV = ("FENCEGATE_LISTEN", "FENCEGATE_REDIS_URL", "FENCEGATE_PG_DSN")


def compose() -> dict:
    with open(os.path.join(ROOT, "docker-compose.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def environment(service: dict) -> dict:
    """A service's environment, whichever of the two compose spellings it uses."""
    e = service.get("environment", {})
    if isinstance(e, list):
        return dict(item.split("=", 1) for item in e)
    return {k: str(v) for k, v in e.items()}


def command_words(service: dict) -> list[str]:
    c = service.get("command", [])
    return c.split() if isinstance(c, str) else [str(w) for w in c]


class ComposeTest(unittest.TestCase):
    def setUp(self):
        self.doc = compose()
        self.services = self.doc["services"]

    def test_three_services(self):
        self.assertEqual(set(self.services), {"redis", "postgres", "gateway"})

    def test_redis_keeps_lock_keys(self):
        words = command_words(self.services["redis"])
        self.assertIn("noeviction", words)
        self.assertEqual(words[words.index("--maxmemory-policy") + 1], "noeviction")
        self.assertEqual(words[words.index("--appendonly") + 1], "yes")
        self.assertTrue(self.services["redis"]["image"].startswith("redis:"))

    def test_postgres(self):
        pg = self.services["postgres"]
        self.assertTrue(pg["image"].startswith("postgres:"))
        self.assertEqual(environment(pg).get("POSTGRES_DB"), "fencegate")

    def test_gateway_is_built_and_configured(self):
        gw = self.services["gateway"]
        build = gw["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        self.assertTrue(os.path.isfile(os.path.join(ROOT, context, "Dockerfile")))
        e = environment(gw)
        for name in GATEWAY_ENV:
            self.assertTrue(e.get(name), f"gateway lacks {name}")
        self.assertIn("redis:6379", e["FENCEGATE_REDIS_URL"])
        self.assertIn("@postgres:5432/", e["FENCEGATE_PG_DSN"])
        self.assertRegex(e["FENCEGATE_LISTEN"], r"^0\.0\.0\.0:\d+$")
        port = e["FENCEGATE_LISTEN"].rsplit(":", 1)[1]
        self.assertTrue(any(str(p).endswith(f":{port}") for p in gw.get("ports", [])), gw.get("ports"))
        self.assertEqual(set(gw.get("depends_on", {})), {"redis", "postgres"})

    def test_images_are_pinned(self):
        for name in ("redis", "postgres"):
            self.assertRegex(self.services[name]["image"], r"^[a-z]+:\d+\.\d+[.-]", name)

    def test_passwords_come_from_the_env_file(self):
        with open(os.path.join(ROOT, "deploy", "compose.env.example"), encoding="utf-8") as f:
            example = dict(line.split("=", 1) for line in f.read().splitlines()
                           if line and not line.startswith("#"))
        with open(os.path.join(ROOT, "docker-compose.yml"), encoding="utf-8") as f:
            used = set(re.findall(r"\$\{([A-Z_]+)(?![A-Z_]|:-)", f.read()))  # those without a default
        self.assertEqual(used, set(example))
        self.assertEqual(environment(self.services["postgres"])["POSTGRES_PASSWORD"][:2], "${")
        self.assertIn(":${POSTGRES_PASSWORD}@", environment(self.services["gateway"])["FENCEGATE_PG_DSN"])
        self.assertIn(":${REDIS_PASSWORD}@", environment(self.services["gateway"])["FENCEGATE_REDIS_URL"])
        with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
            self.assertIn(".env", f.read().split())
        with open(os.path.join(ROOT, ".dockerignore"), encoding="utf-8") as f:
            self.assertIn(".env", f.read().split())

    def test_gateway_healthcheck_asks_readyz(self):
        """On the probe listener (inside the container only), which answers while every HTTP thread waits for
        a stalled backend."""
        gw_env = environment(self.services["gateway"])
        probe_host, probe_port = gw_env["FENCEGATE_PROBE_LISTEN"].rsplit(":", 1)
        self.assertEqual(probe_host, "127.0.0.1")
        self.assertNotIn(probe_port, " ".join(str(p) for p in self.services["gateway"].get("ports", [])))
        check = self.services["gateway"]["healthcheck"]["test"]
        self.assertEqual(check[:3], ["CMD", "bash", "-c"])
        self.assertIn(f"/dev/tcp/127.0.0.1/{probe_port} ", check[3])
        script = check[3].replace(probe_port, "{port}")
        self.assertIn("/readyz", script)
        port = free_port()
        with Gateway(env_overrides={"FENCEGATE_PROBE_LISTEN": f"127.0.0.1:{port}"}):
            r = subprocess.run(["bash", "-c", script.format(port=port)], capture_output=True, timeout=10)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run(["bash", "-c", script.format(port=port)], capture_output=True, timeout=10)
        self.assertNotEqual(r.returncode, 0)

    def test_auth_required_with_keys_from_a_mounted_file(self):
        """The gateway listens beyond loopback: auth is required and its keys come from a compose secret
        (a file outside the image), never from the Dockerfile."""
        gw = self.services["gateway"]
        e = environment(gw)
        self.assertEqual(e.get("FENCEGATE_AUTH_MODE"), "required")
        self.assertEqual(e.get("FENCEGATE_AUTH_KEYS_FILE"), "/run/secrets/fencegate_keys")
        self.assertIn("fencegate_keys", gw.get("secrets", []))
        self.assertIn("deploy/keys.json", self.doc["secrets"]["fencegate_keys"]["file"])
        with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as f:
            dockerfile = f.read()
        for baked in ("FENCEGATE_SECRET=", "FENCEGATE_AUTH_KEYS_FILE=", "keys.json", "sha256"):
            self.assertNotIn(baked, "\n".join(line for line in dockerfile.splitlines()
                                              if not line.startswith("#")))
        with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
            self.assertIn("deploy/keys.json", f.read().split())

    def test_tokens_signed_with_a_key_from_a_secret(self):
        """The signing key comes from a compose secret (deploy/signing.json, git-ignored), never from the
        database: whoever reads Postgres must not be able to sign tokens. Every compose file."""
        for name in ("docker-compose.yml", "docker-compose.ha.yml", "docker-compose.cluster.yml"):
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                doc = yaml.safe_load(f)
            gateways = [s for s in doc["services"].values() if "FENCEGATE_CONFIG" in environment(s)]
            self.assertTrue(gateways, name)
            for gw in gateways:
                self.assertEqual(environment(gw).get("FENCEGATE_SECRET_FILE"), "/run/secrets/fencegate_signing")
                self.assertIn("fencegate_signing", gw.get("secrets", []))
            self.assertIn("deploy/signing.json", doc["secrets"]["fencegate_signing"]["file"])
        with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
            self.assertIn("deploy/signing.json", f.read().split())

    def test_cluster_gateway(self):
        """docker-compose.cluster.yml: six cluster nodes (as the lab: node timeout 1 s, noeviction, a password),
        and the gateway on a redis-cluster:// URL whose seeds are three of them, started once the cluster is
        formed and Postgres is healthy, asking /readyz as the single-Redis stack does."""
        with open(os.path.join(ROOT, "docker-compose.cluster.yml"), encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        nodes = {n for n, s in doc["services"].items() if "--cluster-enabled yes" in " ".join(command_words(s))}
        self.assertEqual(len(nodes), 6)
        for n in nodes:
            words = " ".join(command_words(doc["services"][n]))
            for flag in ("--cluster-node-timeout 1000", "--maxmemory-policy noeviction", "--requirepass",
                         "--masterauth"):
                self.assertIn(flag, words, n)
        gw = doc["services"]["gateway"]
        url = environment(gw)["FENCEGATE_REDIS_URL"]
        self.assertTrue(url.startswith("redis-cluster://:${REDIS_PASSWORD}@"), url)
        seeds = {h.split(":")[0] for h in url.split("@", 1)[1].split(",")}
        self.assertEqual(len(seeds), 3)
        self.assertLessEqual(seeds, nodes)
        self.assertEqual(gw["depends_on"]["cluster-init"]["condition"], "service_completed_successfully")
        self.assertEqual(gw["depends_on"]["postgres"]["condition"], "service_healthy")
        self.assertEqual(gw["healthcheck"], self.services["gateway"]["healthcheck"])

    def test_mounted_files_exist(self):
        for name, service in self.services.items():
            for volume in service.get("volumes", []):
                source = str(volume).split(":", 1)[0]
                if source.startswith("."):
                    self.assertTrue(os.path.exists(os.path.join(ROOT, source)), f"{name} mounts missing {source}")
                else:
                    self.assertIn(source, self.doc.get("volumes", {}), f"{name}: undeclared volume {source}")


class SettingsTest(unittest.TestCase):
    """The gateway's own help and the systemd unit name the settings compose sets."""

    def test_help_and_version(self):
        r = subprocess.run([env("FG_BIN"), "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in GATEWAY_ENV + ("FENCEGATE_CONFIG", "FENCEGATE_SECRET"):
            self.assertIn(name, r.stdout)
        r = subprocess.run([env("FG_BIN"), "--version"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^fencegate \d+\.\d+\.\d+\n$")
        r = subprocess.run([env("FG_BIN"), "--bogus"], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)

    def test_systemd_unit(self):
        # The unit as CMake configured it from deploy/fencegate.service.in, beside the binary.
        with open(os.path.join(os.path.dirname(env("FG_BIN")), "fencegate.service"), encoding="utf-8") as f:
            unit = f.read()
        self.assertRegex(unit, r"(?m)^ExecStart=/\S*/bin/fencegate$")
        self.assertRegex(unit, r"(?m)^KillSignal=SIGTERM$")
        self.assertRegex(unit, r"(?m)^Type=notify$")
        self.assertRegex(unit, r"(?m)^Environment=FENCEGATE_CONFIG=/\S+/fencegate/fencegate.json$")
        self.assertNotRegex(unit, r"@[A-Z_]+@")  # every CMake variable was filled in
        for name in GATEWAY_ENV:
            self.assertIn(name, unit)  # in the comment on what the env file may set
        self.assertIsNotNone(re.search(r"(?m)^\[Install\]$", unit))


if __name__ == "__main__":
    unittest.main()
