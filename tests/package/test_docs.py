# SPDX-License-Identifier: Apache-2.0
"""The API reference cannot drift from the code: docs/api.md names every route of the route table
(its descriptions, openapi/routes/) and every problem code of FG_CODES (src/util/error.h), with a
Retry-After where the code carries one; the README, docs/api.md and docs/operations.md state the limits and defaults of
src/fglimits.h; docs/api.md's configuration table lists every key of src/config.c with its variable,
default and range, and the README and fencegate(8) name each; every example of openapi/openapi.json
conforms to the schema beside it; and the README and docs link only to files inside the repository, and
to sections those files have.

Caught: the batch answer's items (op, resource, row) against the old schema that required `applied` and
`fence` in them; a README link to ../shared/API.md.
"""

import json
import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CODE = re.compile(r'X\(FG_ERR_\w+,\s*"(\w+)",\s*(\d+),\s*(\d+),')
NOT_PUBLIC = {"config"}  # a start-up failure, never an HTTP answer
LIMIT = re.compile(r"^#define (\w+)\s+(\d+)\b", re.M)
SETTING = re.compile(r'S_INT\("([\w.]+)",\s*(?:"\w+"|NULL),\s*\w+,\s*(\w+),')
# Every setting of the table of src/config.c: kind, path, variable (or NULL) and the integer arguments
# (default, least, most and step, as numbers or macros of src/fglimits.h).
SETTING_ROW = re.compile(r'S_(INT_STEP|INT|STR)\("([\w.]+)", (NULL|"\w+"), \w+((?:, [\w-]+)*)\)')
LISTEN_ROW = re.compile(r'S_LISTEN\("(\w+)", "(\w+)"')

# What docs/api.md says of each limit in its prose, with the numbers of src/fglimits.h in place of {NAME}
# (a number above 9,999 is written with thousands separators where the text does so: {NAME:,}). Its
# tables of members and bounds are generated from openapi/routes/ (scripts/gen_routes.py; lint.routes).
API_MD_LIMITS = [
    "Names of locks and semaphores: 1–{NAME_MAX_LEN} bytes of `A-Z a-z 0-9 . _ : / -`",
    "a lock or semaphore name outside the alphabet or over {NAME_MAX_LEN} bytes",
    "`waiter_lease_ms` ({DEFAULT_WAITER_LEASE_MS_S} s)",
    "`wait_ms + ttl_ms + {REQUEST_ID_GRACE_MS_S} s`",
    "`limit` (required, 1…{SEMAPHORE_MAX_LIMIT:,})",
    "`Fence-Owner` (1–{OWNER_NAME_MAX_LEN} bytes of UTF-8 text",
    "1 to {FENCED_BATCH_MAX_OPS} of them",
    "`limit` 1…{AUDIT_LIMIT_MAX} (default {AUDIT_LIMIT_DEFAULT})",
    "up to {TOKEN_KEY_ID_MAX} bytes; secrets of {TOKEN_SECRET_MIN} to {TOKEN_SECRET_MAX} bytes; "
    "up to {TOKEN_KEYS_MAX} keys",
    "`{{\"reason\"?: string ≤ {REVOCATION_REASON_MAX} bytes, \"fence\"?: n}}`",
    "`wait_ms` (default {WATCH_WAIT_DEFAULT_MS}, 0 … {WAIT_MAX_MS:,})",
    "`names`: 1 to {LOCKSET_MAX} distinct lock names",
    "`leases`: the first {LEASE_LIST_SEM_HOLDERS} live holders",
    "`prefix` is 0–{NAME_MAX_LEN} bytes of the name alphabet, `limit` 1–{LIST_LIMIT_MAX}",
    "Echoed when the client sent 1–{X_REQUEST_ID_MAX_LEN} bytes",
    "the key is one word of 1 to {API_KEY_TEXT_MAX} visible ASCII characters",
    "A key id is 1 to {API_KEY_ID_MAX} bytes of `A-Z a-z 0-9 . _ -`; a scope is 1 to {SCOPE_MAX_LEN} bytes",
    "for the later of {LEASE_RELEASED_KEPT_MS_MIN} minutes and the lease's own `ttl_ms`",
    "stays parked and looks again every {RECHECK_AFTER_OUTAGE_MS} ms until its `wait_ms` ends",
    "The stream is capped near {AUDIT_DEAD_LETTERS_MAX:,} entries",
    "up to {REDIS_URL_MAX_HOSTS} sentinels",
    "the others its chain (up to {TLS_CHAIN_MAX} certificates in all)",
    "| `limits.connection_buffer_bytes` | {DEFAULT_CONNECTION_BUFFER_BYTES} ({CONNECTION_BUFFER_MIN_BYTES} … "
    "{CONNECTION_BUFFER_MAX_BYTES}) |",
    "at most `probe_timeout_ms` (default {DEFAULT_PROBE_TIMEOUT_MS})",
    "it takes at most {PROBE_MAX_CONNECTIONS} connections",
]

