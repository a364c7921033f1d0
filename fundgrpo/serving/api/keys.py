"""API keys: 32 random bytes each, stored only as a SHA-256 hash with a name and scopes."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

SCOPES = ("read", "evaluate", "review")  # review: record analysts' decisions


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
    tmp = keys_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(keys_file)  # atomic: a running server never reads a half-written file
    return key


def load_keys(keys_file: Path) -> dict[str, dict]:
    """sha256 -> {"name", "scopes"}."""
    if not keys_file.exists():
        return {}
    return {
        k["sha256"]: {"name": k["name"], "scopes": set(k["scopes"])} for k in json.loads(keys_file.read_text())["keys"]
    }


def list_keys(keys_file: Path) -> list[dict]:
    """Each key's name and scopes (never its hash)."""
    if not keys_file.exists():
        return []
    return [{"name": k["name"], "scopes": k["scopes"]} for k in json.loads(keys_file.read_text())["keys"]]


def revoke_key(keys_file: Path, name: str) -> None:
    """Remove the key named `name`; a running server stops accepting it at its next request."""
    data = json.loads(keys_file.read_text()) if keys_file.exists() else {"keys": []}
    kept = [k for k in data["keys"] if k["name"] != name]
    if len(kept) == len(data["keys"]):
        raise ValueError(f"no key named {name!r} in {keys_file}")
    tmp = keys_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({**data, "keys": kept}, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(keys_file)  # atomic: a server reading it sees the old or the new list, never half


class KeyRing:
    """The keys file as the server sees it: read again whenever it changed on disk, so keys added or
    revoked while the server runs take effect at the next request, without a restart."""

    def __init__(self, keys_file: Path) -> None:
        self.keys_file = keys_file
        self.stamp: tuple[int, int] | None = None
        self.keys: dict[str, dict] = {}

    def get(self, key_hash: str) -> dict | None:
        try:
            st = self.keys_file.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self.stamp:
            self.keys, self.stamp = load_keys(self.keys_file), stamp
        return self.keys.get(key_hash)
