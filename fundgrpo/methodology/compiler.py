"""The rating methodology: load the analysts' YAML, check it, compile it.

A methodology file names the criteria (a canonical metric each, a weight, a
direction, a label per language), the grade bands on a 0-100 score, how the
score is formed, and the output fields. It compiles into
  * a JSON Schema for the model's answer (`output_schema`),
  * a rubric (`rubric`): what the rewards and the prompt builder read,
  * a rule-based reference scorer (`rule_score`).

Missing metrics: a criterion whose metric is NaN for a fund is left out and the
other weights renormalised. With return criteria for 3, 5 and 10 years weighted
0.2 / 0.3 / 0.5 this gives exactly the Morningstar rule of 100 % / 60-40 / 50-30-20
by length of history. How little may be left is the file's `coverage`: a fund with data
for less than `min_weight` of the criteria weight, or without a `required` criterion, is
not rated (no rule grade, no model grade; `not_rated` says what it lacks).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace  # noqa: F401 (replace: the doctests')
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from fundgrpo.data import canonical
from fundgrpo.data.peers import percentile_within, percentiles_within
from fundgrpo.methodology.fields import MIN_COVERAGE, MethodologyError, parse_coverage, parse_label
from fundgrpo.methodology.qualitative import QualitativeCriterion, answer_schema, parse_qualitative
from fundgrpo.methodology.qualitative import as_rubric as qualitative_rubric

LANGUAGES = ("en", "ko")
SCORING = ("weighted", "ranked")


@dataclass(frozen=True)
class Criterion:
    id: str
    metric: str
    weight: float
    higher_is_better: bool
    label: dict[str, str]

    def text(self, language: str) -> str:
        return self.label.get(language) or self.label.get("en") or self.id


@dataclass(frozen=True)
class Band:
    grade: int
    low: float
    high: float
    label: dict[str, str] = field(default_factory=dict)

    @property
    def midpoint(self) -> float:
        return (self.low + self.high) / 2


@dataclass(frozen=True)
class Methodology:
    name: str
    version: str
    language: str
    scoring: str
    criteria: tuple[Criterion, ...]
    bands: tuple[Band, ...]  # ascending by score
    reasoning_min_chars: int = 20
    reasoning_max_chars: int = 200
    cite_top: int = 3  # how many of the weightiest criteria a good reasoning cites
    # Metrics the evaluator is shown beside the criteria but that carry no weight in
    # the rule scorer (weight 0): what an analyst also looks at before grading.
    context: tuple[Criterion, ...] = ()
    # A fund is rated only with data for at least this share of the criteria weight and for
    # every `required` criterion (ids); otherwise it is "not rated" (`not_rated`).
    min_coverage: float = MIN_COVERAGE
    required: tuple[str, ...] = ()
    qualitative: tuple[QualitativeCriterion, ...] = ()  # judged from documents (fundgrpo/methodology/qualitative.py)

    @property
    def grades(self) -> list[int]:
        return [b.grade for b in self.bands]

    def grade_for(self, score: float) -> int:
        """Grade of a 0-100 score: bands are [low, high), the top band includes 100."""
        for band in self.bands:
            if band.low <= score < band.high:
                return band.grade
        return self.bands[-1].grade if score >= self.bands[-1].high else self.bands[0].grade

    def band(self, grade: int) -> Band:
        return next(b for b in self.bands if b.grade == grade)

    @property
    def named(self) -> tuple[Criterion, ...]:
        """The criteria a reasoning may name: the weighted ones, then the context metrics."""
        return self.criteria + self.context

    def label(self, c: Criterion) -> str:
        """A criterion's label in the methodology's language."""
        return c.text(self.language)

    def verdicts(self) -> dict[int, str]:
        """Each grade's label in the methodology's language (the verdict words), where it has one."""
        out = {}
        for b in self.bands:
            text = b.label.get(self.language) or b.label.get("en")
            if text:
                out[b.grade] = text
        return out


def example_methodology() -> Methodology:
    """Two criteria, a context metric and five labelled grades, for the doctests.

    >>> example_methodology().verdicts()[4]
    'above average'
    """
    labels = ["poor", "below average", "average", "above average", "excellent"]
    korean = ["저조", "평균 이하", "보통", "평균 이상", "우수"]
    return Methodology(
        name="example",
        version="1",
        language="en",
        scoring="weighted",
        criteria=(
            Criterion("sharpe_3y", "sharpe_3y", 0.6, True, {"en": "Sharpe ratio"}),
            Criterion("cost", "ongoing_cost", 0.4, False, {"en": "ongoing cost"}),
        ),
        bands=tuple(
            Band(g, 20.0 * (g - 1), 20.0 * g, {"en": en, "ko": ko}) for g, en, ko in zip(range(1, 6), labels, korean)
        ),
        cite_top=2,
        context=(Criterion("tenure", "manager_tenure", 0.0, True, {"en": "manager tenure"}),),
    )


# ----------------------------------------------------------------- load, check


def load(path: str | Path) -> Methodology:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise MethodologyError(f"methodology file not found: {path}") from None
    except yaml.YAMLError as e:
        raise MethodologyError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise MethodologyError(f"{path}: expected a mapping at the top level")
    return parse(raw, where=str(path))


def parse(raw: dict[str, Any], where: str = "methodology") -> Methodology:
    """A methodology from its YAML's mapping, every field checked; an error names the file (`where`), the
    entry and the field."""
    language = raw.get("language", "en")
    if language not in LANGUAGES:
        raise MethodologyError(f"{where}: language must be one of {LANGUAGES}, got {language!r}")
    scoring = raw.get("scoring", "weighted")
    if scoring not in SCORING:
        raise MethodologyError(f"{where}: scoring must be one of {SCORING}, got {scoring!r}")
    criteria = _criteria(raw, language, where)
    ids = [c.id for c in criteria]
    qualitative = parse_qualitative(raw.get("qualitative"), language, where)
    total = sum(c.weight for c in criteria) + sum(q.weight for q in qualitative)
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        detail = ", ".join([f"{c.id}={c.weight:g}" for c in criteria] + [f"{q.id}={q.weight:g}" for q in qualitative])
        raise MethodologyError(f"{where}: criterion weights must sum to 1, they sum to {total:.4g} ({detail})")
    context = _context(raw, criteria, language, where)
    shown = ids + [c.id for c in context]
    if len(set(shown)) != len(shown):
        raise MethodologyError(f"{where}: criterion and context ids repeat: {shown}")
    if set(shown) & {q.id for q in qualitative}:
        raise MethodologyError(
            f"{where}: qualitative ids repeat a criterion id: {sorted(set(shown) & {q.id for q in qualitative})}"
        )
    bands = _check_bands(_bands(raw, where), where)
    min_coverage, required = parse_coverage(raw.get("coverage"), ids, where)
    output = raw.get("output", {}) or {}
    low, high = _reasoning_chars(output, where)
    return Methodology(
        name=str(raw.get("name", "methodology")),
        version=str(raw.get("version", "1")),
        language=language,
        scoring=scoring,
        criteria=tuple(criteria),
        bands=tuple(bands),
        reasoning_min_chars=low,
        reasoning_max_chars=high,
        cite_top=int(output.get("cite_top", 3)),
        context=tuple(context),
        min_coverage=min_coverage,
        required=required,
        qualitative=qualitative,
    )


def _number(value: Any, field: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise MethodologyError(f"{where}: {field} must be a number, got {value!r}")
    return float(value)


def _need(d: Any, key: str, ctx: str, where: str) -> Any:
    if not isinstance(d, dict):
        raise MethodologyError(f"{where}: {ctx} must be a mapping (key: value, ...), got {d!r}")
    if key not in d:
        raise MethodologyError(f"{where}: {ctx} is missing '{key}'")
    return d[key]


def _entries(raw: dict[str, Any], key: str, required: bool, where: str) -> list:
    value = _need(raw, key, "the file", where) if required else raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MethodologyError(f"{where}: {key} must be a list (one '- ...' entry each), got {value!r}")
    return value


def _criteria(raw: dict[str, Any], language: str, where: str) -> list[Criterion]:
    """The weighted criteria: each a known numeric metric (never the label), a positive weight, unique ids."""
    criteria = []
    for i, c in enumerate(_entries(raw, "criteria", True, where)):
        ctx = f"criterion {i + 1}"
        metric = _need(c, "metric", ctx, where)
        if metric in canonical.LABELS:
            raise MethodologyError(
                f"{where}: {ctx} reads {metric!r}, the analysts' label the model learns to predict; "
                "a criterion must be a fund metric, or the label leaks into the prompt"
            )
        if metric not in canonical.BY_NAME or canonical.BY_NAME[metric].kind != "number":
            raise MethodologyError(f"{where}: {ctx} uses unknown metric {metric!r}; known: {list(canonical.NUMERIC)}")
        weight = _need(c, "weight", ctx, where)
        if not isinstance(weight, (int, float)) or weight <= 0:
            raise MethodologyError(f"{where}: {ctx} ({metric}) weight must be a positive number, got {weight!r}")
        label = parse_label(c.get("label"), language, f"{where}: {ctx} ({metric})")
        criteria.append(
            Criterion(
                id=str(c.get("id", metric)),
                metric=metric,
                weight=float(weight),
                higher_is_better=bool(c.get("higher_is_better", True)),
                label=label,
            )
        )
    if not criteria:
        raise MethodologyError(f"{where}: no criteria")
    ids = [c.id for c in criteria]
    if len(set(ids)) != len(ids):
        raise MethodologyError(f"{where}: criterion ids repeat: {ids}")
    return criteria


def _context(raw: dict[str, Any], criteria: list[Criterion], language: str, where: str) -> list[Criterion]:
    """The context metrics: shown in the prompt, weighed by nobody; none may repeat a criterion."""
    context = []
    for i, c in enumerate(_entries(raw, "context", False, where)):
        ctx = f"context metric {i + 1}"
        metric = _need(c, "metric", ctx, where)
        if metric not in canonical.BY_NAME or canonical.BY_NAME[metric].kind != "number":
            raise MethodologyError(f"{where}: {ctx} uses unknown metric {metric!r}; known: {list(canonical.NUMERIC)}")
        if metric in {c.metric for c in criteria}:
            raise MethodologyError(f"{where}: {ctx} ({metric}) is already a criterion")
        label = parse_label(c.get("label"), language, f"{where}: {ctx} ({metric})")
        context.append(Criterion(str(c.get("id", metric)), metric, 0.0, bool(c.get("higher_is_better", True)), label))
    return context


def _bands(raw: dict[str, Any], where: str) -> list[Band]:
    """The grade bands as written (`_check_bands` then checks they tile 0-100)."""
    bands = []
    for i, b in enumerate(_entries(raw, "grades", True, where)):
        ctx = f"grade band {i + 1}"
        grade = _need(b, "grade", ctx, where)
        label = parse_label(b.get("label"), "en", f"{where}: {ctx} (grade {grade})")
        bands.append(
            Band(
                int(_number(grade, f"{ctx} grade", where)),
                _number(_need(b, "min", ctx, where), f"{ctx} min", where),
                _number(_need(b, "max", ctx, where), f"{ctx} max", where),
                label,
            )
        )
    return bands


def _reasoning_chars(output: dict[str, Any], where: str) -> tuple[int, int]:
    """The written evaluation's length bounds (output.reasoning.min_chars / max_chars)."""
    reasoning = output.get("reasoning", {}) or {}
    low = int(_number(reasoning.get("min_chars", 20), "output.reasoning.min_chars", where))
    high = int(_number(reasoning.get("max_chars", 200), "output.reasoning.max_chars", where))
    if not 0 < low < high:
        raise MethodologyError(
            f"{where}: output.reasoning needs 0 < min_chars < max_chars, got min_chars {low} and max_chars {high}"
        )
    return low, high