# What docs/operations.md says of fencectl's own defaults, likewise.
OPERATIONS_MD_LIMITS = [
    "SIGKILL after `--grace` (default {CTL_GRACE_DEFAULT_MS_S} s); fencectl then tries once, for at "
    "most {CTL_GIVE_BACK_MS_S} s",
]

# The limits of src/fglimits.h a hand-written bound of openapi/openapi.json may state, by the name of the
# member or parameter it bounds and the keyword; a bound of 0 or 1 needs none. The request members and
# query parameters are left out: scripts/gen_routes.py writes them from the route descriptions, where
# every bound names its macro (and lint.routes keeps the document so). Caught: a batch without maxItems.
OPENAPI_LIMITS = {
    ("Fence-Owner", "maxLength"): {"OWNER_NAME_MAX_LEN"},
    ("X-Request-Id", "maxLength"): {"X_REQUEST_ID_MAX_LEN"},
    ("name", "maxLength"): {"NAME_MAX_LEN"},
}
BOUNDS = ("minimum", "maximum", "maxLength", "minLength", "maxItems", "minItems", "default")


def openapi_bounds(node, name: str = ""):
    """(member or parameter name, keyword, value) of every integer bound in an OpenAPI node."""
    if isinstance(node, list):
        for item in node:
            yield from openapi_bounds(item, name)
    elif isinstance(node, dict):
        if isinstance(node.get("name"), str) and "schema" in node:
            name = node["name"]
        for key in BOUNDS:
            value = node.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                yield name, key, value
        for key, value in node.items():
            if key == "properties":
                for member, schema in value.items():
                    yield from openapi_bounds(schema, member)
            elif key not in ("example", "examples"):
                yield from openapi_bounds(value, name)


def settings() -> dict[str, tuple[str, list[str]]]:
    """Every configuration key the gateway reads, by path: its variable ("" for none) and, for an integer
    setting, [default, least, most(, step)] as written in src/config.c. The keys of the table of
    settings; the structured keys config.c reads in apply_object (tables, allowed_hosts, ...); and
    those of the `auth` object (src/auth/keyset.c)."""
    config = read("src", "config.c")
    table = " ".join(config[config.index("settings[] = {"):].split("};", 1)[0].split())
    out = {path: (env, []) for path, env in LISTEN_ROW.findall(table)}
    for kind, path, env, args in SETTING_ROW.findall(table):
        out[path] = (env.strip('"') if env != "NULL" else "", [a for a in args.split(", ") if a])
    body = config[config.index("static int apply_object("):].split("\n}\n", 1)[0]
    for key in re.findall(r'strcmp\(k, "(\w+)"\) == 0', body):
        if key not in ("defaults", "limits"):  # objects of the table's keys
            out.setdefault(key, ("", []))
    out.pop("auth", None)
    body = read("src", "auth", "keyset.c")
    body = body[body.index("static int auth_object("):].split("\n}\n", 1)[0]
    for key in re.findall(r'strcmp\(name, "(\w+)"\) == 0', body):
        out["auth." + key] = ("", [])
    for path, env in (("auth.mode", "FENCEGATE_AUTH_MODE"), ("auth.keys_file", "FENCEGATE_AUTH_KEYS_FILE")):
        assert env in read("src", "config.c"), env
        out[path] = (env, [])
    return out


