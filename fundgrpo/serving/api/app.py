"""The FastAPI application: start-up and shut-down, the offline /docs, body limits and the access
log; the endpoints are `routes.router`."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import math
import time
from contextlib import asynccontextmanager
from pathlib import Path

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from fundgrpo.data import analyst_labels
from fundgrpo.params import load_params
from fundgrpo.serving.api import portal, ratings, routes
from fundgrpo.serving.api.evaluator import Evaluator
from fundgrpo.serving.api.keys import KeyRing, hash_key
from fundgrpo.serving.api.limits import RateLimiter
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store

ACCESS = logging.getLogger("fundgrpo.serving.api.access")
# Swagger UI 5's assets, as the fastapi-offline wheel ships them (its app factory is not used)
_OFFLINE = importlib.util.find_spec("fastapi_offline")
SWAGGER_UI = str(Path(_OFFLINE.origin).parent / "static") if _OFFLINE and _OFFLINE.origin else ""


def create_app(root: Path = Path("."), settings: ApiSettings | None = None):

    settings = settings or ApiSettings.from_env()
    root = Path(root).resolve()

    @asynccontextmanager
    async def lifespan(app):
        api = app.state  # what the endpoints share (fundgrpo/serving/api/routes.py)
        api.root, api.settings, api.load_error = root, settings, None
        api.store = Store(store_url(root, settings))
        api.keys = KeyRing(settings.keys_file if settings.keys_file.is_absolute() else root / settings.keys_file)
        api.limiter = RateLimiter(settings.rate_per_min)
        evaluator = Evaluator(root, settings)
        evaluator.queue = asyncio.Queue()
        api.evaluator = evaluator
        worker = asyncio.create_task(evaluator.batcher())
        try:
            await asyncio.get_running_loop().run_in_executor(None, evaluator.serving)
        except Exception as err:  # noqa: BLE001 - no model yet: /readyz says so, requests get 503
            api.load_error = str(err)
        yield
        # stopping: no new work, the queued requests fail at once (503), the one generating finishes
        # within its timeout (uvicorn waits timeout_graceful_shutdown for it)
        evaluator.closing = True
        evaluator.fail_waiting("the server is stopping")
        worker.cancel()
        evaluator.worker.shutdown(wait=False, cancel_futures=True)

    # /docs from local assets: FastAPI's default page loads Swagger UI from a CDN, blank offline
    app = FastAPI(title="fund-grpo evaluations", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.mount("/docs-assets", StaticFiles(directory=SWAGGER_UI), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs():
        return get_swagger_ui_html(
            openapi_url=app.openapi_url,
            title=f"{app.title} - docs",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon.png",
        )

    @app.middleware("http")
    async def limits_and_access_log(request: Request, call_next):
        started = time.perf_counter()
        response = await within_limit(request, call_next, settings.max_bytes)
        if 400 <= response.status_code < 500 and not getattr(request.state, "audited", False):
            await run_in_threadpool(audit_refusal, request, response.status_code)
        ACCESS.info(access_line(request, response.status_code, started))
        return response

    @app.exception_handler(RequestValidationError)
    async def refused(request: Request, err: RequestValidationError):
        # FastAPI's own handler echoes each bad input, and a NaN or Infinity sent in a body made the
        # refusal itself unserialisable (a 500): the same list of errors, its non-finite inputs as text
        return JSONResponse({"detail": json_safe(jsonable_encoder(err.errors()))}, status_code=422)

    @app.exception_handler(sa.exc.OperationalError)
    async def store_unreachable(request: Request, err: Exception):
        # the database is down or locked past its timeout: nothing was written, the client may retry
        return JSONResponse(
            {"detail": f"the store is unreachable: {str(err).splitlines()[0][:200]}"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    app.include_router(routes.router)
    app.include_router(ratings.router)
    app.include_router(portal.router)
    return app


async def within_limit(request: Request, call_next, max_bytes: int):
    """The endpoint's response, or 413 for a body over `max_bytes`: a stated length is checked before
    reading, a streamed (chunked) body is read up to the limit and refused beyond it."""
    too_big = JSONResponse({"detail": f"request body over {max_bytes} bytes"}, status_code=413)
    length = request.headers.get("content-length")
    if length and (not length.isdigit() or int(length) > max_bytes):
        return too_big
    if not length and request.method in ("POST", "PUT", "PATCH"):
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                return too_big
        request._body = bytes(body)  # what the endpoint reads (Starlette caches the body here)
    return await call_next(request)


def access_line(request: Request, status: int, started: float) -> str:
    """One JSON line of the access log: the request, its answer, its time and the key's owner (never the key)."""
    return json.dumps(
        {
            "method": request.method,
            "path": request.url.path,
            "status": status,
            "ms": round((time.perf_counter() - started) * 1000, 1),
            "key": getattr(request.state, "key_name", None),
        }
    )


def audit_refusal(request: Request, status: int) -> None:
    """The audit row of a refused request that its route did not audit: who (the key's name; "unknown
    key" with the first digits of its hash, never the key; "anonymous"), what and from where."""
    key = request.headers.get("x-api-key")
    entry = request.app.state.keys.get(hash_key(key)) if key else None  # refused before the key was read (413)
    actor = getattr(request.state, "key_name", None) or (entry or {}).get("name")
    detail = {"method": request.method, "path": request.url.path, "status": status,
              "from": request.client.host if request.client else None}  # fmt: skip
    if actor is None and key:
        actor, detail["key_hash"] = "unknown key", hash_key(key)[:12]
    try:
        request.app.state.store.log(actor or "anonymous", "refused", None, detail)
    except sa.exc.OperationalError as err:  # the store is down: the refusal stands, the access log keeps it
        why = str(err).splitlines()[0]
        ACCESS.warning(json.dumps({**detail, "actor": actor or "anonymous", "audit": f"not written: {why}"}))


def json_safe(value):
    """`value` with every non-finite float as text, so that it serialises as strict JSON.

    >>> json_safe([{"input": float("nan"), "loc": ["body", "funds", 0]}, float("-inf"), 1.5])
    [{'input': 'nan', 'loc': ['body', 'funds', 0]}, '-inf', 1.5]
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def store_url(root: Path, settings: ApiSettings) -> str:
    """The decision store: the settings' URL when given (FUNDGRPO_DB_URL), else params.yaml's
    `decisions.store_url` under `root`: one store for the API, the `decisions` stage and the dashboard."""
    if settings.db_url:
        return settings.db_url
    return analyst_labels.store_url(load_params(root / "params.yaml").decisions.store_url, root)
