"""Load test of the REST API on loopback: p50/p95 latency and throughput, single and batched.

    python benchmarks/time/api_load.py ROOT [--model FOLDER] [--requests 40] [--concurrency 4] [--label tiny] \\
        [--hostile] [--out benchmarks/time/api_load.md]

ROOT is a workspace after `dvc repro` (params.yaml, data/validated, data/schema, models/policy).
A real uvicorn server is started on a free loopback port with a fresh key and a SQLite store in a
temporary folder; a fixed number of requests is sent (bounded: it stops by itself), first one fund
per request, then `--batch` funds per request. Every response must be 200 and every evaluation
stored; the figures are appended to --out as a Markdown table row per mode, with the command.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def funds_like(reference, n: int, offset: int) -> list[dict]:
    import pandas as pd

    from fundgrpo.data.canonical import BY_NAME, COLUMNS

    out = []
    for i in range(n):
        row = reference.iloc[(offset + i) % len(reference)]
        f = {c.name: (None if pd.isna(row.get(c.name)) else row.get(c.name)) for c in COLUMNS if c.name in reference}
        f = {
            k: (v if BY_NAME[k].kind in ("id", "text") or v is None else (int(v) if k == "expert_grade" else float(v)))
            for k, v in f.items()
        }
        out.append({**f, "share_class_id": f"LOAD-{offset + i}", "fund_id": f"LOADF-{offset + i}"})
    return out


class Hostile(threading.Thread):
    """One client that streams bodies twice the size limit, 16 KB every 50 ms (no Content-Length),
    over and over, while the normal clients run: the server must refuse it (413) without stalling them."""

    def __init__(self, url: str, key: str, limit: int) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.limit = url, key, limit
        self.halt = threading.Event()
        self.statuses: list[int] = []

    def body(self):
        sent = 0
        while sent < 2 * self.limit and not self.halt.is_set():
            chunk = b"x" * 16384
            sent += len(chunk)
            time.sleep(0.05)
            yield chunk

    def run(self) -> None:
        import httpx

        with httpx.Client(timeout=120, headers={"X-API-Key": self.key, "Content-Type": "application/json"}) as c:
            while not self.halt.is_set():
                try:
                    self.statuses.append(c.post(self.url, content=self.body()).status_code)
                except httpx.HTTPError:
                    self.statuses.append(0)  # the server closed the stream: refused too

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=120)

    def summary(self) -> str:
        counts = {s: self.statuses.count(s) for s in sorted(set(self.statuses))}
        return "its answers: " + ", ".join(f"{n}× {s or 'closed'}" for s, n in counts.items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--model", default=None, help="a model folder (default: ROOT/models/policy)")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--label", default="tiny")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "time" / "api_load.md")
    ap.add_argument(
        "--hostile",
        action="store_true",
        help="a third mode: the single requests again, beside one client that streams oversized bodies slowly",
    )
    args = ap.parse_args()

    import httpx
    import pandas as pd
    import uvicorn

    from fundgrpo.serving.api.app import create_app
    from fundgrpo.serving.api.keys import add_key
    from fundgrpo.serving.api.settings import ApiSettings

    root = args.root.resolve()
    scratch = Path(tempfile.mkdtemp(prefix="api-load-"))
    key = add_key(scratch / "keys.json", "load", ["read", "evaluate"])
    settings = ApiSettings(
        keys_file=scratch / "keys.json",
        db_url=f"sqlite:///{scratch}/evaluations.db",
        model=str(args.model or root / "models/policy"),
        max_funds=max(args.batch, 1),
        rate_per_min=100000,
        max_bytes=ApiSettings.max_bytes,  # the default limit (256 KB): a batch of funds is a few KB
        timeout_s=600,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(root, settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while not server.started:  # bounded: a server that fails to start ends the run
        if not thread.is_alive() or time.monotonic() > deadline:
            sys.exit("the API did not start (its error is above)")
        time.sleep(0.1)
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    url = f"http://127.0.0.1:{port}/v1/evaluations"
    rows = []
    try:
        with httpx.Client(timeout=600, headers={"X-API-Key": key}) as client:
            client.post(url, json={"funds": funds_like(reference, 1, 10**6)})  # warm-up, not timed
            modes = [("single", 1), (f"batch of {args.batch}", args.batch)]
            if args.hostile:
                modes.append(("single, beside a slow oversized client", 1))
            for base, (mode, per) in enumerate(modes):
                base *= 100000  # each mode its own share-class ids
                latencies, statuses = [], []
                hostile = Hostile(url, key, settings.max_bytes) if "oversized" in mode else None

                def one(i: int) -> None:
                    started = time.perf_counter()
                    r = client.post(url, json={"funds": funds_like(reference, per, base + i * per)})
                    latencies.append(time.perf_counter() - started)
                    statuses.append(r.status_code)

                started = time.perf_counter()
                if hostile:
                    hostile.start()
                with ThreadPoolExecutor(args.concurrency) as pool:
                    list(pool.map(one, range(args.requests)))
                wall = time.perf_counter() - started
                if hostile:
                    hostile.stop()
                stored = sum(
                    1
                    for i in range(args.requests * per)
                    if client.get(f"http://127.0.0.1:{port}/v1/evaluations/LOAD-{base + i}").status_code == 200
                )
                q = statistics.quantiles(latencies, n=20)
                rows.append(
                    {
                        "model": args.label,
                        "mode": mode,
                        "requests": args.requests,
                        "concurrency": args.concurrency,
                        "p50_s": round(statistics.median(latencies), 3),
                        "p95_s": round(q[18], 3),
                        "funds_per_s": round(args.requests * per / wall, 2),
                        "non_200": sum(s != 200 for s in statuses),
                        "stored": f"{stored}/{args.requests * per}",
                    }
                )
                if hostile:  # what the hostile client got: refusals, never a stalled server
                    rows[-1]["mode"] += f" ({hostile.summary()})"
                print(json.dumps(rows[-1]), flush=True)
    finally:
        server.should_exit = True
    command = (
        f"python benchmarks/time/api_load.py ROOT --requests {args.requests} --concurrency {args.concurrency} "
        f"--batch {args.batch} --label {args.label}" + (" --hostile" if args.hostile else "")
    )
    new = not args.out.exists()
    with args.out.open("a", encoding="utf-8") as f:
        if new:
            f.write(
                "# REST API load test (loopback, 2 CPU cores)\n\n"
                "Generated by `benchmarks/time/api_load.py`; one row per run and mode.\n\n"
                "| model | mode | requests | concurrency | p50 s | p95 s | funds/s | non-200 | stored | command |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n"
            )
        for r in rows:
            cells = [r[k] for k in ("model", "mode", "requests", "concurrency", "p50_s", "p95_s", "funds_per_s")]
            cells += [r["non_200"], r["stored"], f"`{command}`"]
            f.write("| " + " | ".join(str(c) for c in cells) + " |\n")
    return 0 if all(r["non_200"] == 0 for r in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
