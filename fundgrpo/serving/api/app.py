"""The FastAPI application: keys and scopes, limits, the access log, and the endpoints."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles

from fundgrpo.data import analyst_labels
from fundgrpo.params import load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving import review
from fundgrpo.serving.api import review_page, schemas
from fundgrpo.serving.api.evaluator import Evaluator
from fundgrpo.serving.api.keys import KeyRing, hash_key
from fundgrpo.serving.api.limits import RateLimiter
from fundgrpo.serving.api.schemas import DecisionRequest, EvaluationRequest
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Conflict, Store

ACCESS = logging.getLogger("fundgrpo.serving.api.access")
# Every refusal is {"detail": "..."} naming the problem (422 from validation carries FastAPI's list).
PROBLEMS: dict = {code: {"model": schemas.Problem, "description": what} for code, what in (
    (401, "no API key, or an unknown one"), (403, "the key lacks the scope"), (404, "not found"),
    (409, "decided since the decision you saw"), (413, "request body too large"),
    (429, "over the key's rate"), (503, "no model to serve, the store unreachable, or stopping"),
)}  # fmt: skip
# Swagger UI 5's assets, as the fastapi-offline wheel ships them (its app factory is not used)
_OFFLINE = importlib.util.find_spec("fastapi_offline")
SWAGGER_UI = str(Path(_OFFLINE.origin).parent / "static") if _OFFLINE and _OFFLINE.origin else ""


def documented(model, code: int = 200, also: tuple[int, ...] = ()) -> dict:
    """Route arguments that document the answer's shape in /docs without filtering the answer."""
    responses = {**PROBLEMS, code: {"model": model}, **{c: {"model": model} for c in also}}
    return {"response_model": None, "responses": responses}


