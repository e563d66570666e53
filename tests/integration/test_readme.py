# SPDX-License-Identifier: Apache-2.0
"""The README's walk-through and its shell lines, run as written.

- `examples/walkthrough.sh` runs against a gateway started with examples/fencegate.json, and its output
  is the output the README shows ("A walk-through with curl"), once what differs from run to run is set
  aside: the gateway's URL (the README's default http://127.0.0.1:8480), the invoice id (the README's 42;
  each run takes its own), tokens, audit ids, timestamps, and every number of five digits or more (fences,
  times); every token the commands use is set by an `export` line the script prints;
- the README's `fencectl lock ... -- examples/close-invoice.sh 42` closes the invoice under the lock;
- the README's pip lines (a venv that uses Debian's setuptools, as PEP 668 wants) install the Python
  client, which then imports;
- the README's `man -l` lines name pages the build made.

Broken variants caught, each a README that drifted from the gateway: tokens shown as `fgt1.l.17.…` where
the gateway answers `fgt2.default.l.100001…`, a renew with the stale token shown answering 200, a
`./close-invoice.sh` that did not exist, `pip install` into the system Python (refused on Debian 12).

Owns: the README walk-through and its examples. Must not: test the API beyond what the README shows.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest, env  # noqa: E402
from pg_helpers import insert_invoice  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WALKTHROUGH = os.path.join(ROOT, "examples", "walkthrough.sh")


def readme_section(title: str, next_title: str) -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return text[text.index(f"## {title}"):text.index(f"## {next_title}")]


def shown_output() -> str:
    """The output of examples/walkthrough.sh that the README shows (its first console block)."""
    return re.search(r"```console\n(.*?)```", readme_section("A walk-through with curl", "From Python"),
                     re.S).group(1)


def normalized(text: str, invoice_id: str) -> str:
    """text with the invoice id as 42, tokens as <token> and numbers of 5+ digits as <n>."""
    text = text.replace(invoice_id, "42")
    text = re.sub(r"fgt\d\.[A-Za-z0-9._:/~-]+", "<token>", text)
    text = re.sub(r'"(id|next_after_id)":\d+', r'"\1":<n>', text)  # audit ids: other tests wrote before
    text = re.sub(r"\d{4}-\d\d-\d\dT[0-9:.]+[+-]\d\d:\d\d", "<time>", text)
    return re.sub(r"\d{5,}", "<n>", text)


class ReadmeTest(GatewayTest):
    with open(os.path.join(ROOT, "examples", "fencegate.json"), encoding="utf-8") as f:
        gateway_config = json.load(f)

    def run_script(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        e = dict(os.environ, FENCEGATE_URL=self.gw.base, **extra)
        e.pop("FENCEGATE_KEY", None)
        return subprocess.run(list(args), env=e, capture_output=True, text=True, timeout=60, cwd=ROOT)

    def test_the_walk_through_prints_what_the_readme_shows(self):
        invoice_id = f"t{uuid.uuid4().hex[:8]}"
        r = self.run_script(WALKTHROUGH, invoice_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"$ curl -s -H \"$AUTH\" -X POST {self.gw.base}/v1/locks/", r.stdout)  # the real URL
        got = normalized(r.stdout.replace(self.gw.base, "http://127.0.0.1:8480"), invoice_id)
        shown = normalized(shown_output(), "42")
        self.assertEqual(got.rstrip().splitlines(), shown.rstrip().splitlines(),
                         "README.md shows other output than examples/walkthrough.sh prints; paste a run's")
        # The story holds: A's late write refused as stale, A's renew lost, B's writes applied.
        statuses = re.findall(r"(?m)^(\d{3}) ", r.stdout)
        self.assertEqual(statuses, ["200", "200", "200", "200", "409", "200", "410", "200", "200", "200", "200",
                                    "200", "200", "200", "200"])
        # Pasteable: each token variable a command uses is set by an export line printed before it.
        exported = set()
        for line in r.stdout.splitlines():
            exported.update(re.findall(r"^\$ export (\w+)=fgt2\.", line))
            if line.startswith("$ curl"):
                self.assertTrue(set(re.findall(r"\$(\w_TOKEN)", line)) <= exported, line)
        self.assertEqual(exported, {"A_TOKEN", "B_TOKEN", "S_TOKEN"})

    def test_close_invoice_under_fencectl(self):
        invoice_id = f"c{uuid.uuid4().hex[:8]}"
        section = readme_section("A walk-through with curl", "From Python")
        line = re.search(r"(?m)^build/fencectl lock invoice:42 .*examples/close-invoice\.sh 42$", section)
        self.assertIsNotNone(line, "the README's fencectl line with examples/close-invoice.sh")
        ctl = os.environ.get("FG_CTL") or os.path.join(os.path.dirname(env("FG_BIN")), "fencectl")
        # The invoice's number first: the path of fencectl may hold "42" too (a checkout in /tmp/tmp.X42y).
        command = line.group(0).replace("42", invoice_id).replace("build/fencectl", ctl)
        insert_invoice(invoice_id)  # the walk-through made invoice 42; this run closes one of its own
        r = self.run_script("bash", "-c", command)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"invoice {invoice_id} (fence ", r.stdout)
        row = self.c.get(f"/v1/pg/invoices/{invoice_id}").body["row"]
        self.assertEqual(row["status"], "closed")

    def test_pip_lines_install_the_client(self):
        block = re.search(r"```sh\n(python3 -m venv.*?)```", readme_section("From Python", "Configuration"),
                          re.S).group(1)
        where = tempfile.mkdtemp(prefix="fg-readme-venv-")
        try:
            commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
            e = dict(os.environ, PATH="/usr/bin:/bin")  # Debian's python3, as a user of Debian 12 has it
            # A copy of the client: pip builds in the source folder, which must stay clean.
            shutil.copytree(os.path.join(ROOT, "clients", "python"), os.path.join(where, "clients", "python"))
            for command in commands:
                r = subprocess.run(["bash", "-c", command], cwd=where, env=e, capture_output=True, text=True,
                                   timeout=300)
                self.assertEqual(r.returncode, 0, f"{command}\n{r.stdout}\n{r.stderr}")
            r = subprocess.run([os.path.join(where, ".venv", "bin", "python"), "-c",
                                "import fencegate; print(fencegate.__file__)"], capture_output=True, text=True)
            self.assertIn(os.path.join(where, ".venv"), r.stdout, r.stderr)
        finally:
            shutil.rmtree(where)

    def test_man_lines_name_built_pages(self):
        lines = re.findall(r"man -l (\S+)", readme_section("Build from source", "Install from the package"))
        self.assertTrue(lines, "the README says how to read the man pages")
        build = os.path.dirname(env("FG_BIN"))
        for page in lines:
            path = os.path.join(build, page.split("/", 1)[1]) if page.startswith("build/") else page
            self.assertTrue(os.path.exists(path), f"{page}: not made by the build ({path})")


if __name__ == "__main__":
    unittest.main()
