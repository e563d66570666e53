# SPDX-License-Identifier: Apache-2.0
"""One version for the gateway and its clients: the Python, Go and TypeScript clients state the version of
CMakeLists.txt's project(), in their package metadata and in the User-Agent they send.

Owns: that comparison. Must not: start anything.
"""

import json
import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read(*path: str) -> str:
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def one(pattern: str, text: str) -> str:
    found = re.findall(pattern, text, re.M)
    if len(found) != 1:
        raise AssertionError(f"expected one match of {pattern!r}, found {found}")
    return found[0]


class VersionTest(unittest.TestCase):
    def test_every_client_states_the_project_version(self):
        version = one(r"^project\(fencegate VERSION ([\d.]+)", read("CMakeLists.txt"))
        py = os.path.join("clients", "python")
        stated = {
            "pyproject.toml": one(r'^version = "([^"]+)"', read(py, "pyproject.toml")),
            "fencegate.__version__": one(r'^__version__ = "([^"]+)"', read(py, "src", "fencegate", "__init__.py")),
            "python User-Agent": one(r'^USER_AGENT = "fencegate-python/([^"]+)"',
                                     read(py, "src", "fencegate", "transport.py")),
            "go Version": one(r'^const Version = "([^"]+)"', read("clients", "go", "transport.go")),
            "package.json": json.loads(read("clients", "node", "package.json"))["version"],
            "package-lock.json": json.loads(read("clients", "node", "package-lock.json"))["version"],
            "node VERSION": one(r'^export const VERSION = "([^"]+)"', read("clients", "node", "src", "transport.ts")),
        }
        self.assertEqual(stated, {where: version for where in stated})


if __name__ == "__main__":
    unittest.main()
