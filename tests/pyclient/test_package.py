# SPDX-License-Identifier: Apache-2.0
"""The Python client as a package: it installs with pip without network or build isolation, the
installed copy imports and carries py.typed, pydoc renders its documentation, every public name has a
docstring, and its sources (and the examples) parse as Python 3.9.

Owns: the packaging of clients/python. Must not: talk to a gateway.
"""

import ast
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import CLIENT_SRC, EXAMPLES, ROOT  # noqa: E402

import fencegate  # noqa: E402

PACKAGE_DIR = os.path.join(ROOT, "clients", "python")
BUILDERS = (sys.executable, "/usr/bin/python3")


def builder() -> str:
    """An interpreter with pip, setuptools and wheel (Debian: python3-pip python3-setuptools python3-wheel)."""
    for python in BUILDERS:
        if os.path.exists(python) and subprocess.run([python, "-c", "import setuptools, wheel, pip"],
                                                     capture_output=True).returncode == 0:
            return python
    raise AssertionError(f"none of {BUILDERS} has pip, setuptools and wheel; run scripts/deps.sh")


class PackageTest(unittest.TestCase):
    def test_pip_install_without_network(self):
        python = builder()
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "src-copy")  # the build writes egg-info next to the sources
            shutil.copytree(PACKAGE_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
            target = os.path.join(tmp, "site")
            env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1",
                       PIP_ROOT_USER_ACTION="ignore")
            out = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--quiet",
                                  "--target", target, source], capture_output=True, text=True, env=env,
                                 timeout=300)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertTrue(os.path.exists(os.path.join(target, "fencegate", "py.typed")))
            check = ("import fencegate, sys; print(fencegate.__file__); "
                     "print(fencegate.Client('http://127.0.0.1:1').transport.base_url)")
            out = subprocess.run([python, "-c", check], capture_output=True, text=True, cwd=tmp,
                                 env=dict(os.environ, PYTHONPATH=target))
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertTrue(out.stdout.startswith(os.path.join(target, "fencegate")), out.stdout)

    def test_pydoc_renders(self):
        out = subprocess.run([sys.executable, "-m", "pydoc", "fencegate"], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=CLIENT_SRC, PAGER="cat"))
        self.assertEqual(out.returncode, 0, out.stderr)
        for text in ("class Client", "class LockBusy", "class StaleFence", "lock(self, name", "renewed in the background"):
            self.assertTrue(text in out.stdout, f"pydoc fencegate lacks {text!r}")

    def test_public_names_have_docstrings(self):
        missing = []
        for name in fencegate.__all__:
            obj = getattr(fencegate, name)
            if not inspect.isclass(obj):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(name)
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    if not (member.__doc__ or "").strip():
                        missing.append(f"{name}.{attr}")
        self.assertEqual(missing, [])

    def test_sources_parse_as_python_3_9(self):
        files = [os.path.join(CLIENT_SRC, "fencegate", f) for f in os.listdir(os.path.join(CLIENT_SRC, "fencegate"))]
        files += [os.path.join(EXAMPLES, f) for f in os.listdir(EXAMPLES)]
        for path in (f for f in files if f.endswith(".py")):
            with open(path, encoding="utf-8") as f:
                ast.parse(f.read(), path, feature_version=(3, 9))


if __name__ == "__main__":
    unittest.main()
