"""Per-key request rate limit."""

from __future__ import annotations

import threading
import time
from collections import deque


class RateLimiter:
    """At most `per_min` requests per key in any 60-second window.

    >>> r = RateLimiter(2); [r.allow("k", now=t) for t in (0, 1, 2, 61)]
    [True, True, False, True]
    """

    def __init__(self, per_min: int) -> None:
        self.per_min, self.lock = per_min, threading.Lock()
        self.seen: dict[str, deque[float]] = {}

    def allow(self, key: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self.lock:
            q = self.seen.setdefault(key, deque())
            while q and q[0] <= now - 60:
                q.popleft()
            if len(q) >= self.per_min:
                return False
            q.append(now)
            return True
