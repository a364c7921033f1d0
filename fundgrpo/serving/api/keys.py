"""API keys: 32 random bytes each, stored only as a SHA-256 hash with a name and scopes."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

SCOPES = ("read", "evaluate")


def hash_key(key: str) -> str:
    """Keys are 32 random bytes, so one SHA-256 is enough (no password stretching needed).

    >>> hash_key("abc")[:12]
    'ba7816bf8f01'
    """
    return hashlib.sha256(key.encode()).hexdigest()


def add_key(keys_file: Path, name: str, scopes: list[str]) -> str:
    """Create a key for `name` with `scopes`; store its hash (never the key); return the key."""
    bad = sorted(set(scopes) - set(SCOPES))
    if bad or not scopes:
        raise ValueError(f"scopes must be among {list(SCOPES)}, got {scopes}")
    data = json.loads(keys_file.read_text()) if keys_file.exists() else {"keys": []}
    if any(k["name"] == name for k in data["keys"]):
        raise ValueError(f"a key named {name!r} exists in {keys_file}")
    key = "fg_" + secrets.token_urlsafe(32)
    data["keys"].append({"name": name, "sha256": hash_key(key), "scopes": sorted(set(scopes))})
    keys_file.parent.mkdir(parents=True, exist_ok=True)
    keys_file.write_text(json.dumps(data, indent=2) + "\n")
    os.chmod(keys_file, 0o600)
    return key


def load_keys(keys_file: Path) -> dict[str, dict]:
    """sha256 -> {"name", "scopes"}."""
    if not keys_file.exists():
        return {}
    return {
        k["sha256"]: {"name": k["name"], "scopes": set(k["scopes"])} for k in json.loads(keys_file.read_text())["keys"]
    }
