# SPDX-License-Identifier: Apache-2.0
"""A new Postgres connection is given `pg_connect_timeout_ms` to open (libpq's connect_timeout), 2 s unless set.

A listener that takes the TCP connection and never answers libpq's startup packet stands for a Postgres host
that hangs: the gateway, started against it, warns "waiting for postgres ... timeout expired" once its first
connection attempt gave up. The time from the start to that warning is the setting's, less up to a second:
libpq counts whole seconds from the current one.

Owns: pg_connect_timeout_ms reaching libpq. Must not: test the setting's validation (tests/unit/test_config.c).
"""

import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, env  # noqa: E402


def first_wait(config: dict, port: int) -> float:
    """Seconds from the start of a gateway with config, whose Postgres is 127.0.0.1:port, to its first warning
    that it waits for Postgres because a connection attempt timed out; the gateway is killed then."""
    dsn = f"postgresql://fencegate@127.0.0.1:{port}/fencegate"
    gw = Gateway(config=config, env_overrides={"FENCEGATE_PG_DSN": dsn}, start=False)
    with open(gw.config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    started = time.monotonic()
    proc = subprocess.Popen([env("FG_BIN")], env=gw._environment(0), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if "waiting for postgres" in line:
                if "timeout expired" not in line:
                    raise AssertionError(f"not a timeout: {line}")
                return time.monotonic() - started
        raise AssertionError(f"the gateway exited ({proc.wait()}) without waiting for postgres")
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


class PgConnectTimeoutTest(unittest.TestCase):
    def test_a_connection_attempt_gives_up_after_the_setting(self):
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes the handshakes; nothing ever reads or answers
        port = silent.getsockname()[1]
        default = first_wait({}, port)
        self.assertTrue(0.9 <= default < 3.5, default)
        set_to_five = first_wait({"pg_connect_timeout_ms": 5000}, port)
        self.assertTrue(3.9 <= set_to_five < 6.5, set_to_five)


if __name__ == "__main__":
    unittest.main()
