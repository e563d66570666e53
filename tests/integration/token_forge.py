# SPDX-License-Identifier: Apache-2.0
"""Makes fencing tokens the way the gateway does (src/auth/token.c), for tests that must present a token
signed with a real key but carrying claims the gateway never issued.

Owns: the token text form (fgt2.<key id>.<kind>.<fence>.<lease id>.<base64url name>.<base64url HMAC>).
Must not: talk to a gateway.
"""

import base64
import hashlib
import hmac


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def forge(secret: str, key_id: str, name: str, fence: int, lease_id: str = "0" * 32, kind: str = "l") -> str:
    """A token for (kind, name, fence, lease_id) signed with secret under key_id."""
    text = f"fgt2.{key_id}.{kind}.{fence}.{lease_id}.{b64url(name.encode())}"
    mac = hmac.new(secret.encode(), text.encode(), hashlib.sha256).digest()
    return f"{text}.{b64url(mac)}"


def claims(token: str) -> dict:
    """The readable parts of a token made by the gateway."""
    _, key_id, kind, fence, lease_id, name, _ = token.split(".")
    name += "=" * (-len(name) % 4)
    return {"key_id": key_id, "kind": kind, "fence": int(fence), "lease_id": lease_id,
            "name": base64.urlsafe_b64decode(name).decode()}
