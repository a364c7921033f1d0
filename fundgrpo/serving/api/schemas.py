"""Request bodies: one fund as canonical metrics, ranges from the canonical table, unknown fields refused."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from fundgrpo.data.canonical import COLUMNS


def _fund_field(c) -> tuple[Any, Any]:
    if c.kind in ("id", "text"):
        return (str, ...) if c.name in ("share_class_id", "category") else (Optional[str], None)
    if c.kind == "grade":
        return (Optional[int], Field(None, ge=int(c.low), le=int(c.high)))
    return (Optional[float], Field(None, ge=c.low, le=c.high, description=c.description))


# One fund as canonical metrics: ranges from fundgrpo/data/canonical.py, unknown fields refused.
Fund = create_model("Fund", __config__=ConfigDict(extra="forbid"), **{c.name: _fund_field(c) for c in COLUMNS})


class EvaluationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    funds: list[Fund] = Field(..., min_length=1)  # type: ignore[valid-type]