def create_app(root: Path = Path("."), settings: ApiSettings | None = None):

    settings = settings or ApiSettings.from_env()
    root = Path(root).resolve()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app):
        state["store"] = Store(store_url(root, settings))
        state["keys"] = KeyRing(settings.keys_file if settings.keys_file.is_absolute() else root / settings.keys_file)
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
        # stopping: no new work, the queued requests fail at once (503), the one generating finishes
        # within its timeout (uvicorn waits timeout_graceful_shutdown for it)
        evaluator.closing = True
        evaluator.fail_waiting("the server is stopping")
        worker.cancel()

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

    header = APIKeyHeader(name="X-API-Key", auto_error=False)

    @app.middleware("http")
    async def limits_and_access_log(request: Request, call_next):
        started = time.perf_counter()
        length = request.headers.get("content-length")
        too_big = JSONResponse({"detail": f"request body over {settings.max_bytes} bytes"}, status_code=413)
        if length and (not length.isdigit() or int(length) > settings.max_bytes):
            response = too_big
        elif not length and request.method in ("POST", "PUT", "PATCH"):
            # a streamed (chunked) body states no length: read it up to the limit, refuse beyond
            body = bytearray()
            async for chunk in request.stream():
                body += chunk
                if len(body) > settings.max_bytes:
                    break
            if len(body) > settings.max_bytes:
                response = too_big
            else:
                request._body = bytes(body)  # what the endpoint reads (Starlette caches the body here)
                response = await call_next(request)
        else:
            response = await call_next(request)
        ACCESS.info(
            json.dumps(
                {
                    "method": request.method,
                    "path": request.url.path,
                    "status": response.status_code,
                    "ms": round((time.perf_counter() - started) * 1000, 1),
                    "key": getattr(request.state, "key_name", None),
                }
            )
        )
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
                if scope == "review":  # a refused decision is audited too
                    state["store"].log(
                        entry["name"], "refused", None, {"path": request.url.path, "why": "no review scope"}
                    )
                raise HTTPException(403, f"this key lacks the {scope!r} scope")
            if not state["limiter"].allow(entry["name"]):
                raise HTTPException(
                    429, f"over {settings.rate_per_min} requests a minute for this key", headers={"Retry-After": "60"}
                )
            return entry["name"]

        return check

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", **documented(schemas.Ready, also=(503,)))
    def readyz():
        evaluator = state.get("evaluator")
        ok = evaluator is not None and evaluator.current is not None and state["store"].ping()
        error = state.get("load_error")
        stuck = evaluator.stuck_for() if evaluator is not None else 0.0
        if ok and stuck > 5.0:  # a generation past its timeout and not yet stopped: the queue is stuck
            ok, error = False, f"generation running {stuck:.0f} s past its {settings.timeout_s:g} s timeout"
        body = {"ready": ok, "model_version": evaluator.current.version if ok else None, "error": error}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.post("/v1/evaluations", **documented(schemas.Evaluations))
    async def post_evaluations(body: EvaluationRequest, _: str = Depends(need("evaluate"))) -> dict:
        if len(body.funds) > settings.max_funds:
            raise HTTPException(422, f"funds: at most {settings.max_funds} per request, got {len(body.funds)}")
        ids = [f.share_class_id for f in body.funds]  # type: ignore[attr-defined]  # Fund is built at import
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
            version, rows = await evaluator.evaluate([f.model_dump() for f in body.funds])  # type: ignore[attr-defined]  # Fund is built at import
        except asyncio.TimeoutError:
            raise HTTPException(504, f"generation took over {settings.timeout_s} s") from None
        except RuntimeError as err:
            if "stopping" not in str(err):
                raise
            raise HTTPException(503, "the server is stopping: try again", headers={"Retry-After": "5"}) from None
        state["store"].add(rows, version)
        return {"model_version": version, "evaluations": rows}

    @app.get("/v1/evaluations/{share_class_id}", **documented(schemas.StoredEvaluation))
    def get_evaluation(share_class_id: str, _: str = Depends(need("read"))) -> dict:
        found = state["store"].latest(share_class_id)
        if found is None:
            raise HTTPException(404, f"no stored evaluation for share class {share_class_id!r}")
        return found

    @app.exception_handler(sa.exc.OperationalError)
    async def store_unreachable(request: Request, err: Exception):
        # the database is down or locked past its timeout: nothing was written, the client may retry
        return JSONResponse(
            {"detail": f"the store is unreachable: {str(err).splitlines()[0][:200]}"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @app.post("/v1/decisions", status_code=201, **documented(schemas.Decision, 201))
    def post_decision(body: DecisionRequest, analyst: str = Depends(need("review"))) -> dict:
        store: Store = state["store"]
        grades = state["evaluator"].rubric["grades"]
        if body.grade not in grades:
            raise HTTPException(422, f"grade: {body.grade} is not a grade of the methodology ({grades})")
        if body.evaluation_id is None:
            evaluation = store.latest(body.share_class_id)
            if evaluation is None:
                raise HTTPException(
                    404, f"share_class_id: no stored evaluation for {body.share_class_id!r} (evaluate it first)"
                )
        else:
            evaluation = store.evaluation(body.evaluation_id)
            if evaluation is None:
                raise HTTPException(404, f"evaluation_id: no stored evaluation {body.evaluation_id}")
            if evaluation["share_class_id"] != body.share_class_id:
                raise HTTPException(
                    422,
                    f"evaluation_id: evaluation {body.evaluation_id} is of share class "
                    f"{evaluation['share_class_id']!r}, not {body.share_class_id!r}",
                )
        if body.model_version is not None and body.model_version != evaluation["model_version"]:
            raise HTTPException(
                422,
                f"model_version: evaluation {evaluation['evaluation_id']} was made by "
                f"{evaluation['model_version']!r}, not {body.model_version!r}",
            )
        try:
            return store.decide(evaluation, body.grade, body.reason, analyst, body.based_on)
        except Conflict as err:
            store.log(analyst, "conflict", body.share_class_id, {"based_on": body.based_on, "latest": err.latest})
            raise HTTPException(
                409,
                f"based_on: {body.share_class_id!r} was decided since "
                f"{'you loaded it (you saw no decision)' if body.based_on is None else f'decision {body.based_on}'}: "
                f"{err}; reload it and decide again",
            ) from None

    @app.get("/v1/decisions", **documented(schemas.Decisions))
    def get_decisions(share_class_id: str | None = Query(None, max_length=100), _: str = Depends(need("read"))):
        return {"decisions": state["store"].list_decisions(share_class_id)}

    @app.get("/v1/review-queue", **documented(schemas.ReviewQueue))
    def get_review_queue(limit: int = Query(100, ge=1, le=1000), _: str = Depends(need("read"))) -> dict:
        evaluator: Evaluator = state["evaluator"]
        rule = evaluator.params.evaluate
        items = review.queue(state["store"].undecided(), rule, evaluator.known)
        return {
            "grades": evaluator.rubric["grades"],
            "rule": {"review_below": rule.review_below, "disagree_by": rule.disagree_by},
            "order": "invalid answers first, then confidence from the lowest, then the largest disagreement",
            "total": len(items),
            "items": items[:limit],
        }

    # the analysts' page: static; its data and decisions go through the endpoints above with the
    # analyst's key (review_page.py says why the key stays in the page)
    page_headers = {
        "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }

    @app.get("/review", include_in_schema=False)
    def review_page_html():
        language = state["evaluator"].rubric.get("language", "en")
        return HTMLResponse(review_page.page(language), headers=page_headers)

    @app.get("/review.js", include_in_schema=False)
    def review_page_js():
        return Response(review_page.SCRIPT, media_type="application/javascript", headers=page_headers)

    @app.get("/v1/audit", **documented(schemas.Audit))
    def get_audit(_: str = Depends(need("review"))) -> dict:
        return {"audit": state["store"].audit_log()}

    @app.get("/v1/model", **documented(schemas.ModelCard))
    def get_model(_: str = Depends(need("read"))) -> dict:
        evaluator: Evaluator = state["evaluator"]
        if evaluator.current is None:
            raise HTTPException(503, "no model is being served")
        return model_card(root, evaluator)

    return app


def store_url(root: Path, settings: ApiSettings) -> str:
    """The decision store: the settings' URL when given (FUNDGRPO_DB_URL), else params.yaml's
    `decisions.store_url` under `root`: one store for the API, the `decisions` stage and the dashboard."""
    if settings.db_url:
        return settings.db_url
    return analyst_labels.store_url(load_params(root / "params.yaml").decisions.store_url, root)


def model_card(root: Path, evaluator: Evaluator) -> dict:
    """The serving version, its backtest metrics and the gate's decision for it (the record logged
    with its MLflow run; metrics/register.json only when it is that run's), and `note` when the
    version served is not the one the alias names."""
    assert evaluator.current is not None  # get_model answers 503 before: no model is served
    version = evaluator.current.version
    card: dict[str, Any] = {"model_version": version, "target": evaluator.target, "note": evaluator.note}
    run_id = None
    if version.startswith("models:/"):
        from mlflow import MlflowClient

        client = MlflowClient(
            tracking_uri=mlflow_registry.local_uri(mlflow_registry.tracking_uri(evaluator.params.register), root)
        )
        name, number = version[len("models:/") :].split("/")
        mv = client.get_model_version(name, number)
        run = client.get_run(mv.run_id)
        run_id = mv.run_id
        card["aliases"] = list(mv.aliases)
        card["backtest"] = {k[len("backtest.") :]: v for k, v in run.data.metrics.items() if k.startswith("backtest.")}
        card["gate"] = mlflow_registry.gate_record(client, name, number, evaluator.gate_records)
    decision = root / evaluator.params.register.decision
    if decision.exists() and run_id is not None:
        d = json.loads(decision.read_text())
        if d.get("run_id") == run_id:  # the file is the last registration's: by run, not version number
            card["decision"] = d
    return card
