# SPDX-License-Identifier: Apache-2.0
"""GET /v1/openapi.json and openapi/openapi.json: a well-formed OpenAPI 3.1 document, served as kept in the
repository, that documents exactly the routes of the route table (read from its descriptions in
openapi/routes/) and whose every operation the running gateway routes (no 404 "no such route", no 405).

Owns: the agreement between the API description and the router. Must not: test what the endpoints do.
"""

import glob
import json
import os
import re
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GatewayTest  # noqa: E402
from openapi_doc import resolve  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC_PATH = os.path.join(ROOT, "openapi", "openapi.json")
ROUTE_FILES = os.path.join(ROOT, "openapi", "routes", "*.json")
METHODS = ("get", "post", "put", "patch", "delete")


def load_doc() -> dict:
    with open(DOC_PATH, encoding="utf-8") as f:
        return json.load(f)


# Routes the document names under another address: the console page at /ui/ is the page of /ui (OpenAPI
# linters refuse paths with a trailing slash; /ui's description names /ui/).
ALIASES = {("get", "/ui/"): ("get", "/ui")}


def table_routes() -> set[tuple[str, str]]:
    """(method, path template) of every entry of the route table, with {name*} read as {name}."""
    routes = set()
    for name in glob.glob(ROUTE_FILES):
        with open(name, encoding="utf-8") as f:
            for r in json.load(f)["routes"]:
                routes.add((r["method"].lower(), re.sub(r"\{(\w+)\*\}", r"{\1}", r["path"])))
    return {ALIASES.get(r, r) for r in routes}


def documented(doc: dict) -> set[tuple[str, str]]:
    return {(m, p) for p, item in doc["paths"].items() for m in item if m in METHODS}


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


class DocumentTest(unittest.TestCase):
    def test_well_formed(self):
        doc = load_doc()
        self.assertEqual(doc["openapi"], "3.1.0")
        self.assertTrue(doc["info"]["title"] and doc["info"]["version"])
        op_ids = []
        for path, item in doc["paths"].items():
            self.assertTrue(path.startswith("/"), path)
            params_in_path = set(re.findall(r"\{(\w+)\}", path))
            for method, op in item.items():
                self.assertIn(method, METHODS, path)
                self.assertTrue(op.get("responses"), (method, path))
                self.assertTrue(any(code.startswith("2") for code in op["responses"]), (method, path))
                op_ids.append(op["operationId"])
                declared = set()
                for p in op.get("parameters", []):
                    p = resolve(doc, p)
                    if p["in"] == "path":
                        self.assertTrue(p["required"], p)
                        declared.add(p["name"])
                self.assertEqual(declared, params_in_path, (method, path))
        self.assertEqual(len(op_ids), len(set(op_ids)), "operationIds must be unique")

    def test_every_ref_resolves(self):
        doc = load_doc()
        for ref in refs(doc):
            self.assertTrue(ref.startswith("#/"), ref)
            resolve(doc, {"$ref": ref})

    def test_documents_exactly_the_route_table(self):
        routes, docs = table_routes(), documented(load_doc())
        self.assertGreater(len(routes), 5, "could not read the route descriptions")
        self.assertEqual(sorted(routes - docs), [], "routes missing from openapi/openapi.json")
        self.assertEqual(sorted(docs - routes), [], "documented in openapi/openapi.json but not routed")


class ServedTest(GatewayTest):
    def test_served_document_is_the_file(self):
        r = self.gw.http("GET", "/v1/openapi.json")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["content-type"].startswith("application/json"), r.headers)
        self.assertEqual(r.body, load_doc())

    def test_every_documented_operation_is_routed(self):
        probe = f"openapi-probe-{uuid.uuid4().hex[:8]}"
        samples = {"name": probe, "table": "no_such_table", "key": "1", "file": "console.js"}
        for method, path in sorted(documented(load_doc())):
            url = re.sub(r"\{(\w+)\}", lambda m: samples[m.group(1)], path)
            r = self.gw.http(method.upper(), url, None if method in ("get", "delete") else {})
            detail = r.body.get("detail") if isinstance(r.body, dict) else None
            self.assertFalse(r.status == 404 and detail == "no such route", (method, url, r))
            self.assertNotEqual(r.status, 405, (method, url, r))
            self.assertLess(r.status, 500, (method, url, r))


if __name__ == "__main__":
    unittest.main()
