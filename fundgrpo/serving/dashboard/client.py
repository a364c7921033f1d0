"""The dashboard's one way to write: the API, called as the analyst with their own key
(`FUNDGRPO_API_URL`, default the local API)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

API_URL = os.environ.get("FUNDGRPO_API_URL", "http://127.0.0.1:8000").rstrip("/")


def api(path: str, key: str, body: dict | None = None) -> tuple[int, dict]:
    """Call the API as the analyst (their key); (status, JSON body). Errors come back, not raised."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{API_URL}{path}", data=data, method="POST" if body is not None else "GET")
    request.add_header("X-API-Key", key)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        try:
            return err.code, json.loads(err.read() or b"{}")
        except json.JSONDecodeError:
            return err.code, {"detail": err.reason}
