# SPDX-License-Identifier: Apache-2.0
"""Reading openapi/openapi.json as its tests need it: a node with its `$ref`s followed.

Owns: nothing but this helper. Must not: load the document (each test reads the copy it checks).
"""


def resolve(doc: dict, node: dict) -> dict:
    """node, or what its `$ref` (a local JSON pointer into doc) names, followed until no `$ref` is left."""
    while "$ref" in node:
        target = doc
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node
