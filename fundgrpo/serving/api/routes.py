"""The API's endpoints, one router: evaluations, decisions, the review queue and page, the audit log,
the model card, health. What they share (the store, the key ring, the rate limiter, the evaluator,
the settings) lives on `app.state`, set by `app.create_app`'s start-up; `need(scope)` is the key check.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path as FilePath
from typing import Any

import pandas as pd
from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import APIKeyHeader

from fundgrpo.data import identity
from fundgrpo.data.reading import IngestError
from fundgrpo.evaluation.story import served_words
from fundgrpo.methodology.compiler import described
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving import review
from fundgrpo.serving.api import review_page, schemas
from fundgrpo.serving.api.evaluator import Evaluator
from fundgrpo.serving.api.keys import hash_key
from fundgrpo.serving.api.schemas import DecisionRequest, EvaluationRequest
from fundgrpo.serving.api.store import Conflict, Store

# Every refusal is {"detail": "..."} naming the problem (422 from validation carries FastAPI's list).
PROBLEMS: dict = {code: {"model": schemas.Problem, "description": what} for code, what in (
    (401, "no API key, or an unknown one"), (403, "the key lacks the scope"), (404, "not found"),
    (409, "decided since the decision you saw"), (413, "request body too large"),
    (429, "over the key's rate"), (503, "no model to serve, the store unreachable, or stopping"),
)}  # fmt: skip

router = APIRouter()
header = APIKeyHeader(name="X-API-Key", auto_error=False)


def documented(model, code: int = 200, also: tuple[int, ...] = ()) -> dict:
    """Route arguments that document the answer's shape in /docs without filtering the answer."""
    responses = {**PROBLEMS, code: {"model": model}, **{c: {"model": model} for c in also}}
    return {"response_model": None, "responses": responses}


def audit(request: Request, actor: str, action: str, share_class_id: str | None, detail: dict) -> None:
    """An audit row for this request (the access middleware then adds no refusal row of its own)."""
    request.app.state.store.log(actor, action, share_class_id, detail)
    request.state.audited = True


def need(scope: str):
    def check(request: Request, key: str | None = Depends(header)) -> str:
        api = request.app.state
        if not key:
            raise HTTPException(401, "no API key (send X-API-Key)", headers={"WWW-Authenticate": "API-Key"})
        entry = api.keys.get(hash_key(key))
        if entry is None:
            raise HTTPException(401, "unknown API key", headers={"WWW-Authenticate": "API-Key"})
        request.state.key_name = entry["name"]
        request.state.key = entry
        if scope not in entry["scopes"]:
            if scope in ("review", "publish") or entry.get("client"):  # refused decisions, and every client attempt
                why = f"no {scope} scope" + (f" (client {entry['client']})" if entry.get("client") else "")
                audit(request, entry["name"], "refused", None, {"path": request.url.path, "why": why})
            raise HTTPException(403, f"this key lacks the {scope!r} scope")
        if not api.limiter.allow(entry["name"]):
            raise HTTPException(
                429, f"over {api.settings.rate_per_min} requests a minute for this key", headers={"Retry-After": "60"}
            )
        return entry["name"]

    return check


@router.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz", **documented(schemas.Ready, also=(503,)))
def readyz(request: Request):
    api = request.app.state
    evaluator: Evaluator | None = getattr(api, "evaluator", None)
    current = evaluator.current if evaluator is not None else None
    ok = current is not None and api.store.ping()
    error = getattr(api, "load_error", None)
    stuck = evaluator.stuck_for() if evaluator is not None else 0.0
    if ok and stuck > 5.0:  # a generation past its timeout and not yet stopped: the queue is stuck
        ok, error = False, f"generation running {stuck:.0f} s past its {api.settings.timeout_s:g} s timeout"
    body = {"ready": ok, "model_version": current.version if ok and current is not None else None, "error": error}
    return JSONResponse(body, status_code=200 if ok else 503)


@router.post("/v1/evaluations", **documented(schemas.Evaluations))
async def post_evaluations(request: Request, body: EvaluationRequest, _: str = Depends(need("evaluate"))) -> dict:
    api = request.app.state
    if len(body.funds) > api.settings.max_funds:
        raise HTTPException(422, f"funds: at most {api.settings.max_funds} per request, got {len(body.funds)}")
    ids = [f.share_class_id for f in body.funds]  # type: ignore[attr-defined]  # Fund is built at import
    if len(set(ids)) != len(ids):
        raise HTTPException(422, "funds: share_class_id repeats within the request")
    evaluator: Evaluator = api.evaluator
    funds = [f.model_dump() for f in body.funds]  # type: ignore[attr-defined]  # Fund is built at import
    clash = identity.conflicts(pd.DataFrame(funds).drop(columns="documents"), evaluator.reference, "funds")
    if clash:  # another fund's id: scored under it, this fund would replace that one among the peers
        raise HTTPException(422, clash)
    try:  # checked before queueing: the client hears which document of which fund, not a 500
        evaluator.posted(funds)
    except IngestError as err:
        raise HTTPException(422, str(err)) from None
    if evaluator.current is None:  # none at start-up: try again, the alias may have been set since
        try:
            await asyncio.get_running_loop().run_in_executor(None, lambda: evaluator.serving(force=True))
            api.load_error = None
        except Exception as err:  # noqa: BLE001 - the reason goes to the client
            api.load_error = str(err)
            raise HTTPException(503, f"no model to serve: {err}") from None
    try:
        version, rows = await evaluator.evaluate(funds)
    except IngestError as err:  # what needs the stored documents to see (a document id already stored)
        raise HTTPException(422, str(err)) from None
    except asyncio.TimeoutError:
        raise HTTPException(504, f"generation took over {api.settings.timeout_s} s") from None
    except RuntimeError as err:
        if "stopping" not in str(err):
            raise
        raise HTTPException(503, "the server is stopping: try again", headers={"Retry-After": "5"}) from None
    api.store.add(rows, version)
    return {"model_version": version, "evaluations": rows}


