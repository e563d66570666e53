# SPDX-License-Identifier: Apache-2.0
"""Sets up what the conformance scenarios of clients/conformance/ run against, then runs one client's runner.

    python3 tests/conformance/driver.py -- <runner command...>

Owns: two real gateways with auth required (keys of clients/conformance/scenarios.json's "clients"): the
main one, and a "down" one whose private Redis is stopped once it has started, so that it answers 503
backend_unavailable with Retry-After; a fault proxy in front of each (tests/pyclient/pyclient_helpers.py)
that logs what clients send and, on the main one, loses the first reply to an acquire of a name holding
"lostreply", passes the answer to a waiting acquire (wait_ms above 0) of a name holding "lateanswer" on
only after 2 s (its client may have gone meanwhile, after the gateway granted it), and answers renewals of
names holding "norenew" with 503. The runner gets their addresses (the main gateway's own, without the
proxy, in FG_CONF_DIRECT_URL) and keys in FG_CONF_* variables, drives the scenarios through its client's
own API, prints "N passed, N failed" and exits non-zero on a failure; the driver exits with the runner's
status.

Must not: know any client, or check a scenario's outcome itself (the runner does, so that the same file
holds every client to the same behaviour).
"""

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "pyclient"))

from pyclient_helpers import FaultProxy, config  # noqa: E402

from harness import Gateway, free_port, http  # noqa: E402

ADMIN_KEY = "conformance-admin-key-0123456789abcdef"
LIMITED_KEY = "conformance-limited-key-0123456789abcdef"
RUNNER_TIMEOUT_S = 240


def entry(key_id: str, key: str, scopes: list) -> dict:
    return {"id": key_id, "sha256": hashlib.sha256(key.encode()).hexdigest(), "scopes": scopes}


def gateway_config() -> dict:
    keys = [entry("conformance-admin", ADMIN_KEY, ["admin"]),
            entry("conformance-limited", LIMITED_KEY, ["lock:limited:*"])]
    return config(auth={"mode": "required", "keys": keys})


def main_rule(method: str, path: str, body: object, seen: int) -> str:
    """The faults of the main proxy (see the module documentation)."""
    if "lostreply" in path and path.endswith("/acquire") and seen == 0:
        return "drop"
    if path.endswith("/acquire") and isinstance(body, dict) and (body.get("wait_ms") or 0) > 0 and \
            any("lateanswer" in name for name in [path] + list(body.get("names") or [])):
        return "late"
    if "norenew" in path and path.endswith("/renew"):
        return "refuse503"
    return "forward"


class PrivateRedis:
    """A throw-away redis-server on a free port, for the gateway whose backend goes down."""

    def __init__(self) -> None:
        self.port = free_port()
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def wait_unready(gw: Gateway) -> None:
    """Waits until the gateway has noticed that its Redis is gone (/readyz answers 503)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if http("GET", gw.url("/readyz")).status == 503:
            return
        time.sleep(0.1)
    raise RuntimeError("the gateway whose Redis stopped still says it is ready")


def main() -> int:
    if "--" not in sys.argv:
        print(__doc__, file=sys.stderr)
        return 2
    runner = sys.argv[sys.argv.index("--") + 1:]
    redis = PrivateRedis()
    main_gw = Gateway(config=gateway_config())
    down_gw = Gateway(config=gateway_config(), env_overrides={"FENCEGATE_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0"})
    proxies = [FaultProxy(main_gw.port, rule=main_rule), FaultProxy(down_gw.port)]
    try:
        redis.stop()
        wait_unready(down_gw)
        env = dict(os.environ, FG_CONF_URL=proxies[0].url, FG_CONF_DIRECT_URL=main_gw.base,
                   FG_CONF_DOWN_URL=proxies[1].url,
                   FG_CONF_ADMIN_KEY=ADMIN_KEY, FG_CONF_LIMITED_KEY=LIMITED_KEY,
                   FG_CONF_RUN=uuid.uuid4().hex[:8],
                   FG_CONF_SCENARIOS=os.path.join(ROOT, "clients", "conformance", "scenarios.json"))
        return subprocess.run(runner, env=env, stdin=subprocess.DEVNULL, timeout=RUNNER_TIMEOUT_S).returncode
    finally:
        for proxy in proxies:
            proxy.close()
        down_gw.stop(check=False)
        main_gw.stop()
        redis.stop()


if __name__ == "__main__":
    sys.exit(main())
