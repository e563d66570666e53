#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes clients/conformance/codes.json, the gateway's problem codes as the clients see them, from the one
place the gateway spells them: the FG_CODES table of src/util/error.h.

Owns: reading FG_CODES and the file it writes. Must not: know any client; each client's tests compare its
own map of codes to classes against codes.json, so a code added to the gateway fails every client's
tests until the client maps it.

    python3 clients/conformance/gen_codes.py           # rewrite codes.json
    python3 clients/conformance/gen_codes.py --check   # exit 1 if codes.json differs from error.h
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


def main() -> int:
    text = render()
    if sys.argv[1:] == ["--check"]:
        with open(OUTPUT, encoding="utf-8") as f:
            if f.read() != text:
                print("codes.json differs from FG_CODES in src/util/error.h: run clients/conformance/gen_codes.py",
                      file=sys.stderr)
                return 1
        print(f"codes.json matches FG_CODES ({len(codes())} codes)")
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