def documents() -> list[str]:
    """The Markdown documents whose links are checked: the README, the changelog and docs/."""
    return ["README.md", "CHANGELOG.md"] + [os.path.join("docs", f) for f in sorted(os.listdir(
        os.path.join(ROOT, "docs"))) if f.endswith(".md")]


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub makes of a document's headings: lower case, punctuation dropped, spaces as
    hyphens (headings inside fenced code blocks are not headings)."""
    out, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            heading = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return out


def read(*path: str) -> str:
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def conforms(value, schema: dict, components: dict, where: str) -> list[str]:
    """The ways value breaks schema (the subset of JSON Schema the document uses)."""
    if "$ref" in schema:
        return conforms(value, components[schema["$ref"].rsplit("/", 1)[1]], components, where)
    problems = []
    types = schema.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
        ok = any((t == "integer" and isinstance(value, int) and not isinstance(value, bool)) or
                 (t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool)) or
                 (t in kinds and isinstance(value, kinds[t])) for t in types)
        if not ok:
            return [f"{where}: {value!r} is not {types}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{where}: lacks {name}")
        props = schema.get("properties", {})
        for name, member in value.items():
            if name in props:
                problems += conforms(member, props[name], components, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: unexpected member {name}")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += conforms(member, schema["additionalProperties"], components, f"{where}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += conforms(item, schema["items"], components, f"{where}[{i}]")
    return problems


class ApiReferenceTest(unittest.TestCase):
    def test_every_route_and_code_is_documented(self):
        doc = read("docs", "api.md")
        routes = [r for name in sorted(os.listdir(os.path.join(ROOT, "openapi", "routes")))
                  for r in json.loads(read("openapi", "routes", name))["routes"]]
        self.assertGreaterEqual(len(routes), 30)
        for r in routes:
            path = re.sub(r"\{(\w+)\*\}", r"{\1}", r["path"])
            self.assertIn(path, doc, f"{r['method']} {path}")
        codes = CODE.findall(read("src", "util", "error.h"))
        self.assertGreaterEqual(len(codes), 20)
        for code, status, retry_after in codes:
            if code in NOT_PUBLIC:
                continue
            row = re.search(rf"^\| {status} \| `{code}` \|.*$", doc, re.M)
            self.assertIsNotNone(row, code)
            # The Retry-After column of FG_CODES and the code's row say the same.
            self.assertEqual("with `Retry-After`" in row.group(0), int(retry_after) > 0, code)

    def test_documented_limits_are_those_of_fglimits_h(self):
        limits = {name: int(value) for name, value in LIMIT.findall(read("src", "fglimits.h"))}
        self.assertGreaterEqual(len(limits), 30)
        for name in ("DEFAULT_WAITER_LEASE_MS", "REQUEST_ID_GRACE_MS", "CTL_GRACE_DEFAULT_MS",
                     "CTL_GIVE_BACK_MS"):
            limits[name + "_S"] = limits[name] // 1000
        limits["LEASE_RELEASED_KEPT_MS_MIN"] = limits["LEASE_RELEASED_KEPT_MS"] // 60000
        # Compared with the runs of white space of the documents made one space: a sentence may
        # break anywhere.
        for doc_name, texts in (("api.md", API_MD_LIMITS), ("operations.md", OPERATIONS_MD_LIMITS)):
            doc = " ".join(read("docs", doc_name).split())
            for text in texts:
                self.assertIn(text.format(**limits), doc, doc_name)
        # Every integer setting with a default of its own: the README's configuration table says it.
        defaults = {path: limits[macro] for path, macro in SETTING.findall(read("src", "config.c"))
                    if macro in limits}
        self.assertGreaterEqual(len(defaults), 15)
        documented = {}
        for line in read("README.md").splitlines():
            cells = [c.strip() for c in line.split("|")]
            if len(cells) < 5 or not cells[2].startswith("`"):
                continue
            paths, prefix = [], ""
            for p in re.findall(r"`([\w.]+)`", cells[2]):
                paths.append(prefix + p[1:] if p.startswith(".") else p)
                prefix = paths[-1].rsplit(".", 1)[0] + "." if "." in paths[-1] else ""
            values = [v.strip() for v in cells[3].split(",")]
            if len(values) == len(paths) and all(v.isdigit() for v in values):
                documented.update(zip(paths, map(int, values)))
        for path, value in defaults.items():
            self.assertEqual(documented.get(path), value, f"README default of {path}")

    def test_every_setting_is_documented(self):
        """docs/api.md's configuration table has a row for every key of src/config.c with its variable and,
        for an integer, its default and range as the code has them; the README's table and fencegate(8)
        name every key. Fails with a key added to the table of settings and nowhere else, and with a
        range changed in the code only (http_threads 1 … 512)."""
        limits = {name: int(value) for name, value in LIMIT.findall(read("src", "fglimits.h"))}

        def number(arg: str) -> int:
            return int(arg) if re.fullmatch(r"-?\d+", arg) else limits[arg]

        keys = settings()
        self.assertGreaterEqual(len(keys), 40)
        for path in ("listen", "tables", "redis_prefixes", "allowed_hosts", "secrets", "ui", "auth.keys"):
            self.assertIn(path, keys)
        doc = read("docs", "api.md")
        section = doc[doc.index("\n## Configuration\n"):].split("\n## ", 2)[1]
        rows = {}
        for line in section.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if len(cells) == 4 and re.fullmatch(r"`[\w.]+`", cells[0]):
                rows[cells[0].strip("`")] = cells[1:]
        self.assertEqual(set(rows), set(keys), "docs/api.md, Configuration: rows against src/config.c")
        for path, (env, args) in keys.items():
            variable, default, bounds = rows[path]
            self.assertEqual(variable, f"`{env}`" if env else "—", f"variable of {path}")
            if not args:
                continue
            dflt, least, most = (number(a) for a in args[:3])
            if least <= dflt <= most:  # else derived at start-up, said in words
                self.assertEqual(default.replace(",", ""), str(dflt), f"default of {path}")
            self.assertTrue(bounds.replace(",", "").startswith(f"{least} … {most}"), f"range of {path}")
            if len(args) == 4:
                self.assertIn("whole seconds", bounds, f"step of {path}")
        readme = set()
        for line in read("README.md").splitlines():
            cells = [c.strip() for c in line.split("|")]
            if len(cells) < 5 or not cells[2].startswith("`"):
                continue
            prefix = ""
            for p in re.findall(r"`([\w.]+)`", cells[2]):
                readme.add(prefix + p[1:] if p.startswith(".") else p)
                prefix = (prefix + p[1:] if p.startswith(".") else p).rsplit(".", 1)[0] + "."
        man = read("man", "fencegate.8.in")
        for path in keys:
            self.assertIn(path, readme, f"README configuration table lacks {path}")
            self.assertRegex(man, rf"(?<![\w.]){re.escape(path)}(?![\w.])", f"fencegate.8 lacks {path}")

    def test_openapi_bounds_are_those_of_fglimits_h(self):
        limits = {name: int(value) for name, value in LIMIT.findall(read("src", "fglimits.h"))}
        doc = json.loads(read("openapi", "openapi.json"))
        generated = list(openapi_bounds(doc))
        for key in (("ttl_ms", "maximum"), ("max_hold_ms", "maximum"), ("ops", "maxItems")):
            self.assertIn(key, {(name, kw) for name, kw, _ in generated})
        for group in os.listdir(os.path.join(ROOT, "openapi", "routes")):
            for route in json.loads(read("openapi", "routes", group))["routes"]:
                if "body" in route:
                    doc["components"]["schemas"][route["body"]["schema"]].pop("properties", None)
                op = doc["paths"].get(route["path"].replace("*}", "}"), {}).get(route["method"].lower(), {})
                op["parameters"] = [p for p in op.get("parameters", []) if p.get("in") != "query"]
        for name, keyword, value in openapi_bounds(doc):
            if value in (0, 1) and keyword != "default":
                continue
            macros = OPENAPI_LIMITS.get((name, keyword))
            self.assertIsNotNone(macros, f"openapi.json: {keyword} {value} of {name!r} is no limit of fglimits.h")
            self.assertIn(value, {limits[m] for m in macros}, f"openapi.json: {keyword} of {name!r}")

    def test_openapi_examples_conform(self):
        doc = json.loads(read("openapi", "openapi.json"))
        components = doc["components"]["schemas"]
        media = []
        for path, item in doc["paths"].items():
            for method, op in item.items():
                if not isinstance(op, dict):
                    continue
                for ctype, m in op.get("requestBody", {}).get("content", {}).items():
                    media.append((f"{method} {path} body", m))
                for code, r in op.get("responses", {}).items():
                    for ctype, m in r.get("content", {}).items():
                        media.append((f"{method} {path} {code}", m))
        for name, r in doc["components"].get("responses", {}).items():
            for ctype, m in r.get("content", {}).items():
                media.append((f"response {name}", m))
        examples = [(where, m) for where, m in media if "example" in m]
        self.assertGreaterEqual(len(examples), 20)
        for where, m in examples:
            self.assertEqual(conforms(m["example"], m["schema"], components, where), [])

    def test_the_readme_says_how_scripts_test_runs(self):
        """scripts/test went from three tests at a time to four (FG_TEST_JOBS), and the README still said
        three, on ports 26379-26381 and 25432-25434: someone freeing ports for a run, or sizing a CI
        machine, read the old figures. The README states the default of scripts/test and the ports it takes."""
        script = read(os.path.join("scripts", "test"))
        jobs = int(re.search(r'jobs="\$\{FG_TEST_JOBS:-(\d+)\}"', script).group(1))
        redis = int(re.search(r'redis_port="\$\{FG_TEST_REDIS_PORT:-(\d+)\}"', script).group(1))
        pg = int(re.search(r'pg_port="\$\{FG_TEST_PG_PORT:-(\d+)\}"', script).group(1))
        words = {3: "three", 4: "four", 5: "five", 6: "six"}
        text = " ".join(read("README.md").split())
        said = re.search(r"`scripts/test` runs .*?data in", text)
        said = said.group(0) if said else "nothing"
        self.assertIn(f"`scripts/test` runs {words[jobs]} tests at a time", text, f"the README says: {said}")
        self.assertIn(f"ports {redis}–{redis + jobs - 1} and {pg}–{pg + jobs - 1}", text, f"the README says: {said}")

    def test_links_stay_in_the_repository(self):
        for name in documents():
            text = read(name)
            for target in re.findall(r"\]\(([^)#\s]+)", text):
                if re.match(r"[a-z]+:", target):
                    continue  # a web address, not a file
                path = os.path.normpath(os.path.join(ROOT, os.path.dirname(name), target))
                self.assertTrue(path.startswith(ROOT + os.sep), f"{name} links outside: {target}")
                self.assertTrue(os.path.exists(path), f"{name} links to a missing file: {target}")

    def test_links_to_a_section_find_it(self):
        """A link with #section names a heading of its document, as GitHub makes anchors of headings, so a
        section that moves or is renamed takes its links along. Fails with a misspelt section
        (docs/operations.md#replicas-and-failovers) and with api.md's own #listing-leases-and-the-console-helpers."""
        for name in documents():
            for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", read(name)):
                if re.match(r"[a-z]+:", target) or (target and not target.endswith(".md")):
                    continue  # a web address, or a file that is not Markdown
                doc = os.path.normpath(os.path.join(os.path.dirname(name), target)) if target else name
                self.assertIn(anchor, anchors(read(doc)), f"{name} links to a missing section: {target}#{anchor}")


if __name__ == "__main__":
    unittest.main()
