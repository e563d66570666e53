#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes clients/conformance/codes.json, the gateway's problem codes as the clients see them, from the one
place the gateway spells them: the FG_CODES table of src/util/error.h.

Owns: reading FG_CODES, the file it writes, and checking each client's map of codes to error classes
(Python, Go, TypeScript; where CLIENT_MAPS says) against it, so a code added to the gateway fails
conformance.codes until every client maps it, even on a machine without Go or Node. Must not: write a
client's file; each client's own tests also check what its map does with each code.

    python3 clients/conformance/gen_codes.py           # rewrite codes.json
    python3 clients/conformance/gen_codes.py --check   # exit 1 if codes.json differs from error.h or a
                                                       # client maps other codes than it
"""

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(ROOT, "src", "util", "error.h")
OUTPUT = os.path.join(HERE, "codes.json")

# X(FG_ERR_LOCK_BUSY, "lock_busy", 409, 0, "Lock busy", BUSY), possibly over two lines.
# Each client's map: the file, the line opening the literal and the pattern of one key in it. The literal
# ends at the first line that is only its closing bracket.
CLIENT_MAPS = (
    ("clients/python/src/fencegate/errors.py", "PROBLEM_CLASSES: Dict[str, Type[ProblemError]] = {",
     re.compile(r'^\s+"([a-z_]+)":', re.M)),
    ("clients/go/errors.go", "var problemTypes = map[string]func(p *Problem) error{",
     re.compile(r'^\t"([a-z_]+)":', re.M)),
    ("clients/node/src/errors.ts", "export const PROBLEM_CLASSES:", re.compile(r"^  ([a-z_]+):", re.M)),
)
ROW = re.compile(r'X\(\s*(FG_\w+)\s*,\s*"([a-z_]+)"\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*"([^"]*)"')


def codes() -> list:
    """Every problem code of FG_CODES but "ok": {"code", "status", "retry_after_s", "title"}."""
    with open(HEADER, encoding="utf-8") as f:
        text = f.read()
    start = text.index("#define FG_CODES(X)")
    table = text[start:text.index("\n\n", start)].replace("\\\n", " ")
    rows = [{"code": m.group(2), "status": int(m.group(3)), "retry_after_s": int(m.group(4)), "title": m.group(5)}
            for m in ROW.finditer(table)]
    if len(rows) < 10:
        raise SystemExit(f"gen_codes: found only {len(rows)} codes in {HEADER}: has FG_CODES changed shape?")
    return [r for r in rows if r["code"] != "ok"]


def render() -> str:
    rows = ",\n".join("  " + json.dumps(row) for row in codes())
    return ('{"source": "src/util/error.h (FG_CODES); written by clients/conformance/gen_codes.py",\n'
            f' "codes": [\n{rows}\n ]}}\n')


def client_codes(path: str, opening: str, key: re.Pattern) -> list:
    """The codes the map literal of a client's file names, in its order."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    if opening not in text:
        raise SystemExit(f"gen_codes: {path} has no line {opening!r}: has its map moved?")
    start = text.index(opening) + len(opening)
    end = re.compile(r"^[}\]][;)]?$", re.M).search(text, start)
    return key.findall(text, start, end.start())


def client_differences() -> list:
    """One sentence per client whose map names other codes than FG_CODES."""
    gateway = {row["code"] for row in codes()}
    out = []
    for path, opening, key in CLIENT_MAPS:
        mapped = client_codes(path, opening, key)
        missing, unknown = sorted(gateway - set(mapped)), sorted(set(mapped) - gateway)
        if missing or unknown or len(mapped) != len(set(mapped)):
            out.append(f"{path}: maps no class for {missing}, maps unknown codes {unknown}"
                       + (", names a code twice" if len(mapped) != len(set(mapped)) else ""))
    return out


def main() -> int:
    text = render()
    if sys.argv[1:] == ["--check"]:
        with open(OUTPUT, encoding="utf-8") as f:
            if f.read() != text:
                print("codes.json differs from FG_CODES in src/util/error.h: run clients/conformance/gen_codes.py",
                      file=sys.stderr)
                return 1
        differences = client_differences()
        for line in differences:
            print(line, file=sys.stderr)
        if differences:
            return 1
        print(f"codes.json matches FG_CODES ({len(codes())} codes), and so does each client's map")
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
