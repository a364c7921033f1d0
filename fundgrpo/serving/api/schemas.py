"""Request bodies: one fund as canonical metrics, ranges from the canonical table, unknown fields refused."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from fundgrpo.data.canonical import COLUMNS

# Text fields are capped: a 200 KB fund name once held every later evaluation behind it (its prompt
# is generated token by token). Ids and categories are short in every export seen; names under 200.
MAX_TEXT = {"share_class_id": 100, "fund_id": 100, "category": 200, "name": 300}


def _fund_field(c) -> tuple[Any, Any]:
    if c.kind in ("id", "text"):
        cap = MAX_TEXT.get(c.name, 300)
        if c.name in ("share_class_id", "category"):
            return (str, Field(..., min_length=1, max_length=cap))
        return (Optional[str], Field(None, max_length=cap))
    if c.kind == "grade":
        return (Optional[int], Field(None, ge=int(c.low), le=int(c.high)))
    return (Optional[float], Field(None, ge=c.low, le=c.high, description=c.description))


# One fund as canonical metrics: ranges from fundgrpo/data/canonical.py, unknown fields refused.
Fund = create_model("Fund", __config__=ConfigDict(extra="forbid"), **{c.name: _fund_field(c) for c in COLUMNS})


class EvaluationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    funds: list[Fund] = Field(..., min_length=1)  # type: ignore[valid-type]


class DecisionRequest(BaseModel):
    """An analyst's grade for a share class, answering one stored evaluation."""

    model_config = ConfigDict(extra="forbid")
    share_class_id: str = Field(..., min_length=1, max_length=MAX_TEXT["share_class_id"])
    grade: int = Field(..., description="a grade of the methodology")
    reason: str = Field(..., max_length=2000, description="why, in the analyst's words (not empty)")
    # the evaluation answered: the share class's latest stored one when absent
    evaluation_id: Optional[int] = Field(None, ge=1)
    # the version that made the evaluation, when the client wants it checked
    model_version: Optional[str] = Field(None, max_length=300)
    # the latest decision the analyst saw (None: none yet); another since then is a conflict (409)
    based_on: Optional[int] = Field(None, ge=1)

    @field_validator("reason")
    @classmethod
    def _reason_said(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("reason is empty: say why the grade is what it is")
        return v.strip()
