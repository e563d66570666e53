#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/gen_routes.py - owns: turning the route descriptions of openapi/routes/*.json, the one place
a route's method, path, handler, label, scope, accepted members (their types and bounds, bounds
named by the macros of src/fglimits.h) and answers are written, into what is derived from them:

  c OUT.c ROUTES...   the route table api_routes[] with its strict-request lists and member bounds
  write ROUTES...     the scopes, request schemas and examples, query parameters and answers of
                      openapi/openapi.json, the tables of docs/api.md between the marker comments
                      MARK_BEGIN ... MARK_END, in place, each file only when it changes (the build
                      runs both; the two files are kept in git)
  check ROUTES...     exits 1, naming the difference, when either file is not what `write` would make
                      it (lint.routes)

A route's "answers" map each status to the name of a shared response of components/responses or to
{"description", "schema" (a shared schema's name, or a schema), "example", "media"} (or a whole
"content"); the rest of an operation (summary, description, path parameters) and the shared components
stay written by hand in openapi/openapi.json.

A member's "doc" ({"type_note", "default", "meaning"}, whose {MACRO} and {MACRO:,} name numbers of
src/fglimits.h) fills the columns of its route's member table in docs/api.md; OpenAPI never sees it.
A bound other than 0 or 1 names its macro of src/fglimits.h, so every limit has one number.

