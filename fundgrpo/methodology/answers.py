"""A model's answer, read: the text of a completion, the one JSON object it must be, why it is not a
valid evaluation, and the claims its reasoning makes (`claims`). Shared by the rewards (training),
the backtest (evaluation) and serving, so it sits with the methodology that defines the answer's schema.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import jsonschema

from fundgrpo.methodology import claims
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord


@dataclass(frozen=True)
class Prediction:
    """One evaluator's answer to one fund, as every stage passes it on. A language model's starts in
    `predictions_from_texts`; the claims check (`annotated`), the beliefs read (`believed`) and a decision
    rule (`decided`, from `calibration.decide`) each give a new one. The grade served and the grade written
    are separate fields from the start: a decision rule sets `grade` and the probabilities, never
    `written_grade`. `as_dict` is its one serialized form (every field, always), `of` reads it back.

    >>> p = Prediction(grade=2, written_grade=2, valid=True, text="{}")
    >>> q = p.decided({"grade": 1, "probs": [0.6, 0.4], "expected_grade": 1.4, "confidence": 0.6})
    >>> (q.grade, q.written_grade), Prediction.of(q.as_dict()) == q
    ((1, 2), True)
    """

    grade: int | None  # the grade served: the written one until a decision rule decides another
    written_grade: int | None  # the grade the answer wrote (None: invalid)
    score: float | None = None  # the score the answer wrote, 0-100
    reasoning: str | None = None
    valid: bool = False
    reason: str | None = None  # why the answer is invalid (None when valid)
    text: str = ""  # the completion as generated
    stated: float | None = None  # the confidence the answer states, 0-1 (None: it states none)
    unsupported: tuple[str, ...] | None = None  # what the reasoning misstates (None: not checked, `annotated`)
    claims: int | None = None  # checkable claims it makes (None: not checked)
    complete: bool | None = None  # cites the weightiest criteria rightly (None: not checked)
    beliefs: Mapping[str, list[float] | None] = field(default_factory=dict)  # belief method -> grade probabilities
    probs: list[float] | None = None  # with a rule: the served probabilities, one per grade
    expected_grade: float | None = None  # with a rule: the probability-weighted grade
    confidence: float | None = None  # with a rule: the served confidence
    pillars: Mapping[str, Any] | None = None  # criterion -> judgement and evidence, as written (`citations.judged`)

    def decided(self, decision: Mapping[str, Any]) -> Prediction:
        """This prediction with a decision rule's served fields (`calibration.GradeDecided`)."""
        return replace(self, **{k: decision[k] for k in SERVED})

    def believed(self, method: str, probs: list[float] | None) -> Prediction:
        """This prediction with the grade probabilities read at `method`."""
        return replace(self, beliefs={**self.beliefs, method: probs})

    @property
    def surest(self) -> float | None:
        """The confidence it serves: its rule's, else the likeliest grade's probability; None without probabilities.

        >>> Prediction(grade=2, written_grade=2, probs=[0.3, 0.7]).surest
        0.7
        """
        if self.probs is None:
            return None
        return self.confidence if self.confidence is not None else max(self.probs)

    def as_written(self) -> Prediction:
        """The answer before any decision rule: its written grade served, no served probabilities."""
        return replace(self, grade=self.written_grade, probs=None, expected_grade=None, confidence=None)

    def as_dict(self) -> dict[str, Any]:
        """The prediction as JSON: every field, always."""
        out = asdict(self)
        out["unsupported"] = None if self.unsupported is None else list(self.unsupported)
        out["beliefs"] = dict(self.beliefs)
        return out

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Prediction:
        """The prediction `as_dict` wrote (a missing optional field reads as its default)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("unsupported") is not None:
            values["unsupported"] = tuple(values["unsupported"])
        return cls(**values)


# The fields a decision rule sets (`calibration.decide`).
SERVED = ("grade", "probs", "expected_grade", "confidence")


def example_schema() -> dict:
    """The output schema of a methodology with two grades, for the examples below."""
    return {
        "type": "object",
        "required": ["grade", "score", "reasoning"],
        "properties": {
            "grade": {"enum": [1, 2]},
            "score": {"type": "number", "minimum": 0, "maximum": 100},
            "reasoning": {"type": "string"},
        },
    }


def completion_text(completion: Any) -> str:
    """Text of a completion, plain or conversational.

    >>> completion_text([{"role": "assistant", "content": "hi"}])
    'hi'
    >>> completion_text("hi")
    'hi'
    >>> completion_text([{"role": "assistant", "content": None}, "stray"])
    ''
    """
    if isinstance(completion, list):
        return "".join(m["content"] for m in completion if isinstance(m, dict) and isinstance(m.get("content"), str))
    return completion if isinstance(completion, str) else ""


def parse_answer(text: str) -> dict | None:
    """The answer object if the whole completion is one JSON object, else None.

    >>> parse_answer(' {"grade": 3, "score": 50, "reasoning": "ok"} ')
    {'grade': 3, 'score': 50, 'reasoning': 'ok'}
    >>> parse_answer('grade 3') is None, parse_answer('[1]') is None
    (True, True)
    >>> parse_answer('{"score": NaN}') is None, parse_answer('[' * 100000) is None  # not JSON; nesting too deep
    (True, True)
    """
    try:
        obj = json.loads(text.strip(), parse_constant=_no_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    return obj if isinstance(obj, dict) else None


def _no_constant(name: str) -> Any:
    raise ValueError(
        f"{name} is not JSON"
    )  # Python's json accepts NaN and Infinity; the schema's bounds would not catch them


def valid_answer(text: str, schema: dict) -> dict | None:
    """The answer if it parses and fits the output schema, else None."""
    return None if answer_problem(text, schema) else parse_answer(text)


def answer_problem(text: str, schema: dict) -> str | None:
    """Why an answer is not valid (None when it is): what an invalid evaluation reports instead of a grade.

    >>> schema = example_schema()
    >>> answer_problem('{"grade": 2, "score": 80, "reasoning": "ok"}', schema) is None
    True
    >>> answer_problem("grade 2", schema), answer_problem('{"grade": 9, "score": 80, "reasoning": "ok"}', schema)
    ('not one JSON object', 'grade: 9 is not one of [1, 2]')
    >>> answer_problem("", schema), answer_problem('{"score": 80, "reasoning": "ok"}', schema)
    ('empty answer', "'grade' is a required property")
    """
    if not text.strip():
        return "empty answer"
    obj = parse_answer(text)
    if obj is None:
        return "not one JSON object"
    try:
        err = jsonschema.exceptions.best_match(validator(json.dumps(schema, sort_keys=True)).iter_errors(obj))
    except RecursionError:
        return "nested too deeply"
    if err is None:
        return None
    where = ".".join(str(p) for p in err.absolute_path)
    return f"{where}: {err.message}" if where else err.message


@functools.lru_cache(maxsize=8)
def validator(schema_json: str) -> Any:
    """The output schema's validator, its schema checked once: `jsonschema.validate` checks the schema
    against its metaschema on every call, which cost 95 % of GRPO's reward time (a reward each x 64
    completions a step). Keyed by the schema's JSON, as a dict cannot be a cache key."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def predictions_from_texts(texts: list[str], schema: dict) -> list[Prediction]:
    """Parse completions. An invalid one carries no grade and no score (None) but the reason it is
    invalid, so no client can read a made-up middle grade as the model's.

    >>> p = predictions_from_texts(['{"grade": 2, "score": 95, "reasoning": "x"}', "oops"], example_schema())
    >>> [(x.grade, x.valid, x.reason) for x in p]
    [(2, True, None), (None, False, 'not one JSON object')]
    """
    out: list[Prediction] = []
    for text in texts:
        problem = answer_problem(text, schema)
        answer = parse_answer(text) if problem is None else None
        if answer is None:
            out.append(Prediction(grade=None, written_grade=None, valid=False, reason=problem, text=text))
            continue
        out.append(
            Prediction(
                grade=int(answer["grade"]),
                written_grade=int(answer["grade"]),
                score=float(answer["score"]),
                reasoning=answer["reasoning"],
                valid=True,
                text=text,
                stated=answer["confidence"] / 100.0 if "confidence" in answer else None,
                pillars=answer.get("pillars"),
            )
        )
    return out


def not_rated(reason: str) -> Prediction:
    """The answer for a fund the methodology does not rate (`compiler.not_rated`): no model is asked, no
    grade is given, and `reason` says what the fund lacks.

    >>> p = not_rated("not rated: missing: Sharpe ratio")
    >>> p.grade, p.valid, p.reason
    (None, False, 'not rated: missing: Sharpe ratio')
    """
    return Prediction(grade=None, written_grade=None, valid=False, reason=reason)


def annotated(preds: list[Prediction], rows: list[PromptRecord], methodology: Methodology) -> list[Prediction]:
    """Each prediction with its claims checked against the evidence its record's prompt showed: what it
    misstates (`unsupported`), how many claims it makes, and whether it is `complete`."""
    out = []
    for p, r in zip(preds, rows):
        found = claims.check(p.reasoning, claims.percentiles(r.evidence), methodology, p.grade, r.rule_grade)
        p = replace(
            p,
            unsupported=tuple(c["about"] for c in found if c["status"] in claims.MISSTATED),
            claims=len(found),
            complete=bool(p.reasoning) and claims.complete(p.reasoning, r.evidence, methodology),
        )
        out.append(p)
    return out
