"""The methodology's qualitative criteria: pillars the analysts judge from documents.

A methodology file may hold, beside its numeric `criteria`, a `qualitative` list::

    qualitative:
      - id: people
        weight: 0.15                 # its share of the overall grade; every weight of the file sums to 1
        label: {en: People, ko: 운용인력}
        scale: 3                     # judgements -1 (lowers), 0 (neutral), +1 (raises); 5: -2..+2
        guidance:                    # the analysts' words, in the methodology's language
          raises: a stable lead manager with a deep, long-serving team
          lowers: the lead manager left or the team turned over
          neutral: routine staff changes; rumours nobody confirmed

Each is judged from the fund's documents (its own, its fund's, its company's), citing the sentences
it rests on, or "not assessed" where no document speaks to it. The rule scorer cannot read
documents: it scores the numeric criteria (their weights renormalised) and leaves every qualitative
criterion unassessed.

>>> q = parse_qualitative([{"id": "people", "weight": 0.2, "label": "People",
...     "guidance": {"raises": "stable team", "lowers": "manager left", "neutral": "rumours"}}], "en", "m.yaml")
>>> q[0].judgements, q[0].guidance["lowers"]
((-1, 0, 1), 'manager left')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fundgrpo.methodology.fields import MethodologyError, parse_label

GUIDANCE = ("raises", "lowers", "neutral")
SCALES = (3, 5)
NOT_ASSESSED = "not assessed"


class QualitativeError(MethodologyError):
    """A qualitative criterion of the methodology file is malformed; the message names it and the field."""


@dataclass(frozen=True)
class QualitativeCriterion:
    """A pillar judged from documents: its weight in the overall grade, label, scale and guidance."""

    id: str
    weight: float
    label: dict[str, str]
    scale: int  # 3: -1/0/+1; 5: -2..+2
    guidance: dict[str, str]  # raises / lowers / neutral, in the methodology's language

    @property
    def judgements(self) -> tuple[int, ...]:
        half = self.scale // 2
        return tuple(range(-half, half + 1))

    def text(self, language: str) -> str:
        return self.label.get(language) or self.label.get("en") or self.id


def parse_qualitative(entries: Any, language: str, where: str) -> tuple[QualitativeCriterion, ...]:
    """The file's `qualitative` list, checked: ids, positive weights, a scale of 3 or 5, a label and
    the three guidance texts (raises, lowers, neutral) each.

    >>> parse_qualitative([{"id": "people", "weight": 0.2, "guidance": {"raises": "a"}}], "en", "m.yaml")
    Traceback (most recent call last):
    ...
    fundgrpo.methodology.qualitative.QualitativeError: m.yaml: qualitative criterion 1 (people): guidance is missing 'lowers', 'neutral': say what lowers the judgement, what raises it and what leaves it neutral
    """  # noqa: E501
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise QualitativeError(f"{where}: qualitative must be a list (one '- id: ...' entry each), got {entries!r}")
    out = []
    for i, raw in enumerate(entries):
        ctx = f"{where}: qualitative criterion {i + 1}"
        if not isinstance(raw, dict) or not raw.get("id"):
            raise QualitativeError(f"{ctx}: needs an id (e.g. people, process, parent), got {raw!r}")
        ctx = f"{ctx} ({raw['id']})"
        weight = raw.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < 1:
            raise QualitativeError(f"{ctx}: weight must be a share of the overall grade in (0, 1), got {weight!r}")
        scale = raw.get("scale", 3)
        if scale not in SCALES:
            raise QualitativeError(f"{ctx}: scale must be one of {SCALES} points, got {scale!r}")
        guidance = raw.get("guidance")
        if not isinstance(guidance, dict):
            raise QualitativeError(f"{ctx}: guidance must be a mapping with {', '.join(GUIDANCE)}, got {guidance!r}")
        missing = [g for g in GUIDANCE if not str(guidance.get(g) or "").strip()]
        if missing:
            raise QualitativeError(
                f"{ctx}: guidance is missing {', '.join(repr(g) for g in missing)}: say what lowers the judgement, "
                "what raises it and what leaves it neutral"
            )
        labels = parse_label(raw.get("label") or str(raw["id"]), language, ctx)
        out.append(
            QualitativeCriterion(
                str(raw["id"]), float(weight), labels, int(scale), {g: str(guidance[g]).strip() for g in GUIDANCE}
            )
        )
    ids = [q.id for q in out]
    if len(set(ids)) != len(ids):
        raise QualitativeError(f"{where}: qualitative criterion ids repeat: {ids}")
    return tuple(out)


def as_rubric(q: QualitativeCriterion, language: str) -> dict[str, Any]:
    """One criterion as the rubric holds it (and `parse_qualitative` reads back)."""
    return {"id": q.id, "weight": q.weight, "label": q.label, "scale": q.scale, "guidance": q.guidance,
            "judgements": list(q.judgements), "label_text": q.text(language)}  # fmt: skip


def answer_schema(criteria: tuple[QualitativeCriterion, ...]) -> dict[str, Any]:
    """The JSON Schema of an answer's `pillars`: per qualitative criterion a judgement on its scale
    with the sentences it rests on (the document's and the sentence's numbers in the prompt), or "not
    assessed" with none.

    >>> s = answer_schema(parse_qualitative([{"id": "people", "weight": 0.2, "guidance":
    ...     {"raises": "a", "lowers": "b", "neutral": "c"}}], "en", "m"))
    >>> s["properties"]["people"]["properties"]["judgement"]["enum"]
    [-1, 0, 1, 'not assessed']
    """
    cite = {
        "type": "object",
        "properties": {"document": {"type": "integer", "minimum": 1}, "sentence": {"type": "integer", "minimum": 1}},
        "required": ["document", "sentence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            q.id: {
                "type": "object",
                "properties": {
                    "judgement": {"enum": [*q.judgements, NOT_ASSESSED]},
                    "evidence": {"type": "array", "items": cite},
                },
                "required": ["judgement", "evidence"],
                "additionalProperties": False,
            }
            for q in criteria
        },
        "additionalProperties": False,
    }
