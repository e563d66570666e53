# SPDX-License-Identifier: Apache-2.0
"""The operator console in a real browser: runs tests/browser/console.test.js (node's test runner,
playwright-core driving Debian's chromium; scripts/deps.sh installs both) against gateways started here.

Owns: starting those gateways (auth off, and auth on with an admin key and a key without audit:read)
with the configuration the browser tests need, emptying the audit table
first (so the timeline shows exactly the rejections the browser tests make), and keeping the
screenshots: in FG_TEST_DATA/screenshots, and in docs/screenshots/ when FG_UPDATE_SCREENSHOTS=1.
Must not: download a browser.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Gateway, psql, test_data_dir  # noqa: E402
from pg_helpers import config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tests", "browser", "console.test.js")
NODE_MODULES = os.environ.get("FG_NODE_MODULES", "/var/cache/fencegate/browser-tests/node_modules")
CHROMIUM = os.environ.get("FG_CHROMIUM", "/usr/bin/chromium")
ADMIN_KEY, VIEWER_KEY = "console-admin-key-for-tests", "console-viewer-key-for-tests"


def auth_config() -> dict:
    """Auth on, with an admin key and a key that sees leases but not the audit."""
    keys = [("ops", ADMIN_KEY, ["admin"]), ("viewer", VIEWER_KEY, ["lock:*", "semaphore:*"])]
    cfg = config()
    cfg["auth"] = {"mode": "required", "keys": [
        {"id": i, "sha256": hashlib.sha256(t.encode()).hexdigest(), "scopes": s} for i, t, s in keys]}
    return cfg


class ConsoleBrowserTest(unittest.TestCase):
    def test_console_in_chromium(self):
        for need, what in ((CHROMIUM, "chromium"), (os.path.join(NODE_MODULES, "playwright-core"), "playwright-core")):
            self.assertTrue(os.path.exists(need), f"{what} is missing at {need}: run scripts/deps.sh")
        shots = os.path.join(test_data_dir(), "screenshots")
        os.makedirs(shots, exist_ok=True)
        with Gateway(config=config()) as open_gw, Gateway(config=auth_config()) as auth_gw:
            psql("DELETE FROM fencegate.rejections")
            env = dict(os.environ, FG_UI_URL=open_gw.base, FG_AUTH_UI_URL=auth_gw.base, FG_ADMIN_KEY=ADMIN_KEY,
                       FG_VIEWER_KEY=VIEWER_KEY, FG_NODE_MODULES=NODE_MODULES, FG_CHROMIUM=CHROMIUM,
                       FG_SCREENSHOTS=shots)
            run = subprocess.run(["node", "--test", "--test-reporter=spec", SCRIPT], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)
        print(run.stdout[-20000:], run.stderr[-5000:], sep="\n")
        self.assertEqual(run.returncode, 0, "browser tests failed (output above)")
        if os.environ.get("FG_UPDATE_SCREENSHOTS") == "1":
            target = os.path.join(ROOT, "docs", "screenshots")
            os.makedirs(target, exist_ok=True)
            for name in sorted(os.listdir(shots)):
                shutil.copy(os.path.join(shots, name), target)


if __name__ == "__main__":
    unittest.main()