def _check_bands(bands: list[Band], where: str) -> list[Band]:
    if len(bands) < 2:
        raise MethodologyError(f"{where}: need at least two grade bands")
    for b in bands:
        if not b.low < b.high:
            raise MethodologyError(f"{where}: grade {b.grade} band has min {b.low:g} >= max {b.high:g}")
    bands = sorted(bands, key=lambda b: b.low)
    if bands[0].low != 0 or bands[-1].high != 100:
        raise MethodologyError(f"{where}: grade bands must cover 0-100, they cover {bands[0].low:g}-{bands[-1].high:g}")
    for prev, nxt in zip(bands, bands[1:]):
        if nxt.low < prev.high:
            raise MethodologyError(
                f"{where}: grade bands overlap: grade {prev.grade} [{prev.low:g}, {prev.high:g}) "
                f"and grade {nxt.grade} [{nxt.low:g}, {nxt.high:g})"
            )
        if nxt.low > prev.high:
            raise MethodologyError(
                f"{where}: gap between grade {prev.grade} and {nxt.grade} bands ({prev.high:g}-{nxt.low:g})"
            )
    grades = [b.grade for b in bands]
    if grades != sorted(grades) or len(set(grades)) != len(grades):
        raise MethodologyError(f"{where}: grades must rise with the score and be distinct, got {grades}")
    return bands


