"""API settings from the environment (keys never live in the repo); where params.yaml has a value
(the decision store), params.yaml is the default and the environment wins."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ApiSettings:
    keys_file: Path = Path(".api_keys.json")
    # empty: params.yaml's `decisions.store_url` (under the served root), the store the `decisions`
    # stage and the dashboard read; FUNDGRPO_DB_URL wins for all three
    db_url: str = ""
    model: str = ""  # empty: models:/<register.model_name>@champion
    max_funds: int = 32
    rate_per_min: int = 60
    max_bytes: int = 256 * 1024
    timeout_s: float = 60.0
    alias_check_s: float = 30.0
    batch_wait_ms: float = 20.0
    # signs the client portal's session cookies; without FUNDGRPO_PORTAL_SECRET a random one per process
    # (sessions then end when the server restarts)
    portal_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    portal_minutes: int = 30  # a portal session's life

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ApiSettings:
        env = dict(os.environ if env is None else env)
        get = lambda k, d, t=str: t(env[k]) if env.get(k) else d  # noqa: E731
        return cls(
            keys_file=Path(get("FUNDGRPO_API_KEYS", ".api_keys.json")),
            db_url=get("FUNDGRPO_DB_URL", cls.db_url),
            model=get("FUNDGRPO_API_MODEL", ""),
            max_funds=get("FUNDGRPO_API_MAX_FUNDS", cls.max_funds, int),
            rate_per_min=get("FUNDGRPO_API_RATE_PER_MIN", cls.rate_per_min, int),
            max_bytes=get("FUNDGRPO_API_MAX_BYTES", cls.max_bytes, int),
            timeout_s=get("FUNDGRPO_API_TIMEOUT_S", cls.timeout_s, float),
            alias_check_s=get("FUNDGRPO_API_ALIAS_CHECK_S", cls.alias_check_s, float),
            batch_wait_ms=get("FUNDGRPO_API_BATCH_WAIT_MS", cls.batch_wait_ms, float),
            portal_secret=get("FUNDGRPO_PORTAL_SECRET", secrets.token_urlsafe(32)),
            portal_minutes=get("FUNDGRPO_PORTAL_MINUTES", cls.portal_minutes, int),
        )
