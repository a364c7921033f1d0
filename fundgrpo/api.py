"""REST API for fund evaluations (FastAPI; OpenAPI docs at /docs).

    python -m fundgrpo.api add-key NAME --scopes read,evaluate   # prints the key once, stores only its hash
    python -m fundgrpo.api serve [--host 127.0.0.1] [--port 8000]

Endpoints: `POST /v1/evaluations` (scope evaluate; 1..`max_funds` funds as canonical metrics),
`GET /v1/evaluations/{share_class_id}` (scope read; the latest stored), `GET /v1/model` (scope
read; the serving version, its backtest metrics and gate decision), `/healthz`, `/readyz`.
Clients send `X-API-Key`. No key or an unknown one: 401; a key without the scope: 403; over the
per-key rate: 429; a body over the size limit: 413; a bad field: 422 naming it; generation
over the time limit: 504.

The model is `models:/<register.model_name>@champion` unless FUNDGRPO_API_MODEL names another
URI or a folder. The alias is checked every `alias_check_s` seconds; when it moves, the new
version is loaded beside the old one and swapped in; requests already running finish on the
version they started with. Concurrent requests are batched for generation. Evaluations are
stored in a database: SQLite by default, PostgreSQL by URL.

Settings come from the environment only (keys never live in the repo):
  FUNDGRPO_API_KEYS        the hashed-keys file (default .api_keys.json; git-ignored)
  FUNDGRPO_DB_URL          sqlite:///evaluations.db | postgresql+psycopg://user@host/db ...
  FUNDGRPO_API_MODEL       a models:/ URI or a folder (default: the champion)
  FUNDGRPO_API_MAX_FUNDS   32    FUNDGRPO_API_RATE_PER_MIN 60   FUNDGRPO_API_MAX_BYTES 262144
  FUNDGRPO_API_TIMEOUT_S   60    FUNDGRPO_API_ALIAS_CHECK_S 30  FUNDGRPO_API_BATCH_WAIT_MS 20
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import secrets
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import pandas as pd
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, ConfigDict, Field, create_model

from fundgrpo.canonical import COLUMNS

SCOPES = ("read", "evaluate")
ACCESS = logging.getLogger("fundgrpo.api.access")


# --------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ApiSettings:
    keys_file: Path = Path(".api_keys.json")
    db_url: str = "sqlite:///evaluations.db"
    model: str = ""  # empty: models:/<register.model_name>@champion
    max_funds: int = 32
    rate_per_min: int = 60
    max_bytes: int = 256 * 1024
    timeout_s: float = 60.0
    alias_check_s: float = 30.0
    batch_wait_ms: float = 20.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ApiSettings:
        env = dict(os.environ if env is None else env)
        get = lambda k, d, t=str: t(env[k]) if env.get(k) else d  # noqa: E731
        return cls(
            keys_file=Path(get("FUNDGRPO_API_KEYS", ".api_keys.json")), db_url=get("FUNDGRPO_DB_URL", cls.db_url),
            model=get("FUNDGRPO_API_MODEL", ""), max_funds=get("FUNDGRPO_API_MAX_FUNDS", cls.max_funds, int),
            rate_per_min=get("FUNDGRPO_API_RATE_PER_MIN", cls.rate_per_min, int), max_bytes=get("FUNDGRPO_API_MAX_BYTES", cls.max_bytes, int),
            timeout_s=get("FUNDGRPO_API_TIMEOUT_S", cls.timeout_s, float), alias_check_s=get("FUNDGRPO_API_ALIAS_CHECK_S", cls.alias_check_s, float),
            batch_wait_ms=get("FUNDGRPO_API_BATCH_WAIT_MS", cls.batch_wait_ms, float),
        )


# ------------------------------------------------------------------------- keys


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
    return {k["sha256"]: {"name": k["name"], "scopes": set(k["scopes"])} for k in json.loads(keys_file.read_text())["keys"]}


class RateLimiter:
    """At most `per_min` requests per key in any 60-second window.

    >>> r = RateLimiter(2); [r.allow("k", now=t) for t in (0, 1, 2, 61)]
    [True, True, False, True]
    """

    def __init__(self, per_min: int) -> None:
        self.per_min, self.seen, self.lock = per_min, {}, threading.Lock()

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


# ------------------------------------------------------------------- requests

def _fund_field(c) -> tuple[Any, Any]:
    if c.kind in ("id", "text"):
        return (str, ...) if c.name in ("share_class_id", "category") else (Optional[str], None)
    if c.kind == "grade":
        return (Optional[int], Field(None, ge=int(c.low), le=int(c.high)))
    return (Optional[float], Field(None, ge=c.low, le=c.high, description=c.description))


# One fund as canonical metrics: ranges from fundgrpo/canonical.py, unknown fields refused.
Fund = create_model("Fund", __config__=ConfigDict(extra="forbid"), **{c.name: _fund_field(c) for c in COLUMNS})


class EvaluationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    funds: list[Fund] = Field(..., min_length=1)  # type: ignore[valid-type]


# ----------------------------------------------------------------------- store


class Store:
    """Evaluations in a database (SQLAlchemy Core): SQLite by default, PostgreSQL by URL."""

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        self.sa = sa
        self.engine = sa.create_engine(url, future=True, pool_pre_ping=True)
        meta = sa.MetaData()
        self.table = sa.Table(
            "evaluations", meta,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("share_class_id", sa.String(200), index=True, nullable=False),
            sa.Column("model_version", sa.String(200), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("evaluation", sa.JSON, nullable=False),
        )
        meta.create_all(self.engine)

    def add(self, rows: list[dict], version: str) -> None:
        now = datetime.now(timezone.utc)
        with self.engine.begin() as conn:
            conn.execute(self.table.insert(), [{"share_class_id": r["share_class_id"], "model_version": version, "created_at": now, "evaluation": r} for r in rows])

    def latest(self, share_class_id: str) -> dict | None:
        t = self.table
        with self.engine.connect() as conn:
            row = conn.execute(self.sa.select(t).where(t.c.share_class_id == share_class_id).order_by(t.c.id.desc()).limit(1)).mappings().first()
        if row is None:
            return None
        return {**row["evaluation"], "model_version": row["model_version"], "created_at": row["created_at"].isoformat()}

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(self.sa.text("SELECT 1"))
            return True
        except Exception:  # noqa: BLE001 - readiness reports any database failure as not ready
            return False


# ---------------------------------------------------------------------- models


@dataclass
class Loaded:
    """One servable model version: weights and tokenizer in memory, and where they came from."""

    version: str
    model: Any
    tokenizer: Any
    folder: Path
    scratch: Any = None  # keeps a downloaded registry copy alive while this version serves


class Evaluator:
    """The serving model (swapped when the alias moves), the rubric and the reference universe,
    and a micro-batcher that generates for concurrent requests together."""

    def __init__(self, root: Path, settings: ApiSettings) -> None:
        from fundgrpo.methodology import load_compiled
        from fundgrpo.params import load_params

        self.root, self.settings = root, settings
        self.params = load_params(root / "params.yaml")
        self.rubric, self.schema = load_compiled(root / self.params.methodology.out_dir)
        self.reference = pd.read_parquet(root / self.params.validate.out)
        self.target = settings.model or f"models:/{self.params.register.model_name}@champion"
        self.current: Loaded | None = None
        self.checked_at = 0.0
        self.swap_lock = threading.Lock()
        self.queue: asyncio.Queue | None = None

    # -- which version

    def _resolve(self) -> str:
        """The version string the target points at now (a folder is its own version)."""
        if not self.target.startswith("models:/"):
            return str(self.target)
        from mlflow import MlflowClient

        from fundgrpo import registry

        uri = registry.local_uri(registry.tracking_uri(self.params.register), self.root)
        name, _, alias = self.target[len("models:/"):].partition("@")
        version = registry.version_by_alias(MlflowClient(tracking_uri=uri), name, alias)  # AliasError says what to serve instead
        return f"models:/{name}/{version}"

    def _load(self, version: str) -> Loaded:
        from fundgrpo import modelling

        if not version.startswith("models:/"):
            model, tokenizer = modelling.load(version)
            return Loaded(version, model, tokenizer, Path(version))
        import mlflow

        from fundgrpo import registry

        mlflow.set_tracking_uri(registry.local_uri(registry.tracking_uri(self.params.register), self.root))
        scratch = tempfile.TemporaryDirectory(prefix="fundgrpo-api-")
        folder = registry.load_components(version, Path(scratch.name))
        model, tokenizer = modelling.load(folder)
        return Loaded(version, model, tokenizer, folder, scratch)

    def serving(self, force: bool = False) -> Loaded:
        """The version to answer with; re-resolves the alias every `alias_check_s` seconds."""
        now = time.monotonic()
        if self.current is not None and not force and now - self.checked_at < self.settings.alias_check_s:
            return self.current
        with self.swap_lock:
            if self.current is None or force or now - self.checked_at >= self.settings.alias_check_s:
                version = self._resolve()
                if self.current is None or version != self.current.version:
                    loaded = self._load(version)  # the old version keeps serving until this is ready
                    self.current = loaded
                    logging.getLogger("fundgrpo.api").info("serving %s", version)
                self.checked_at = time.monotonic()
        return self.current

    # -- answering

    def records(self, funds: list[dict]) -> list[dict]:
        from fundgrpo.champion import prompt_records
        from fundgrpo.evaluate import with_reference

        from fundgrpo.canonical import NUMERIC

        frame = pd.DataFrame(funds)
        for column in NUMERIC:  # None from JSON -> NaN, so peer percentiles see numbers
            if column in frame:
                frame[column] = pd.to_numeric(frame[column], errors="coerce")
        frame["expert_grade"] = frame["expert_grade"].astype("Int64") if "expert_grade" in frame else pd.NA
        if "fund_id" not in frame or frame["fund_id"].isna().any():
            frame["fund_id"] = frame.get("fund_id", pd.Series(index=frame.index, dtype=object)).fillna(frame["share_class_id"])
        by_id = {r["share_class_id"]: r for r in prompt_records(with_reference(frame, self.reference), self.rubric, self.params.prepare,
                                                            only=[str(f["share_class_id"]) for f in funds])}
        return [by_id[str(f["share_class_id"])] for f in funds]

    def generate(self, loaded: Loaded, records: list[dict]) -> list[dict]:
        from fundgrpo import modelling
        from fundgrpo.backtesting import predictions_from_texts

        texts = modelling.generate(loaded.model, loaded.tokenizer, [r["prompt"] for r in records],
                                   self.params.backtest.max_new_tokens, self.params.backtest.batch_size, desc="api")
        return predictions_from_texts(texts, self.rubric, self.schema)

    async def batcher(self) -> None:
        """Collect requests for `batch_wait_ms`, generate once per version, hand each its answers."""
        assert self.queue is not None
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            batch = [first]
            deadline = loop.time() + self.settings.batch_wait_ms / 1000
            while (left := deadline - loop.time()) > 0:
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), left))
                except asyncio.TimeoutError:
                    break
            by_version: dict[str, list] = {}
            for item in batch:
                by_version.setdefault(item[0].version, []).append(item)
            for items in by_version.values():
                loaded = items[0][0]
                records = [r for _, recs, _ in items for r in recs]
                try:
                    answers = await loop.run_in_executor(None, self.generate, loaded, records)
                except Exception as err:  # noqa: BLE001 - each waiting request gets the failure
                    for _, _, fut in items:
                        if not fut.done():
                            fut.set_exception(err)
                    continue
                start = 0
                for _, recs, fut in items:
                    if not fut.done():
                        fut.set_result(answers[start:start + len(recs)])
                    start += len(recs)

    async def evaluate(self, funds: list[dict]) -> tuple[str, list[dict]]:
        loop = asyncio.get_running_loop()
        loaded = await loop.run_in_executor(None, self.serving)  # pinned: a swap does not touch this request
        records = await loop.run_in_executor(None, self.records, funds)
        fut: asyncio.Future = loop.create_future()
        assert self.queue is not None
        await self.queue.put((loaded, records, fut))
        answers = await asyncio.wait_for(fut, self.settings.timeout_s)
        out = []
        for fund, record, p in zip(funds, records, answers):
            out.append({"share_class_id": record["share_class_id"], "fund_id": record["fund_id"], "category": record["category"],
                        "name": fund.get("name"), "grade": p["grade"], "score": p["score"], "reasoning": p["reasoning"],
                        "valid": p["valid"], "rule_grade": record["rule_grade"], "model_version": loaded.version})
        return loaded.version, out


# ------------------------------------------------------------------------- app


def create_app(root: Path = Path("."), settings: ApiSettings | None = None):
    from contextlib import asynccontextmanager

    settings = settings or ApiSettings.from_env()
    root = Path(root).resolve()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app):
        state["store"] = Store(settings.db_url)
        state["keys"] = load_keys(settings.keys_file if settings.keys_file.is_absolute() else root / settings.keys_file)
        state["limiter"] = RateLimiter(settings.rate_per_min)
        evaluator = Evaluator(root, settings)
        evaluator.queue = asyncio.Queue()
        state["evaluator"] = evaluator
        worker = asyncio.create_task(evaluator.batcher())
        try:
            await asyncio.get_running_loop().run_in_executor(None, evaluator.serving)
        except Exception as err:  # noqa: BLE001 - no model yet: /readyz says so, requests get 503
            state["load_error"] = str(err)
        yield
        worker.cancel()

    app = FastAPI(title="fund-grpo evaluations", version="1", lifespan=lifespan)
    header = APIKeyHeader(name="X-API-Key", auto_error=False)

    @app.middleware("http")
    async def limits_and_access_log(request: Request, call_next):
        started = time.perf_counter()
        length = request.headers.get("content-length")
        if length and int(length) > settings.max_bytes:
            response = JSONResponse({"detail": f"request body over {settings.max_bytes} bytes"}, status_code=413)
        else:
            response = await call_next(request)
        ACCESS.info(json.dumps({"method": request.method, "path": request.url.path, "status": response.status_code,
                                "ms": round((time.perf_counter() - started) * 1000, 1), "key": getattr(request.state, "key_name", None)}))
        return response

    def need(scope: str):
        def check(request: Request, key: str | None = Depends(header)) -> str:
            if not key:
                raise HTTPException(401, "no API key (send X-API-Key)", headers={"WWW-Authenticate": "API-Key"})
            entry = state["keys"].get(hash_key(key))
            if entry is None:
                raise HTTPException(401, "unknown API key", headers={"WWW-Authenticate": "API-Key"})
            request.state.key_name = entry["name"]
            if scope not in entry["scopes"]:
                raise HTTPException(403, f"this key lacks the {scope!r} scope")
            if not state["limiter"].allow(entry["name"]):
                raise HTTPException(429, f"over {settings.rate_per_min} requests a minute for this key", headers={"Retry-After": "60"})
            return entry["name"]
        return check

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz():
        evaluator = state.get("evaluator")
        ok = evaluator is not None and evaluator.current is not None and state["store"].ping()
        body = {"ready": ok, "model_version": evaluator.current.version if ok else None, "error": state.get("load_error")}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.post("/v1/evaluations")
    async def post_evaluations(body: EvaluationRequest, _: str = Depends(need("evaluate"))) -> dict:
        if len(body.funds) > settings.max_funds:
            raise HTTPException(422, f"funds: at most {settings.max_funds} per request, got {len(body.funds)}")
        ids = [f.share_class_id for f in body.funds]
        if len(set(ids)) != len(ids):
            raise HTTPException(422, "funds: share_class_id repeats within the request")
        evaluator: Evaluator = state["evaluator"]
        if evaluator.current is None:  # none at start-up: try again, the alias may have been set since
            try:
                await asyncio.get_running_loop().run_in_executor(None, lambda: evaluator.serving(force=True))
                state.pop("load_error", None)
            except Exception as err:  # noqa: BLE001 - the reason goes to the client
                state["load_error"] = str(err)
                raise HTTPException(503, f"no model to serve: {err}") from None
        try:
            version, rows = await evaluator.evaluate([f.model_dump() for f in body.funds])
        except asyncio.TimeoutError:
            raise HTTPException(504, f"generation took over {settings.timeout_s} s") from None
        state["store"].add(rows, version)
        return {"model_version": version, "evaluations": rows}

    @app.get("/v1/evaluations/{share_class_id}")
    def get_evaluation(share_class_id: str, _: str = Depends(need("read"))) -> dict:
        found = state["store"].latest(share_class_id)
        if found is None:
            raise HTTPException(404, f"no stored evaluation for share class {share_class_id!r}")
        return found

    @app.get("/v1/model")
    def get_model(_: str = Depends(need("read"))) -> dict:
        evaluator: Evaluator = state["evaluator"]
        if evaluator.current is None:
            raise HTTPException(503, "no model is being served")
        return model_card(root, evaluator)

    return app


def model_card(root: Path, evaluator: Evaluator) -> dict:
    """The serving version, its backtest metrics and gate decision (MLflow run of a registered
    version; metrics/register.json for the same version)."""
    version = evaluator.current.version
    card: dict[str, Any] = {"model_version": version, "target": evaluator.target}
    if version.startswith("models:/"):
        from mlflow import MlflowClient

        from fundgrpo import registry

        client = MlflowClient(tracking_uri=registry.local_uri(registry.tracking_uri(evaluator.params.register), root))
        name, number = version[len("models:/"):].split("/")
        mv = client.get_model_version(name, number)
        run = client.get_run(mv.run_id)
        card["aliases"] = list(mv.aliases)
        card["backtest"] = {k[len("backtest."):]: v for k, v in run.data.metrics.items() if k.startswith("backtest.")}
        card["gate"] = {k[len("gate."):]: v for k, v in run.data.tags.items() if k.startswith("gate.")}
    decision = root / evaluator.params.register.decision
    if decision.exists():
        d = json.loads(decision.read_text())
        if version.endswith(f"/{d.get('version')}"):
            card["decision"] = d
    return card


# ------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    from fundgrpo.cli import offline

    ap = argparse.ArgumentParser(prog="python -m fundgrpo.api", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    k = sub.add_parser("add-key", help="create an API key (printed once; only its hash is stored)")
    k.add_argument("name")
    k.add_argument("--scopes", default="read,evaluate")
    s = sub.add_parser("serve", help="serve the API with uvicorn")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    args = ap.parse_args(argv)
    settings = ApiSettings.from_env()
    if args.command == "add-key":
        try:
            key = add_key(settings.keys_file, args.name, [x.strip() for x in args.scopes.split(",") if x.strip()])
        except ValueError as err:
            print(f"add-key failed: {err}", file=sys.stderr)
            return 1
        print(key)
        print(f"(stored as a SHA-256 hash in {settings.keys_file}; the key is not shown again)", file=sys.stderr)
        return 0
    import uvicorn

    offline()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    uvicorn.run(create_app(Path("."), settings), host=args.host, port=args.port, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
