"""API keys: 32 random bytes each, stored only as a SHA-256 hash with a name and scopes.

A key belongs to the firm (scopes among `SCOPES`: its analysts, reviewers, engineers) or to a client
firm (`client`: its one scope is `ratings`, the published ratings of the share classes it is
entitled to). The entitlements live in the same file, `entitlements`: client -> share class ids;
keys written before clients existed are the firm's."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

SCOPES = ("read", "evaluate", "review", "publish")  # review: analysts' decisions; publish: ratings to clients
CLIENT_SCOPE = "ratings"  # a client firm's key: published ratings of its entitled share classes, nothing else
# The firm's roles, as the scopes each needs (`add-key NAME --role ROLE`; `--scopes` sets them by hand)
ROLES = {
    "analyst": ("read", "evaluate", "review"),  # evaluates funds, decides grades (decisions become labels)
    "reviewer": ("read", "review", "publish"),  # the rating committee: approves and publishes to clients
    "engineer": ("read", "evaluate"),  # runs and checks the service, publishes nothing
}


def hash_key(key: str) -> str:
    """Keys are 32 random bytes, so one SHA-256 is enough (no password stretching needed).

    >>> hash_key("abc")[:12]
    'ba7816bf8f01'
    """
    return hashlib.sha256(key.encode()).hexdigest()


def _write(keys_file: Path, data: dict) -> None:
    keys_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = keys_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(keys_file)  # atomic: a running server never reads a half-written file


def _read(keys_file: Path) -> dict:
    data = json.loads(keys_file.read_text()) if keys_file.exists() else {}
    return {"keys": data.get("keys", []), "entitlements": data.get("entitlements", {})}


def add_key(keys_file: Path, name: str, scopes: list[str], client: str | None = None) -> str:
    """Create a key for `name` with `scopes` (a client firm's key: `client`, scope `ratings` alone);
    store its hash (never the key); return the key."""
    if client is not None:
        if not client.strip() or scopes not in ([], [CLIENT_SCOPE]):
            raise ValueError(f"a client key has the {CLIENT_SCOPE!r} scope alone and a client name, got {scopes}")
        scopes = [CLIENT_SCOPE]
    bad = sorted(set(scopes) - set(SCOPES))
    if client is None and (bad or not scopes):
        raise ValueError(f"scopes must be among {list(SCOPES)}, got {scopes}")
    data = _read(keys_file)
    if any(k["name"] == name for k in data["keys"]):
        raise ValueError(f"a key named {name!r} exists in {keys_file}")
    key = "fg_" + secrets.token_urlsafe(32)
    entry = {"name": name, "sha256": hash_key(key), "scopes": sorted(set(scopes))}
    data["keys"].append({**entry, **({"client": client.strip()} if client is not None else {})})
    _write(keys_file, data)
    return key


def entitle(keys_file: Path, client: str, share_class_ids: list[str], remove: bool = False) -> list[str]:
    """Entitle the client firm `client` to `share_class_ids` (or withdraw them, `remove`); return its list."""
    data = _read(keys_file)
    if not any(k.get("client") == client for k in data["keys"]):
        raise ValueError(f"no client {client!r} in {keys_file}: add its key first (add-key NAME --client {client})")
    now = set(data["entitlements"].get(client, []))
    now = now - set(share_class_ids) if remove else now | set(share_class_ids)
    data["entitlements"][client] = sorted(now)
    _write(keys_file, data)
    return data["entitlements"][client]


def entitlements(keys_file: Path) -> dict[str, set[str]]:
    """client -> the share classes it may see."""
    return {c: set(ids) for c, ids in _read(keys_file)["entitlements"].items()}


def load_keys(keys_file: Path) -> dict[str, dict]:
    """sha256 -> {"name", "scopes", "client" (None: the firm's), "entitled" (a client's share classes)}."""
    data = _read(keys_file)
    return {
        k["sha256"]: {
            "name": k["name"],
            "scopes": set(k["scopes"]),
            "client": k.get("client"),
            "entitled": set(data["entitlements"].get(k["client"], [])) if k.get("client") else set(),
        }
        for k in data["keys"]
    }


def list_keys(keys_file: Path) -> list[dict]:
    """Each key's name, scopes and client (never its hash)."""
    return [{"name": k["name"], "scopes": k["scopes"], "client": k.get("client")} for k in _read(keys_file)["keys"]]


def revoke_key(keys_file: Path, name: str) -> None:
    """Remove the key named `name`; a running server stops accepting it at its next request."""
    data = _read(keys_file)
    kept = [k for k in data["keys"] if k["name"] != name]
    if len(kept) == len(data["keys"]):
        raise ValueError(f"no key named {name!r} in {keys_file}")
    _write(keys_file, {**data, "keys": kept})  # a server reading it sees the old or the new list, never half


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
