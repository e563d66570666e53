# SPDX-License-Identifier: Apache-2.0
"""The README's curl walk-through, run as written.

Every `curl` line of the section "A walk-through with curl" runs through bash against a gateway started
with examples/fencegate.json. It runs with `localhost:8480` pointed at that gateway and the names made
unique per run (the lock, the row, the semaphore, the Redis key). `TOKEN` is taken from the first lock
acquire's answer, as the reader would copy it.

Checked for each line:
- it answers 2xx;
- where the README shows the answer (the `# {...}` line after it), the answer is JSON with every member
  the README shows, nested objects alike;
- shown strings and booleans are equal; numbers (fences, times) and the contents of arrays are not
  compared, and `…` stands for what the README leaves out.

Broken variants caught, each a README that drifted from the gateway: a member the reply lacks
(`expires_ms` shown where the gateway sends `expires_in_ms`), a route that answers 404
(`/v1/semaphore/...`), a shown string that differs (`"status":"open"` after the PATCH to paid).

Owns: the README walk-through. Must not: test the API beyond what the README shows (docs/api.md and the
other suites do).
"""

import json
import os
import re
import subprocess
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def walk_through() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return text[text.index("## A walk-through with curl"):text.index("## From Python")]


def curl_lines(section: str) -> list[tuple[str, str | None]]:
    """(command, the answer the README shows after it or None) for every curl line of the sh blocks."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        lines = block.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("curl "):
                continue
            shown = lines[i + 1] if i + 1 < len(lines) else ""
            out.append((line, shown[2:] if shown.startswith("# {") else None))
    return out


def shown_json(text: str):
    """The answer the README shows, `…` (what it leaves out) taken away."""
    text = re.sub(r'"[^"{}\[\],:]*…[^"{}\[\],:]*"', '"…"', text)  # strings cut short
    text = re.sub(r",\s*…|…\s*,", "", text)       # members left out
    return json.loads(text)


class ReadmeTest(GatewayTest):
    with open(os.path.join(ROOT, "examples", "fencegate.json"), encoding="utf-8") as f:
        gateway_config = json.load(f)

    def assert_shows(self, shown, got, where: str):
        if isinstance(shown, dict):
            self.assertIsInstance(got, dict, where)
            for key, value in shown.items():
                self.assertIn(key, got, f"{where}: no member {key!r} in {got}")
                self.assert_shows(value, got[key], f"{where}.{key}")
        elif isinstance(shown, bool) or shown is None:
            self.assertEqual(got, shown, where)
        elif isinstance(shown, str) and shown != "…":
            self.assertEqual(got, shown, where)

    def test_the_walk_through_runs_as_written(self):
        uid = uuid.uuid4().hex[:8]
        names = [("invoice:42", f"invoice:{uid}"), ("invoices/42", f"invoices/{uid}"),
                 ("exporters", f"exporters-{uid}"), ("localhost:8480", f"127.0.0.1:{self.gw.port}")]
        env = dict(os.environ, AUTH="Authorization: Bearer unused", J="Content-Type: application/json",
                   TOKEN="")
        lines = curl_lines(walk_through())
        self.assertGreaterEqual(len(lines), 10, "the walk-through lost its curl lines")
        for command, shown in lines:
            for old, new in names:
                command = command.replace(old, new)
                shown = shown.replace(old, new) if shown else shown
            run = subprocess.run(["bash", "-c", command + " -w '\\n%{http_code}'"], env=env,
                                 capture_output=True, text=True, timeout=30)
            body, _, status = run.stdout.rpartition("\n")
            self.assertTrue(status.startswith("2"), f"{command}\nanswered {status}: {body}")
            if shown is not None:
                self.assert_shows(shown_json(shown), json.loads(body), command)
            if not env["TOKEN"] and "/v1/locks/" in command and "/acquire" in command:
                env["TOKEN"] = json.loads(body)["token"]


if __name__ == "__main__":
    unittest.main()
