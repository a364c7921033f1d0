"""Published ratings: what the firm's reviewers publish and what its client firms read.

A reviewer (scope `publish`) publishes a share class's stored evaluation as served, or with another
grade and the reason (`POST /v1/publications`), or withdraws the rating (`POST /v1/withdrawals`);
each is a new immutable version naming the model version, the methodology and the reviewer. A client
firm's key (scope `ratings`) reads the latest version and the history of the share classes it is
entitled to (`GET /v1/ratings`, `/v1/ratings/{id}`, `/v1/ratings/{id}/history`); one it may not see
answers exactly as one that does not exist. The firm's keys with `read` see every share class. Every
read and every refusal is audited. A client never reaches a draft: the evaluations, the review queue,
the decisions, the audit and the model card need firm scopes.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Path, Request

from fundgrpo.methodology.compiler import Methodology, described
from fundgrpo.serving.api import schemas
from fundgrpo.serving.api.keys import CLIENT_SCOPE, hash_key
from fundgrpo.serving.api.routes import audit, documented, header, need
from fundgrpo.serving.api.schemas import PublicationRequest, WithdrawalRequest
from fundgrpo.serving.api.store import Conflict, Store

router = APIRouter()
SHARE_CLASS = Path(..., max_length=schemas.MAX_TEXT["share_class_id"], pattern=schemas.NO_NUL)


def grade_label(m: Methodology, grade: int | None) -> str | None:
    """What a grade means, in the methodology's language (its band's label)."""
    band = next((b for b in m.bands if b.grade == grade), None)
    return None if band is None else band.label.get(m.language) or band.label.get("en")


def peers(evidence: dict) -> dict | None:
    """The fund against its peers as its evaluation saw them (None for an evaluation stored without).

    >>> peers({"peers": 12, "percentiles": {"sharpe_3y": 85.0}})
    {'count': 12, 'percentiles': {'sharpe_3y': 85.0}}
    """
    return {"count": evidence["peers"], "percentiles": evidence["percentiles"]} if "percentiles" in evidence else None


def reader(request: Request, key: str | None = Depends(header)) -> set[str] | None:
    """The share classes this key may read ratings of: a client's entitlements, or None (all) for the
    firm's keys with `read`. Refusals as `need` answers them."""
    entry = request.app.state.keys.get(hash_key(key)) if key else None
    if entry is not None and entry.get("client"):
        need(CLIENT_SCOPE)(request, key)
        return set(entry["entitled"])
    need("read")(request, key)
    return None


def visible(request: Request, share_class_id: str, allowed: set[str] | None) -> list[dict]:
    """The versions of a rating this key may read, audited; a share class it may not see is 404, exactly
    as one never published."""
    api = request.app.state
    versions = api.store.rating_history(share_class_id) if allowed is None or share_class_id in allowed else []
    audit(request, request.state.key_name, "read_rating", share_class_id, {"found": bool(versions)})
    if not versions:
        raise HTTPException(404, f"no published rating for share class {share_class_id!r}")
    return versions


@router.get("/v1/ratings", **documented(schemas.Ratings))
def list_ratings(request: Request, allowed: set[str] | None = Depends(reader)) -> dict:
    api = request.app.state
    found = api.store.latest_ratings(allowed)
    api.store.log(request.state.key_name, "list_ratings", None, {"n": len(found)})
    return {"ratings": found}


@router.get("/v1/ratings/{share_class_id}", **documented(schemas.Rating))
def get_rating(request: Request, share_class_id: str = SHARE_CLASS, allowed: set[str] | None = Depends(reader)) -> dict:
    return visible(request, share_class_id, allowed)[-1]


@router.get("/v1/ratings/{share_class_id}/history", **documented(schemas.RatingHistory))
def get_history(
    request: Request, share_class_id: str = SHARE_CLASS, allowed: set[str] | None = Depends(reader)
) -> dict:
    return {"share_class_id": share_class_id, "versions": visible(request, share_class_id, allowed)}


@router.post("/v1/publications", status_code=201, **documented(schemas.Rating, 201))
def publish(request: Request, body: PublicationRequest, reviewer: str = Depends(need("publish"))) -> dict:
    api = request.app.state
    store: Store = api.store
    m: Methodology = api.evaluator.methodology
    evaluation = (
        store.latest(body.share_class_id) if body.evaluation_id is None else store.evaluation(body.evaluation_id)
    )
    if evaluation is None or evaluation["share_class_id"] != body.share_class_id:
        what = "evaluation_id" if body.evaluation_id is not None else "share_class_id"
        raise HTTPException(404, f"{what}: no stored evaluation of share class {body.share_class_id!r} to publish")
    grade = evaluation.get("grade") if body.grade is None else body.grade
    if grade not in m.grades:
        raise HTTPException(422, f"grade: {grade} is not a grade of the methodology ({m.grades}); give one")
    changed = grade != evaluation.get("grade")
    reason = (body.reason or "").strip() or None
    if changed and reason is None:
        raise HTTPException(
            422, f"reason: the grade {grade} is not the evaluation's ({evaluation.get('grade')}): say why"
        )
    published = {
        "grade_label": grade_label(m, grade),
        "reasoning": evaluation.get("reasoning"),
        "pillars": evaluation.get("pillars") or [],
        "note": reason if changed else None,
        "peers": peers(evaluation.get("evidence") or {}),
    }
    try:
        return store.publish(
            body.share_class_id, "published", grade, evaluation, methodology=described(m), reviewer=reviewer,
            reason=reason, published=published,
        )  # fmt: skip
    except Conflict:
        raise HTTPException(
            409, f"share_class_id: {body.share_class_id!r} was published at the same time; reload"
        ) from None


@router.post("/v1/withdrawals", status_code=201, **documented(schemas.Rating, 201))
def withdraw(request: Request, body: WithdrawalRequest, reviewer: str = Depends(need("publish"))) -> dict:
    api = request.app.state
    store: Store = api.store
    if not store.rating_history(body.share_class_id):
        raise HTTPException(404, f"share_class_id: {body.share_class_id!r} has no published rating to withdraw")
    published: dict = {"grade_label": None, "reasoning": None, "pillars": [], "note": body.reason.strip()}
    m: Methodology = api.evaluator.methodology
    try:
        return store.publish(
            body.share_class_id, "withdrawn", None, None, methodology=described(m), reviewer=reviewer,
            reason=body.reason, published=published,
        )  # fmt: skip
    except Conflict:
        raise HTTPException(409, f"share_class_id: {body.share_class_id!r} changed at the same time; reload") from None