# ------------------------------------------------------------------- compile


def output_schema(m: Methodology) -> dict[str, Any]:
    """JSON Schema of the model's answer."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{m.name} evaluation",
        "type": "object",
        "properties": {
            "grade": {"type": "integer", "enum": m.grades},
            "score": {"type": "number", "minimum": 0, "maximum": 100},
            "reasoning": {"type": "string", "minLength": 1, "maxLength": 2 * m.reasoning_max_chars},
            # optional: how sure the evaluator is of its grade, in percent (`prepare.stated_confidence`)
            "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
            # optional: the qualitative criteria judged from the fund's documents, with citations
            **({"pillars": answer_schema(m.qualitative)} if m.qualitative else {}),
        },
        "required": ["grade", "score", "reasoning"],
        "additionalProperties": False,
    }


def rubric(m: Methodology) -> dict[str, Any]:
    """What the rewards, the prompts and the reports read (JSON-serialisable)."""
    return {
        "name": m.name,
        "version": m.version,
        "fingerprint": fingerprint(m),  # what a model trained on it depends on: serving checks it
        "language": m.language,
        "scoring": m.scoring,
        "grades": m.grades,
        "bands": [{"grade": b.grade, "min": b.low, "max": b.high, "label": b.label} for b in m.bands],
        "criteria": [
            {
                "id": c.id,
                "metric": c.metric,
                "weight": c.weight,
                "higher_is_better": c.higher_is_better,
                "label": c.text(m.language),
            }
            for c in m.criteria
        ],
        "reasoning": {"min_chars": m.reasoning_min_chars, "max_chars": m.reasoning_max_chars},
        "cite_top": m.cite_top,
        "coverage": {"min_weight": m.min_coverage, "required": list(m.required)},
        "context": [
            {"id": c.id, "metric": c.metric, "higher_is_better": c.higher_is_better, "label": c.text(m.language)}
            for c in m.context
        ],
        "qualitative": [qualitative_rubric(q, m.language) for q in m.qualitative],  # the rule scorer leaves them
    }


def fingerprint(m: Methodology) -> str:
    """What a model trained on `m` depends on, hashed: the language, the criteria and context metrics
    (ids, metrics, weights, directions, labels) and the grades (bands and labels). A model trained on one
    methodology writes its words and grades; serving it under another gives answers that mean nothing
    (or none that parse), so serving refuses a version whose fingerprint is not the compiled one's.
    The name, version and reasoning lengths are left out: renaming a file changes no answer.

    >>> m = example_methodology()
    >>> same, other = replace(m, name="renamed"), replace(m, language="ko")
    >>> fingerprint(m) == fingerprint(same), fingerprint(m) == fingerprint(other)
    (True, False)
    """
    words = {
        "language": m.language,
        "scoring": m.scoring,
        "criteria": [[c.id, c.metric, c.weight, c.higher_is_better, c.text(m.language)] for c in m.criteria],
        "context": [[c.id, c.metric, c.higher_is_better, c.text(m.language)] for c in m.context],
        "grades": [[b.grade, b.low, b.high, b.label.get(m.language) or b.label.get("en")] for b in m.bands],
        **(
            {"qualitative": [[q.id, q.weight, q.scale, q.text(m.language), q.guidance] for q in m.qualitative]}
            if m.qualitative
            else {}
        ),  # fmt: skip
    }
    return hashlib.sha256(json.dumps(words, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


def described(m: Methodology) -> str:
    """The methodology compiled now, named for a message.

    >>> described(example_methodology())
    "the methodology compiled now ('example' v1, en, fingerprint ...)"
    """
    return f"the methodology compiled now ({m.name!r} v{m.version}, {m.language}, fingerprint {fingerprint(m)})"


def compile_file(path: str | Path) -> dict[str, dict]:
    """{"output_schema", "rubric"} of the methodology file at `path` (stage `methodology`);
    raises MethodologyError naming the problem."""
    m = load(path)
    return {"output_schema": output_schema(m), "rubric": rubric(m)}


def load_methodology(out_dir: str | Path) -> Methodology:
    """The methodology as the `methodology` stage compiled it into `out_dir` (its rubric.json)."""
    return from_rubric(json.loads((Path(out_dir) / "rubric.json").read_text(encoding="utf-8")))


def load_compiled(out_dir: str | Path) -> tuple[Methodology, dict[str, Any]]:
    """(methodology, output_schema) as the `methodology` stage wrote them into `out_dir`."""
    schema = json.loads((Path(out_dir) / "output_schema.json").read_text(encoding="utf-8"))
    return load_methodology(out_dir), schema


def from_rubric(r: dict[str, Any]) -> Methodology:
    """Rebuild the methodology from its compiled rubric (what downstream stages read)."""
    return parse(
        {
            "name": r["name"],
            "version": r["version"],
            "language": r["language"],
            "scoring": r["scoring"],
            "criteria": [
                {k: c[k] for k in ("id", "metric", "weight", "higher_is_better", "label")} for c in r["criteria"]
            ],
            "grades": [
                {"grade": b["grade"], "min": b["min"], "max": b["max"], "label": b["label"]} for b in r["bands"]
            ],
            "output": {"reasoning": r["reasoning"], "cite_top": r["cite_top"]},
            "context": r.get("context", []),
            "coverage": r.get("coverage"),
            "qualitative": [
                {k: q[k] for k in ("id", "weight", "label", "scale", "guidance")} for q in r.get("qualitative", [])
            ],
        },
        where="rubric",
    )


# ---------------------------------------------------------------- rule scorer


def criterion_percentiles(
    m: Methodology, funds: pd.DataFrame, within_category: bool = True, with_context: bool = False
) -> pd.DataFrame:
    """Per-criterion percentile (0-100, 100 = best) of each fund within its category
    (or, with `within_category=False`, among all funds passed in); `with_context` adds
    the context metrics' columns.

    A criterion whose metric column is absent is all-NaN (left out by the scorer).
    """
    wanted = [c for c in m.criteria + (m.context if with_context else ()) if c.metric in funds]
    # one column per criterion (two criteria may read one metric), the group beside them
    frame = pd.DataFrame({c.id: funds[c.metric] for c in wanted}, index=funds.index)
    frame["_group"] = funds["category"] if within_category else 0
    pct = percentiles_within(frame, {c.id: c.higher_is_better for c in wanted}, group="_group")
    return pct.reindex(columns=[c.id for c in m.criteria + (m.context if with_context else ())])


def coverage(m: Methodology, percentiles: pd.DataFrame) -> pd.Series:
    """Per fund, the share of the numeric criteria's weight it has data for (a criterion's percentile is
    known); qualitative criteria are judged from documents, not counted here.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> coverage(example_methodology(), pd.DataFrame({"sharpe_3y": [50.0, None], "cost": [None, None]})).tolist()
    [0.6, 0.0]
    """
    weights = pd.Series({c.id: c.weight for c in m.criteria})
    return (percentiles[[c.id for c in m.criteria]].notna().mul(weights, axis=1).sum(axis=1) / weights.sum()).round(6)


def not_rated(m: Methodology, percentiles: pd.DataFrame) -> pd.Series:
    """Per fund, why the methodology does not rate it (in its language), or None when it does: data for
    less than `m.min_coverage` of the criteria weight, or a `required` criterion missing. The reason
    names the criteria the fund lacks, so a reader knows what data would rate it.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> r = not_rated(example_methodology(), pd.DataFrame({"sharpe_3y": [50.0, None], "cost": [10.0, 20.0]}))
    >>> r[0] is None, r[1]
    (True, 'not rated: data for 40% of the criteria weight, the methodology needs 50%; missing: Sharpe ratio')
    """
    share = coverage(m, percentiles)
    present = percentiles[[c.id for c in m.criteria]].notna()
    short = (share < m.min_coverage - 1e-9).to_numpy()
    required = [c.id for c in m.criteria if c.id in m.required]
    unmet_any = ~present[required].all(axis=1).to_numpy()  # no required criterion: all() of nothing, True
    out = pd.Series([None] * len(percentiles), index=percentiles.index, dtype=object)
    # the reason is written for the unrated funds only: serving scores one fund against the whole universe
    has = present.to_numpy()
    for pos in np.flatnonzero(short | unmet_any):
        lacking = [c for c, known in zip(m.criteria, has[pos]) if not known]
        unmet = [c for c in lacking if c.id in m.required]
        names = ", ".join(m.label(c) for c in lacking)
        needed = ", ".join(m.label(c) for c in unmet)
        if m.language == "ko":
            why = (f"기준 가중치의 {share.iloc[pos]:.0%}만 자료가 있어 방법론 기준 {m.min_coverage:.0%}에 미달"
                   if short[pos] else f"필수 기준({needed}) 자료 없음")  # fmt: skip
            out.iloc[pos] = f"평가 제외: {why}; 자료 없는 기준: {names}"
        else:
            why = (f"data for {share.iloc[pos]:.0%} of the criteria weight, the methodology needs {m.min_coverage:.0%}"
                   if short[pos] else f"no data for the required criterion {needed}")  # fmt: skip
            out.iloc[pos] = f"not rated: {why}; missing: {names}"
    return out


def rule_score(m: Methodology, funds: pd.DataFrame, percentiles: pd.DataFrame | None = None) -> pd.DataFrame:
    """Apply the methodology to funds: columns `rule_score` (0-100) and `rule_grade`; both missing
    (NaN, <NA>) for a fund the methodology does not rate (`not_rated`: too little of the criteria
    weight has data, or a required criterion none): no placeholder a reader could take for a verdict.

    `percentiles` (from `criterion_percentiles` over the whole peer universe) may be
    passed so a subset of funds is scored against all its peers.

    >>> m = parse({"criteria": [{"metric": "sharpe_3y", "weight": 1}],
    ...            "grades": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}]})
    >>> funds = pd.DataFrame({"category": ["a", "a", "a"], "sharpe_3y": [0.1, 0.9, None]})
    >>> rule_score(m, funds).to_dict("list")
    {'rule_score': [0.0, 100.0, nan], 'rule_grade': [1, 2, None]}
    """
    pct = criterion_percentiles(m, funds) if percentiles is None else percentiles.loc[funds.index]
    weights = pd.Series({c.id: c.weight for c in m.criteria})
    present = pct.notna()
    weight_sum = present.mul(weights, axis=1).sum(axis=1)
    composite = pct.fillna(0).mul(weights, axis=1).sum(axis=1) / weight_sum.replace(0, np.nan)
    composite = composite.where(not_rated(m, pct).isna())  # too little data: no score, and not ranked below
    if m.scoring == "ranked":
        frame = pd.DataFrame({"category": funds["category"], "composite": composite})
        score = percentile_within(frame, "composite")
    else:
        score = composite
    grade = pd.array([m.grade_for(s) if pd.notna(s) else pd.NA for s in score], dtype="Int64")
    return pd.DataFrame({"rule_score": score.round(1), "rule_grade": grade}, index=funds.index)


def uncovered_grades(expert_grade: pd.Series, grades: list[int]) -> str | None:
    """What is wrong when the experts give grades the methodology has no band for (None when
    nothing is): the grades, the first data rows that carry them, and the fix. Every stage that
    reads both the grades and the methodology asks this first.

    >>> uncovered_grades(pd.Series([1, 3, None, 5]), [1, 2])[:80]
    'expert_grade 3, 5 (data rows 2, 4, ...) is not a grade of the methodology, whose'
    >>> uncovered_grades(pd.Series([1, 2]), [1, 2]) is None
    True
    """
    labelled = expert_grade.dropna().astype(int)
    unknown = sorted(set(labelled) - set(grades))
    if not unknown:
        return None
    rows = [i + 1 for i in labelled.index[labelled.isin(unknown)][:3]]
    return (
        f"expert_grade {', '.join(map(str, unknown))} (data rows {', '.join(map(str, rows))}, ...) is not a grade "
        f"of the methodology, whose grades are {list(grades)}; the methodology's bands must cover every grade the "
        "analysts give"
    )