@router.get("/v1/evaluations/{share_class_id}", **documented(schemas.StoredEvaluation))
def get_evaluation(
    request: Request,
    share_class_id: str = Path(..., max_length=schemas.MAX_TEXT["share_class_id"], pattern=schemas.NO_NUL),
    _: str = Depends(need("read")),
) -> dict:
    api = request.app.state
    found = api.store.latest(share_class_id)
    if found is None:
        raise HTTPException(404, f"no stored evaluation for share class {share_class_id!r}")
    return found


@router.post("/v1/decisions", status_code=201, **documented(schemas.Decision, 201))
def post_decision(request: Request, body: DecisionRequest, analyst: str = Depends(need("review"))) -> dict:
    api = request.app.state
    store: Store = api.store
    grades = api.evaluator.methodology.grades
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


@router.get("/v1/decisions", **documented(schemas.Decisions))
def get_decisions(
    request: Request,
    share_class_id: str | None = Query(None, max_length=100, pattern=schemas.NO_NUL),
    _: str = Depends(need("read")),
):
    api = request.app.state
    return {"decisions": api.store.list_decisions(share_class_id)}


@router.get("/v1/review-queue", **documented(schemas.ReviewQueue))
def get_review_queue(request: Request, limit: int = Query(100, ge=1, le=1000), _: str = Depends(need("read"))) -> dict:
    api = request.app.state
    evaluator: Evaluator = api.evaluator
    rule = evaluator.params.evaluate
    items = review.queue(api.store.undecided(), rule, evaluator.known)
    return {
        "grades": evaluator.methodology.grades,
        "rule": {"review_below": rule.review_below, "disagree_by": rule.disagree_by},
        "order": "invalid answers first, then confidence from the lowest, then the largest disagreement",
        "total": len(items),
        "items": items[:limit],
    }


# Every page the API serves (the analysts' review page, the client portal and its reports): scripts
# and styles from the API alone (inline styles allowed), charts as data: images, never in a frame,
# never cached (a portal page holds a client's ratings).
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

# the analysts' page: static; its data and decisions go through the endpoints above with the
# analyst's key (review_page.py says why the key stays in the page)


@router.get("/review", include_in_schema=False)
def review_page_html(request: Request):
    api = request.app.state
    language = api.evaluator.methodology.language
    return HTMLResponse(review_page.page(language), headers=PAGE_HEADERS)


@router.get("/review.js", include_in_schema=False)
def review_page_js():
    return Response(review_page.SCRIPT, media_type="application/javascript", headers=PAGE_HEADERS)


@router.get("/v1/audit", **documented(schemas.Audit))
def get_audit(request: Request, _: str = Depends(need("review"))) -> dict:
    api = request.app.state
    return {"audit": api.store.audit_log()}


@router.get("/v1/model", **documented(schemas.ModelCard))
def get_model(request: Request, _: str = Depends(need("read"))) -> dict:
    api = request.app.state
    evaluator: Evaluator = api.evaluator
    if evaluator.current is None:
        raise HTTPException(503, "no model is being served")
    return model_card(api.root, evaluator)


def model_card(root: FilePath, evaluator: Evaluator) -> dict:
    """The serving version, its backtest metrics and the gate's decision for it (the record logged
    with its MLflow run; metrics/register.json only when it is that run's), and `note` when the
    version served is not the one the alias names."""
    assert evaluator.current is not None  # get_model answers 503 before: no model is served
    version = evaluator.current.version
    card: dict[str, Any] = {
        "model_version": version,
        "target": evaluator.target,
        "note": evaluator.note,
        "serves": served_words(evaluator.current.rule, evaluator.methodology.language),
        "methodology": described(evaluator.methodology),
    }
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
        gate = mlflow_registry.gate_record(client, name, number, evaluator.gate_records)
        card["gate"] = gate.as_dict() if gate is not None else None
    decision = root / evaluator.params.register.decision
    if decision.exists() and run_id is not None:
        d = json.loads(decision.read_text())
        if d.get("run_id") == run_id:  # the file is the last registration's: by run, not version number
            card["decision"] = d
    return card
