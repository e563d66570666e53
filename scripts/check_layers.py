#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layering rule of src/ (docs/design.md "Layout", CONTRIBUTING.md "Layers"): includes run one way,
http/ -> lease/ -> store/ -> auth/ -> util/, and inside store/ fenced/ -> audit/ -> backend/. A file may
include headers of its own folder and of the folders below it, never of one above. The top-level headers have a place in that order too; main.c,
janitor.c and config.c wire the folders together and may include anything, and nothing but them may
include janitor.h. ctl/ (fencectl) stands apart: it includes util/ and fglimits.h only, and no other
folder includes it.

Usage: check_layers.py SRC_DIR. Prints each include that breaks the rule and exits 1 if there is any.
"""

import pathlib
import re
import sys

FOLDERS = {"util": 0, "auth": 1, "store/backend": 2, "store/audit": 3, "store/fenced": 4, "lease": 5, "http": 6}
TOP = 7  # the wiring: main.c, janitor.c, config.c
NESTED = ("store",)  # folders made of folders: a file sits in one of their subfolders
CTL = "ctl"
# Top-level headers and generated ones: the lowest layer that may include them.
ROOT_HEADERS = {"fglimits.h": 0, "lua_scripts.h": 0, "revision.h": 0, "embedded.h": 0, "config.h": 2, "gateway.h": 2,
                "janitor.h": TOP}
ROOT_SOURCES = {"main.c", "janitor.c", "config.c"}
NAMES = {level: name for name, level in FOLDERS.items()} | {TOP: "the wiring (main.c, janitor.c, config.c)"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(parts: tuple[str, ...]) -> str:
    """The folder of the rule a path of src/ (split at its slashes) sits in."""
    return "/".join(parts[:2]) if parts[0] in NESTED and len(parts) > 2 else parts[0]


def layer_of_file(rel: pathlib.PurePosixPath) -> int | str | None:
    """The layer a file of src/ sits in (None: a file the rule does not know)."""
    if len(rel.parts) == 1:
        return TOP if rel.name in ROOT_SOURCES else ROOT_HEADERS.get(rel.name)
    return CTL if rel.parts[0] == CTL else FOLDERS.get(folder_of(rel.parts))


def layer_of_include(target: str) -> int | str | None:
    parts = tuple(target.split("/"))
    if len(parts) == 1:
        return ROOT_HEADERS.get(target)
    return CTL if parts[0] == CTL else FOLDERS.get(folder_of(parts))


def problems(src: pathlib.Path) -> list[str]:
    found = []
    for path in sorted(src.rglob("*.[ch]")):
        rel = pathlib.PurePosixPath(path.relative_to(src).as_posix())
        layer = layer_of_file(rel)
        if layer is None:
            found.append(f"{rel}: a file the layering rule does not place (scripts/check_layers.py)")
            continue
        for target in INCLUDE.findall(path.read_text()):
            if len(rel.parts) > 1 and folder_of(tuple(target.split("/"))) == folder_of(rel.parts):
                continue  # its own folder
            to = layer_of_include(target)
            if to is None:
                found.append(f"{rel}: includes \"{target}\", which the layering rule does not place")
            elif layer == CTL:
                if to not in (CTL, 0) or (to == 0 and target.split("/")[0] not in ("util", "fglimits.h")):
                    found.append(f"{rel}: ctl/ includes only util/ and fglimits.h, not \"{target}\"")
            elif to == CTL:
                found.append(f"{rel}: includes \"{target}\"; only ctl/ includes ctl/")
            elif to > layer:
                found.append(f"{rel}: includes \"{target}\" of {NAMES.get(to, to)}, above "
                             f"{NAMES.get(layer, f'layer {layer}')}")
    return found


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = problems(pathlib.Path(sys.argv[1]))
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} include(s) against the layering rule (http -> lease -> store/fenced -> "
              "store/audit -> store/backend -> auth -> util)")
        return 1
    print("layers: every include runs downwards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