A member with an upper bound ("maximum", "maxLength", "maxItems") is checked by the gateway from the
generated table, before its handler runs (struct member_bound, http/strict.h): the bound written here is
the one enforced. Its "refusal" is the detail of the 400 for a value out of bounds; {name} and the bounds
({minimum}, {maximum}, {minLength}, {maxLength}, {minItems}, {maxItems}) are filled in. Integers and
strings of a body have a default refusal; an array, a body string whose every fault answers one sentence
(CHECK_TEXT) and a query integer that its handler answers in other words name theirs. A query string's
bound is documentation: its handler reads it as a name. Members are checked in the order written here,
presence and type included, so a request with two faults is answered for the first of them in that
order (docs/api.md "Strict requests").
A body string whose "printable" names a refusal must also be printable text (valid UTF-8 without
control characters, util/names.h), else that refusal answers: the rule of an acquire's owner.
An array's "items_rule" names the C function (of a header the file's "headers" list) that checks its
items once its bounds pass, in the same order (a lock set's names: lockset_names_check).
A member read only in some cases ("checked_by": "handler", e.g. a watch's wait_ms) is left to its handler,
which takes the bounds from the same table (strict_bound).

ROUTES are the description files in the order of the route table (the first matching entry wins).
Python 3 standard library only; must not touch anything but its output.
"""

import difflib
import json
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
TYPES = ("integer", "string", "boolean", "array", "object")
BOUNDS = ("minimum", "maximum", "maxLength", "minLength", "maxItems", "minItems", "default")
MEMBER_KEYS = {"type", "description", "required", "default", "doc", "refusal", "items", "enum", "uniqueItems",
               "additionalProperties", "checked_by", "printable", "items_rule"} | set(BOUNDS)
# What a member's description says that OpenAPI's schema of it does not ("required" goes elsewhere).
GATEWAY_ONLY = ("required", "doc", "refusal", "checked_by", "printable", "items_rule")
# The refusal of a bounded member whose description names none, by where it is and its type.
REFUSALS = {("body", "integer"): "field '{name}' must be between {minimum} and {maximum}",
            ("body", "string"): "field '{name}' must be {minLength} to {maxLength} bytes long",
            ("query", "integer"): "query '{name}' must be an integer from {minimum} to {maximum}"}
ROUTE_KEYS = {"method", "path", "label", "handler", "scope", "scope_text", "operation", "body", "query",
              "answers"}
ANSWER_KEYS = {"description", "schema", "example", "media", "content"}
# What OpenAPI's x-fencegate-scope says of each scope, unless a route's scope_text says more.
SCOPE_TEXT = {"admin": "admin", "open": None, "key": "any known key", "lock": "lock:<name>",
              "semaphore": "semaphore:<name>", "pg_read": "pg:<table>:read", "pg_write": "pg:<table>:write",
              "redis_read": "redis:<key>:read", "redis_write": "redis:<key>:write",
              "audit_read": "audit:read", "metrics": "metrics"}
IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")
MARK_BEGIN = "<!-- generated by scripts/gen_routes.py from openapi/routes/"
MARK_END = "<!-- end of generated table -->"


class DescriptionError(Exception):
    """A route description that breaks the rules above; the message names the file and route."""


def limits() -> dict:
    """The integer macros of src/fglimits.h by name."""
    with open(os.path.join(ROOT, "src", "fglimits.h"), encoding="utf-8") as f:
        text = f.read()
    return {name: int(value) for name, value in re.findall(r"^#define (\w+)\s+(\d+)\b", text, re.M)}


def load(paths: list) -> list:
    """The routes of the description files, in order, each with its file's "headers"; checked."""
    routes = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            group = json.load(f)
        for route in group["routes"]:
            where = f"{os.path.basename(path)}: {route.get('method')} {route.get('path')}"
            check_route(route, where)
            routes.append(dict(route, headers=group["headers"]))
    return routes


def check_route(route: dict, where: str) -> None:
    """Raises DescriptionError when route misses a key, has an unknown one or a bad value."""
    unknown = set(route) - ROUTE_KEYS
    if unknown:
        raise DescriptionError(f"{where}: unknown keys {sorted(unknown)}")
    if route.get("method") not in METHODS:
        raise DescriptionError(f"{where}: method must be one of {METHODS}")
    if route.get("scope") not in SCOPE_TEXT:
        raise DescriptionError(f"{where}: scope must be one of {sorted(SCOPE_TEXT)}")
    for key in ("label", "handler"):
        if not IDENT.match(route.get(key, "")):
            raise DescriptionError(f"{where}: {key} must be a C identifier")
    for part in ("body", "query"):
        members = members_of(route, part)
        for name, schema in members.items():
            if set(schema.get("doc", {})) - {"type_note", "default", "meaning"}:
                raise DescriptionError(f"{where}: {part} member {name!r}: a doc has type_note, default "
                                       "and meaning only")
            if not IDENT.match(name) or schema.get("type") not in TYPES:
                raise DescriptionError(f"{where}: {part} member {name!r} needs a name and a type of "
                                       f"{TYPES}")
            literal = [k for k in BOUNDS if isinstance(schema.get(k), int) and schema[k] not in (0, 1)]
            if literal:
                raise DescriptionError(f"{where}: {part} member {name!r}: {literal[0]} must name its macro "
                                       "of src/fglimits.h (only 0 and 1 may be written as numbers)")
            if set(schema) - MEMBER_KEYS:
                raise DescriptionError(f"{where}: {part} member {name!r}: unknown keys "
                                       f"{sorted(set(schema) - MEMBER_KEYS)}")
    if "body" in route and not route["body"].get("schema"):
        raise DescriptionError(f"{where}: body needs the name of its OpenAPI schema")
    if set(route.get("body", {})) - {"schema", "members", "example"}:
        raise DescriptionError(f"{where}: a body has schema, members and example only")
    for status, answer in route.get("answers", {}).items():
        if not re.match(r"^[1-5][0-9][0-9]$", status):
            raise DescriptionError(f"{where}: answer {status!r} is no HTTP status")
        if not isinstance(answer, str) and (set(answer) - ANSWER_KEYS or "description" not in answer):
            raise DescriptionError(f"{where}: answer {status} is the name of a shared response or has a "
                                   f"description and {sorted(ANSWER_KEYS - {'description'})}")
    # What the server answers before any handler (src/http/server.c, "Strict requests"): 421 to a foreign
    # Host on every route, 415 to a body that is not JSON on a route that reads one.
    if "answers" in route:
        strict = ["421"] + (["415"] if "body" in route else [])
        missing = [status for status in strict if status not in route["answers"]]
        if missing:
            raise DescriptionError(f"{where}: the server answers {missing[0]} before the handler; list it")


def members_of(route: dict, part: str) -> dict:
    """The members of route's body, or its query parameters ({} for none)."""
    if part == "body":
        return route.get("body", {}).get("members", {})
    return route.get("query", {})


def resolve(node, numbers: dict, where: str):
    """node with every bound that names a macro of src/fglimits.h replaced by its number (a member's
    doc, text for docs/api.md, is left as it is)."""
    if isinstance(node, list):
        return [resolve(item, numbers, where) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("doc", "refusal", "checked_by", "printable", "items_rule"):
            out[key] = value
            continue
        if key in BOUNDS and isinstance(value, str):
            if value not in numbers:
                raise DescriptionError(f"{where}: {key} {value!r} is no macro of src/fglimits.h")
            value = numbers[value]
        out[key] = resolve(value, numbers, where)
    return out


def c_string_list(name: str, members: dict) -> str:
    """A NULL-terminated C array of the names of members."""
    items = ", ".join(f'"{m}"' for m in members)
    return f"static const char *const {name}[] = {{{items}, NULL}};\n"


def bound_of(part: str, name: str, schema: dict, numbers: dict, where: str):
    """The bound of one member as struct member_bound holds it ({"name", "check", "min", "max",
    "required", "refusal", "by_handler"}), or None for a member the gateway does not check from the
    table (no upper bound, or a query string)."""
    s = resolve({k: v for k, v in schema.items() if k != "doc"}, numbers, where)
    kind = s["type"]
    upper = {"integer": "maximum", "string": "maxLength", "array": "maxItems"}.get(kind)
    if upper not in s or (part, kind) == ("query", "string"):
        return None
    lower = {"maximum": "minimum", "maxLength": "minLength", "maxItems": "minItems"}[upper]
    if (part, kind) == ("query", "integer"):
        check = "CHECK_QUERY_INTEGER"
    elif kind == "integer":
        check = "CHECK_INTEGER"
    elif kind == "array":
        check = "CHECK_ARRAY"
    else:
        check = "CHECK_TEXT" if "refusal" in s else "CHECK_STRING"
    template = s.get("refusal", REFUSALS.get((part, kind)))
    if template is None:
        raise DescriptionError(f"{where}: {part} member {name!r} needs a refusal")
    values = {"name": name, "minimum": 0, "minLength": 0, "minItems": 0}
    values.update({k: v for k, v in s.items() if k in BOUNDS})
    try:
        refusal = template.format(**values)
        printable = s["printable"].format(**values) if "printable" in s else None
    except KeyError as e:
        raise DescriptionError(f"{where}: {name}: the refusal names {e}, which it has not") from None
    if printable is not None and check != "CHECK_STRING":
        raise DescriptionError(f"{where}: {name}: only a body string may be printable")
    rule = s.get("items_rule")
    if rule is not None and (check != "CHECK_ARRAY" or not IDENT.match(rule)):
        raise DescriptionError(f"{where}: {name}: items_rule names a C function, of an array")
    if s.get("checked_by", "gateway") not in ("gateway", "handler"):
        raise DescriptionError(f"{where}: {name}: checked_by is gateway or handler")
    return {"name": name, "check": check, "min": s.get(lower, 0), "max": s[upper],
            "required": bool(s.get("required")), "refusal": refusal,
            "by_handler": s.get("checked_by") == "handler", "printable": printable, "items_rule": rule}


def bounds(route: dict, numbers: dict) -> list:
    """The bounds of route's members, query parameters first, each in the order written."""
    where = f"{route['method']} {route['path']}"
    found = [bound_of(part, m, schema, numbers, where)
             for part in ("query", "body") for m, schema in members_of(route, part).items()]
    return [b for b in found if b is not None]


def c_bounds(name: str, route: dict, numbers: dict) -> str:
    """The C array of route's member bounds, or "" when it has none."""
    rows = bounds(route, numbers)
    if not rows:
        return ""
    flag = {True: "true", False: "false"}
    body = "".join(f'    {{"{b["name"]}", {b["check"]}, {b["min"]}, {b["max"]}, {flag[b["required"]]}, '
                   f'{json.dumps(b["refusal"])}, {flag[b["by_handler"]]}, '
                   f'{json.dumps(b["printable"]) if b["printable"] else "NULL"}, '
                   f'{b["items_rule"] or "NULL"}}},\n' for b in rows)
    return (f"static const struct member_bound {name}[] = {{\n{body}"
            "    {NULL, CHECK_INTEGER, 0, 0, false, NULL, false, NULL, NULL},\n};\n")


def c_table(routes: list, numbers: dict) -> str:
    """The C file of api_routes[] (routes.h)."""
    headers = sorted({h for r in routes for h in r["headers"]})
    out = ["/* Generated by scripts/gen_routes.py from openapi/routes/. Do not edit. */\n",
           '#include "http/routes.h"\n\n#include <stdbool.h>\n#include <stddef.h>\n\n#include "http/strict.h"\n']
    out += [f'#include "{h}"\n' for h in headers]
    out.append("\n/* What the bodies and queries of the routes may hold. */\n")
    rows = []
    for i, r in enumerate(routes):
        lists = []
        for part in ("body", "query"):
            members = members_of(r, part)
            if members:
                name = f"{r['label']}_{i}_{part}"
                out.append(c_string_list(name, members))
                lists.append(name)
            else:
                lists.append("NULL")
        bounds = c_bounds(f"{r['label']}_{i}_bounds", r, numbers)
        out.append(bounds)
        lists.append(f"{r['label']}_{i}_bounds" if bounds else "NULL")
        rows.append(f'    {{HTTP_{r["method"]}, "{r["path"]}", {r["handler"]}, "{r["label"]}", '
                    f'SCOPE_{r["scope"].upper()}, {lists[0]}, {lists[1]}, {lists[2]}}},\n')
    out.append("\nconst struct route api_routes[] = {\n")
    out += rows
    out.append("    {HTTP_GET, NULL, NULL, NULL, SCOPE_ADMIN, NULL, NULL, NULL},\n};\n")
    return "".join(out)


def openapi_path(pattern: str) -> str:
    return re.sub(r"\{(\w+)\*\}", r"{\1}", pattern)


def request_schema(route: dict, numbers: dict) -> dict:
    """The "required" and "properties" of route's body schema."""
    where = f"{route['method']} {route['path']}"
    members = members_of(route, "body")
    props = {name: resolve({k: v for k, v in s.items() if k not in GATEWAY_ONLY}, numbers, where)
             for name, s in members.items()}
    required = [name for name, s in members.items() if s.get("required")]
    return {"required": required, "properties": props}


def query_parameter(name: str, schema: dict, numbers: dict, where: str) -> dict:
    """The OpenAPI parameter object of query member name."""
    param = {"name": name, "in": "query"}
    if "required" in schema:
        param["required"] = schema["required"]
    param["schema"] = resolve({k: v for k, v in schema.items() if k not in GATEWAY_ONLY + ("description",)},
                              numbers, where)
    if "description" in schema:
        param["description"] = schema["description"]
    return param


def problem_codes() -> dict:
    """The status of each problem code of FG_CODES (src/util/error.h) by code."""
    with open(os.path.join(ROOT, "src", "util", "error.h"), encoding="utf-8") as f:
        text = f.read()
    return {code: int(status) for code, status in re.findall(r'X\(FG_\w+,\s*"(\w+)",\s*(\d+),', text)}


def responses(route: dict, doc: dict, codes: dict) -> dict:
    """The OpenAPI responses of route's "answers": a name is a shared response of components/responses,
    whose description, for an error status, opens with the problem codes it answers (each must be a code
    of FG_CODES with that status; a success names none, as the 204 of Prefer: return=minimal); an object
    a description, a schema (the name of a shared schema, or a schema), an example and the media type
    (default application/json), or a whole "content"."""
    where = f"{route['method']} {route['path']}"
    out = {}
    for status, answer in route["answers"].items():
        if isinstance(answer, str):
            shared = doc["components"]["responses"].get(answer)
            if shared is None:
                raise DescriptionError(f"{where}: answer {status}: no shared response {answer}")
            named = [w for w in re.findall(r"\b[a-z]+(?:_[a-z]+)*\b", shared["description"]) if w in codes]
            wrong = [c for c in named if codes[c] != int(status)]
            if wrong or (not named and int(status) >= 400):
                raise DescriptionError(f"{where}: answer {status}: {answer} answers "
                                       f"{wrong or 'no problem code'} (FG_CODES: "
                                       f"{', '.join(f'{c} {codes[c]}' for c in wrong) or 'none named'})")
            out[status] = {"$ref": f"#/components/responses/{answer}"}
            continue
        if "content" in answer:
            out[status] = {"description": answer["description"], "content": answer["content"]}
            continue
        schema = answer["schema"]
        if isinstance(schema, str):
            if schema not in doc["components"]["schemas"]:
                raise DescriptionError(f"{where}: answer {status}: no shared schema {schema}")
            schema = {"$ref": f"#/components/schemas/{schema}"}
        media = {"schema": schema}
        if "example" in answer:
            media["example"] = answer["example"]
        out[status] = {"description": answer["description"],
                       "content": {answer.get("media", "application/json"): media}}
    return out


def openapi_document(doc: dict, routes: list, numbers: dict) -> dict:
    """doc with the scopes, request schemas and query parameters of routes written into it."""
    doc = json.loads(json.dumps(doc))
    schemas = doc["components"]["schemas"]
    codes = problem_codes()
    written = {}
    for r in routes:
        op = doc["paths"].get(openapi_path(r["path"]), {}).get(r["method"].lower())
        if op is None:
            continue  # the console's "/ui/": one operation documents "/ui"
        if op.get("operationId") != r.get("operation"):
            raise DescriptionError(f"{r['method']} {r['path']}: operationId {op.get('operationId')!r}, "
                                   f"described as {r.get('operation')!r}")
        where = f"{r['method']} {r['path']}"
        scope = r.get("scope_text", SCOPE_TEXT[r["scope"]])
        if scope is None:
            op.pop("x-fencegate-scope", None)
        else:
            op["x-fencegate-scope"] = scope
        if "body" in r:
            name = r["body"]["schema"]
            body = request_schema(r, numbers)
            if name in written and written[name] != body:
                raise DescriptionError(f"{where}: schema {name} differs from that of {written[name]}")
            written[name] = body
            schema = schemas.setdefault(name, {"type": "object"})
            if body["required"]:
                schema["required"] = body["required"]
            else:
                schema.pop("required", None)
            schema["properties"] = body["properties"]
            content = op["requestBody"]["content"]["application/json"]
            content["schema"] = {"$ref": f"#/components/schemas/{name}"}
            if "example" in r["body"]:
                content["example"] = r["body"]["example"]
            else:
                content.pop("example", None)
        if "answers" not in r:
            raise DescriptionError(f"{where}: needs its answers (status: shared response or description)")
        op["responses"] = responses(r, doc, codes)
        params = op.get("parameters", [])
        query = [query_parameter(n, s, numbers, where) for n, s in members_of(r, "query").items()]
        kept = [p for p in params if p.get("in") != "query"]
        at = next((i for i, p in enumerate(params) if p.get("in") == "query"), len(kept))
        if query or any(p.get("in") == "query" for p in params):
            op["parameters"] = kept[:at] + query + kept[at:]
    return doc


def dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def number(value: int) -> str:
    """A number as docs/api.md writes it: thousands separators above 9,999."""
    return f"{value:,}" if value > 9999 else str(value)


def type_text(schema: dict, numbers: dict, where: str) -> str:
    """What docs/api.md says of a member's type and bounds, e.g. "integer 100…86,400,000"."""
    s = resolve({k: v for k, v in schema.items() if k != "doc"}, numbers, where)
    kind = s["type"]
    text = kind
    if kind == "integer":
        low, high = s.get("minimum"), s.get("maximum")
        if high is not None:
            text += f" {number(low if low is not None else 0)}…{number(high)}"
        elif low is not None:
            text += f" ≥ {number(low)}"
    elif kind == "string" and "maxLength" in s:
        text += f", ≤ {number(s['maxLength'])} bytes"
    elif kind == "array":
        text = f"array of {s['items']['type']}s"
        if "maxItems" in s:
            text += f", {s.get('minItems', 0)}–{number(s['maxItems'])}"
    return text + schema.get("doc", {}).get("type_note", "")


def member_table(route: dict, numbers: dict) -> list:
    """The rows of the member table of one route's body (docs/api.md)."""
    where = f"{route['method']} {route['path']}"
    rows = ["| member | type | default | meaning |", "|---|---|---|---|"]
    for name, s in members_of(route, "body").items():
        doc = s.get("doc")
        if doc is None:
            raise DescriptionError(f"{where}: member {name} needs a doc for its table in docs/api.md")
        try:
            default = doc["default"].format(**numbers)
        except KeyError as e:
            raise DescriptionError(f"{where}: {name}: {e} is no macro of src/fglimits.h") from None
        rows.append(f"| `{name}` | {type_text(s, numbers, where)} | {default} | {doc['meaning']} |")
    return rows


def bounds_table(routes: list, numbers: dict) -> list:
    """The rows of the table of every route's members (docs/api.md, "Strict requests"), by path."""
    rows = ["| call | member | in | type and bounds | required or default |", "|---|---|---|---|---|"]
    for r in sorted(routes, key=lambda r: (openapi_path(r["path"]), METHODS.index(r["method"]))):
        call = f"`{r['method']} {openapi_path(r['path'])}`"
        for part, where_in in (("body", "body"), ("query", "query")):
            for name, s in members_of(r, part).items():
                text = type_text({k: v for k, v in s.items() if k != "doc"}, numbers, call)
                if s.get("required"):
                    need = "required"
                elif "default" in s:
                    need = f"default {number(resolve(s, numbers, call)['default'])}"
                else:
                    need = ""
                rows.append(f"| {call} | `{name}` | {where_in} | {text} | {need} |")
                call = ""
    return rows


def api_md(text: str, routes: list, numbers: dict) -> str:
    """text (docs/api.md) with each generated table made anew from routes."""
    by_label = {r["label"]: r for r in routes}
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if not line.startswith(MARK_BEGIN):
            continue
        end = next((j for j in range(i, len(lines)) if lines[j] == MARK_END), None)
        if end is None:
            raise DescriptionError(f"docs/api.md: {line} has no {MARK_END}")
        label = re.search(r"\((\w+)\)", line)
        if label is None:
            out += bounds_table(routes, numbers)
        elif label.group(1) in by_label:
            out += member_table(by_label[label.group(1)], numbers)
        else:
            raise DescriptionError(f"docs/api.md: no route is labelled {label.group(1)}")
        out.append(MARK_END)
        i = end + 1
    return "\n".join(out)


def main(argv: list) -> int:
    if len(argv) < 3 or argv[1] not in ("c", "write", "check"):
        sys.stderr.write(__doc__)
        return 2
    try:
        if argv[1] == "c":
            routes, numbers = load(argv[3:]), limits()
            text = c_table(routes, numbers)  # a bound naming no macro fails the build
            out = argv[2]
            old = open(out, encoding="utf-8").read() if os.path.exists(out) else None
            if old != text:
                with open(out, "w", encoding="utf-8") as f:
                    f.write(text)
            return 0
        routes, numbers = load(argv[2:]), limits()
        made = {}
        for name, make in (("openapi/openapi.json", lambda t: dump(openapi_document(json.loads(t), routes,
                                                                                   numbers))),
                           ("docs/api.md", lambda t: api_md(t, routes, numbers))):
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                text = f.read()
            made[name] = (text, make(text))
    except DescriptionError as e:
        sys.stderr.write(f"gen_routes: {e}\n")
        return 1
    status = 0
    for name, (text, new) in made.items():
        if new == text:
            continue
        if argv[1] == "write":
            with open(os.path.join(ROOT, name), "w", encoding="utf-8") as f:
                f.write(new)
            continue
        diff = difflib.unified_diff(text.splitlines(), new.splitlines(), name, "from openapi/routes/",
                                    lineterm="", n=2)
        sys.stderr.write("\n".join(list(diff)[:60]) + "\n")
        sys.stderr.write(f"gen_routes: {name} differs from openapi/routes/; run "
                         "python3 scripts/gen_routes.py write openapi/routes/*.json\n")
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
