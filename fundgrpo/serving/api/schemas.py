"""Request bodies (one fund as canonical metrics, ranges from the canonical table, unknown fields
refused) and the answers' shapes, which /docs shows (the tests check every answer against them)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from fundgrpo.data.canonical import COLUMNS

# Text fields are capped: a 200 KB fund name once held every later evaluation behind it (its prompt
# is generated token by token). Ids and categories are short in every export seen; names under 200.
MAX_TEXT = {"share_class_id": 100, "fund_id": 100, "category": 200, "name": 300}
# Ids the store hands out are 32-bit integers (PostgreSQL's INTEGER; SQLite's is wider): a larger one
# names no evaluation or decision, and is refused as such instead of overflowing the database driver.
MAX_ID = 2**31 - 1
# Text never holds a NUL character: PostgreSQL refuses it in any text column (a 500 from the driver).
NO_NUL = r"^[^\x00]*$"


def _fund_field(c) -> tuple[Any, Any]:
    if c.kind in ("id", "text"):
        cap = MAX_TEXT.get(c.name, 300)
        if c.name in ("share_class_id", "category"):
            return (str, Field(..., min_length=1, max_length=cap, pattern=NO_NUL))
        return (Optional[str], Field(None, max_length=cap, pattern=NO_NUL))
    if c.kind == "grade":
        return (Optional[int], Field(None, ge=int(c.low), le=int(c.high)))
    # NaN and Infinity parse from JSON bodies; a metric must be a finite number (or null: missing)
    return (Optional[float], Field(None, ge=c.low, le=c.high, allow_inf_nan=False, description=c.description))


MAX_DOCUMENTS = 20  # per fund in one request; each within ingest.documents' length bounds (checked after)


class DocumentIn(BaseModel):
    """A document sent with a fund, read as one of its own (checked as ingest checks a file)."""

    model_config = ConfigDict(extra="forbid")
    document_id: Optional[str] = Field(None, max_length=200, pattern=NO_NUL, description="default: <id>/posted-<n>")
    date: str = Field(..., max_length=10, pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD")
    kind: str = Field(..., min_length=1, max_length=100, pattern=NO_NUL, description="meeting_note, news, ...")
    language: Optional[Literal["en", "ko"]] = Field(None, description="detected when absent")
    text: str = Field(..., min_length=1, max_length=20000, pattern=NO_NUL)


# One fund as canonical metrics: ranges from fundgrpo/data/canonical.py, unknown fields refused;
# `as_of` (the month a NAV series' metrics cover) is accepted so that a canonical row can be sent as it is.
Fund = create_model(  # type: ignore[call-overload]  # fields built from the canonical columns
    "Fund",
    __config__=ConfigDict(extra="forbid"),
    **{c.name: _fund_field(c) for c in COLUMNS},
    as_of=(
        Optional[str],
        Field(None, max_length=40, pattern=NO_NUL, description="the date the metrics cover (not used to grade)"),
    ),
    documents=(
        Optional[list[DocumentIn]],
        Field(
            None,
            max_length=MAX_DOCUMENTS,
            description="the fund's documents (methodologies with qualitative criteria), beside those stored",
        ),
    ),
)


class EvaluationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    funds: list[Fund] = Field(..., min_length=1)  # type: ignore[valid-type]


class DecisionRequest(BaseModel):
    """An analyst's grade for a share class, answering one stored evaluation."""

    model_config = ConfigDict(extra="forbid")
    share_class_id: str = Field(..., min_length=1, max_length=MAX_TEXT["share_class_id"], pattern=NO_NUL)
    grade: int = Field(..., description="a grade of the methodology")
    reason: str = Field(..., max_length=2000, pattern=NO_NUL, description="why, in the analyst's words (not empty)")
    # the evaluation answered: the share class's latest stored one when absent
    evaluation_id: Optional[int] = Field(None, ge=1, le=MAX_ID)
    # the version that made the evaluation, when the client wants it checked
    model_version: Optional[str] = Field(None, max_length=300, pattern=NO_NUL)
    # the latest decision the analyst saw (None: none yet); another since then is a conflict (409)
    based_on: Optional[int] = Field(None, ge=1, le=MAX_ID)

    @field_validator("reason")
    @classmethod
    def _reason_said(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("reason is empty: say why the grade is what it is")
        return v.strip()


class PublicationRequest(BaseModel):
    """A reviewer publishes a share class's rating to its clients: the stored evaluation as served, or
    with another grade (then `reason` says why). A new version each time; never an edit."""

    model_config = ConfigDict(extra="forbid")
    share_class_id: str = Field(..., min_length=1, max_length=MAX_TEXT["share_class_id"], pattern=NO_NUL)
    evaluation_id: Optional[int] = Field(None, ge=1, le=MAX_ID, description="default: the latest stored evaluation")
    grade: Optional[int] = Field(None, description="default: the evaluation's grade")
    reason: Optional[str] = Field(None, max_length=2000, pattern=NO_NUL, description="needed when the grade changes")


class WithdrawalRequest(BaseModel):
    """A reviewer withdraws a published rating: a new version in state `withdrawn`, with the reason."""

    model_config = ConfigDict(extra="forbid")
    share_class_id: str = Field(..., min_length=1, max_length=MAX_TEXT["share_class_id"], pattern=NO_NUL)
    reason: str = Field(..., min_length=1, max_length=2000, pattern=NO_NUL)


# ------------------------------------------------------------------------------------------ answers
# Documentation of what the endpoints return (`responses=` in app.py), checked against real answers
# by tests/fundgrpo/serving/test_api.py: `extra="forbid"` makes a field added to an answer but not
# here fail the tests, so /docs cannot drift from the API.

Grades = dict[str, float]  # grade (as text) -> probability


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CitationOut(Answer):
    document_id: str
    quote: str
    verified: bool = Field(..., description="the quote was found in that document of the fund (or its company)")


class PillarOut(Answer):
    criterion: str = Field(..., description="a qualitative criterion of the methodology")
    judgement: int | Literal["not assessed"] = Field(..., description="on the criterion's scale, or not assessed")
    evidence: list[CitationOut]
    reason: Optional[str] = Field(None, description="why not assessed: no documents, none speaks to it, ...")


class Evidence(Answer):
    in_prompt: dict[str, bool] = Field(..., description="which evidence the model was shown: rule, gbm")
    rule_grade: Optional[int] = Field(None, description="the methodology's grade (rule scorer)")
    rule_score: Optional[float] = Field(None, description="the methodology's score, 0-100")
    gbm_grade: Optional[int] = Field(None, description="gradient boosting's likeliest grade")
    gbm_probabilities: Optional[Grades] = None
    peers: int = Field(..., description="share classes in the category, this one included")
    percentiles: dict[str, Optional[float]] = Field(
        ..., description="per quantitative criterion, the fund's percentile among those peers (100 = best; null: none)"
    )


class Label(Answer):
    grade: int
    source: Literal["analyst", "export"] = Field(..., description="an analyst's decision or the export's grade")
    decision_id: Optional[int] = None


class ServedFrom(Answer):
    serves: Literal["lm", "gbm", "stack"] = Field(
        ...,
        description="whose probabilities the grade comes from, chosen on validation (calibrate stage): the language "
        "model's own (lm), gradient boosting's (gbm) or the two pooled (stack)",
    )
    weights: dict[str, float] = Field(..., description="shares of the belief: language_model, gradient_boosting")
    summary: str = Field(
        ...,
        description="what the grade is, in words (in the methodology's language): above all whether it is "
        "gradient boosting's alone",
    )
    written_grade: Optional[int] = Field(None, description="the grade the language model wrote in its evaluation")
    rule: Optional[str] = Field(None, description="the validation-chosen option: source/belief/decision rule")


class Evaluation(Answer):
    share_class_id: str
    fund_id: str
    category: str
    name: Optional[str] = None
    grade: Optional[int] = Field(..., description="the served grade; null for an invalid answer (`reason` says why)")
    grade_note: Optional[str] = Field(
        None,
        description="whose grade is served when the reasoning was written for another grade, and why a grade is "
        "not the likeliest under its own probabilities, in words; null when neither applies",
    )
    score: Optional[float] = None
    reasoning: Optional[str] = None
    valid: bool
    rated: bool = Field(
        ..., description="false: the methodology does not rate the fund (too little data; `reason` says what it lacks)"
    )
    reason: Optional[str] = Field(None, description="why there is no grade: not rated, or an invalid answer")
    probabilities: Optional[Grades] = None
    expected_grade: Optional[float] = None
    confidence: Optional[float] = Field(None, description="the probability of the served grade")
    served_from: Optional[ServedFrom] = Field(
        None, description="what the served grade is: a client can see when it is mostly gradient boosting's"
    )
    flags: list[str]
    pillars: list[PillarOut] = Field(
        default_factory=list,
        description="the qualitative criteria, each judged citing the fund's documents or not assessed",
    )
    evidence: Evidence
    rule_grade: Optional[int] = None
    expert: Optional[Label] = Field(None, description="the label the pipeline trains and tests with, if any")
    model_version: str
    needs_analyst: bool
    review: list[str] = Field(..., description="why it needs an analyst (the review queue's rule)")
    evaluation_id: Optional[int] = Field(None, description="its id in the store")


class Evaluations(Answer):
    model_version: str
    evaluations: list[Evaluation]


class StoredEvaluation(Evaluation):
    evaluation_id: int
    created_at: str = Field(..., description="when it was made, ISO 8601 with its time zone")


class Decision(Answer):
    id: int
    share_class_id: str
    evaluation_id: int
    model_version: str
    old_grade: Optional[int] = Field(None, description="the evaluation's grade; null when it was invalid")
    new_grade: int
    reason: str
    analyst: str
    created_at: str = Field(..., description="ISO 8601 with its time zone")


class Decisions(Answer):
    decisions: list[Decision]


class QueueItem(StoredEvaluation):
    decision_id: Optional[int] = Field(None, description="the latest decision on the share class (send as based_on)")
    decided_grade: Optional[int] = Field(None, description="that decision's grade")
    decided_version: Optional[str] = Field(None, description="the model version that decision answered")
    why: list[str]


class ReviewQueue(Answer):
    grades: list[int]
    rule: dict[str, float]
    order: str
    total: int
    items: list[QueueItem]


class AuditRow(Answer):
    id: int
    at: str
    actor: str
    action: str
    share_class_id: Optional[str] = None
    detail: dict[str, Any]


class Audit(Answer):
    audit: list[AuditRow]


class ModelCard(Answer):
    model_version: str = Field(..., description="what answers: models:/NAME/VERSION or a folder")
    target: str = Field(..., description="what the server was told to serve")
    note: Optional[str] = Field(None, description="why the version served is not the one the alias names")
    serves: str = Field(
        ..., description="what its grades are, in words: above all whether they are gradient boosting's alone"
    )
    methodology: str = Field(..., description="the methodology it answers under (the compiled one), fingerprinted")
    aliases: Optional[list[str]] = None
    backtest: Optional[dict[str, float]] = None
    gate: Optional[dict[str, Any]] = Field(None, description="the gate's record for this version")
    decision: Optional[dict[str, Any]] = Field(
        None, description="the last registration's decision (register.decision), when it is this run's"
    )


class Ready(Answer):
    ready: bool
    model_version: Optional[str] = None
    error: Optional[str] = None


class Peers(Answer):
    count: int = Field(..., description="share classes in the category, this one included")
    percentiles: dict[str, Optional[float]] = Field(
        ..., description="per quantitative criterion, the fund's percentile among them (100 = best; null: no data)"
    )


class Rating(Answer):
    """A published rating as a client reads it: one immutable version."""

    share_class_id: str
    version: int = Field(..., description="1, 2, ...: a re-rating or a withdrawal is a new version")
    state: Literal["published", "withdrawn"]
    grade: Optional[int] = Field(None, description="null when withdrawn")
    grade_label: Optional[str] = Field(None, description="what the grade means, in the methodology's language")
    reasoning: Optional[str] = None
    pillars: list[PillarOut] = Field(default_factory=list)
    note: Optional[str] = Field(None, description="the reviewer's reason where the grade is not the draft's")
    peers: Optional[Peers] = Field(None, description="the fund against its category's share classes, as evaluated")
    model_version: Optional[str] = None
    methodology: str
    reviewer: str
    published_at: str


class Ratings(Answer):
    ratings: list[Rating]


class RatingHistory(Answer):
    share_class_id: str
    versions: list[Rating]


class Problem(BaseModel):
    detail: str = Field(..., description="what is wrong, naming the field or the way out")
