# SPDX-License-Identifier: Apache-2.0
"""The Python client's map of problem codes to exception classes against the gateway's error table
(clients/conformance/codes.json, written from FG_CODES of src/util/error.h): every code the gateway can
answer raises a class of its own, and the map names no code the gateway does not have.

Owns: that comparison. Must not: start a gateway (none is needed).
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient_helpers import ROOT  # noqa: E402

import fencegate  # noqa: E402
from fencegate.errors import problem_error  # noqa: E402

CODES = os.path.join(ROOT, "clients", "conformance", "codes.json")


class CodesTest(unittest.TestCase):
    def test_every_gateway_code_has_its_class(self):
        with open(CODES, encoding="utf-8") as f:
            codes = {row["code"]: row for row in json.load(f)["codes"]}
        self.assertEqual(sorted(fencegate.PROBLEM_CLASSES), sorted(codes))
        for code, row in codes.items():
            error = problem_error(row["status"], {"type": f"/problems/{code}", "status": row["status"]})
            self.assertIsNot(type(error), fencegate.ProblemError, code)
            self.assertIsInstance(error, fencegate.PROBLEM_CLASSES[code])
            self.assertEqual((error.code, error.status), (code, row["status"]))


if __name__ == "__main__":
    unittest.main()
