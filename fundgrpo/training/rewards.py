"""Reward functions for GRPO, TRL style: `(completions, **columns) -> list[float | None]`.

Each is a pure module-level function: it reads the completion and the dataset columns TRL
passes in (`expert_grade`, `expert_score`, `evidence`, `shown_grade`, `rule_grade`, and with
documents `documents` and `pillars`) and nothing else. What a reward needs from the methodology or
the settings (the output schema, the methodology, `grpo.score_tolerance` ...) comes as keyword
arguments, which `bind` fills from `params.yaml`; the rewards, in the order of
`fundgrpo.params.RULE_REWARDS`, are `REWARDS`. A malformed completion gets 0, never an
exception; a sample with no label gets None, which TRL leaves out of the mean.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
from typing import Any, Callable

from fundgrpo.methodology import citations, claims, compiler
from fundgrpo.methodology.answers import completion_text, parse_answer, valid_answer
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord, expert_grades
from fundgrpo.params import RULE_REWARDS, GrpoParams

RewardFn = Callable[..., list]


def never_raises(fn: RewardFn) -> RewardFn:
    """A reward that must not stop a GRPO step: an item whose reward raises gets 0 (logged).

    A column whose length is not the completions' is a caller's mistake, not a bad item: that
    raises, naming the column (zip would silently score only the shorter).

    >>> def shaky(completions, **kw): return [1.0 / len(c) for c in completions]
    >>> never_raises(shaky)(["ab", ""])
    [0.5, 0.0]
    >>> never_raises(shaky)(["ab", "c"], expert_grade=[3])
    Traceback (most recent call last):
    ValueError: shaky: column expert_grade has 1 values for 2 completions
    """

    @functools.wraps(fn)
    def guarded(completions: list, **columns: Any) -> list:
        for k, v in columns.items():
            if isinstance(v, (list, tuple)) and len(v) != len(completions):
                raise ValueError(f"{fn.__name__}: column {k} has {len(v)} values for {len(completions)} completions")
        try:
            return fn(completions, **columns)
        except Exception:  # noqa: BLE001 - retried item by item below, so one bad item costs only itself
            out = []
            for i in range(len(completions)):
                one = {
                    k: (v[i : i + 1] if isinstance(v, (list, tuple)) and len(v) == len(completions) else v)
                    for k, v in columns.items()
                }
                try:
                    out.extend(fn(completions[i : i + 1], **one))
                except Exception as err:  # noqa: BLE001
                    logging.getLogger(__name__).warning(
                        "%s: item %d scored 0 (%s: %s)", fn.__name__, i, type(err).__name__, err
                    )
                    out.append(0.0)
            return out

    return guarded


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def example_methodology() -> tuple[Methodology, dict]:
    """(methodology, output schema) of a one-criterion methodology with two grades, for the examples below."""
    m = compiler.parse(
        {
            "criteria": [{"metric": "sharpe_3y", "weight": 1, "label": "Sharpe ratio"}],
            "grades": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}],
        }
    )
    return m, compiler.output_schema(m)


def answers(completions: list, schema: dict) -> list[dict | None]:
    """Each completion's answer if it is one JSON object that fits the schema, else None."""
    return [valid_answer(completion_text(c), schema) for c in completions]


def json_reward(completions: list, *, schema: dict, **columns: Any) -> list[float]:
    """1 if the completion is exactly one JSON object that fits the schema, else 0.

    >>> _, schema = example_methodology()
    >>> json_reward(['{"grade": 2, "score": 80, "reasoning": "ok"}', "not json"], schema=schema)
    [1.0, 0.0]
    """
    return [0.0 if a is None else 1.0 for a in answers(completions, schema)]


def grade_reward(
    completions: list,
    expert_grade: list,
    *,
    schema: dict,
    grade_step_penalty: float,
    grade_weights: dict | None = None,
    **columns: Any,
) -> list[float | None]:
    """Ordinal agreement: 1 exact, minus `grade_step_penalty` per grade off, floored at 0; None unlabelled.

    `grade_weights` (expert grade -> weight, `balanced_weights`) scales it by the expert grade's
    rarity, so that answering one grade to every fund earns no more than 1 / number of grades on
    average: a policy cannot raise its reward by collapsing onto the commonest grade.

    >>> _, schema = example_methodology()
    >>> good = '{"grade": 2, "score": 80, "reasoning": "ok"}'
    >>> grade_reward([good, good, good], expert_grade=[2, 1, None], schema=schema, grade_step_penalty=0.5)
    [1.0, 0.5, None]
    >>> grade_reward([good], expert_grade=[2], schema=schema, grade_step_penalty=1.0, grade_weights={2: 2.5})
    [2.5]
    """
    out: list[float | None] = []
    for a, g in zip(answers(completions, schema), expert_grade):
        if _missing(g):
            out.append(None)
        elif a is None:
            out.append(0.0)
        else:
            weight = grade_weights.get(int(g), 1.0) if grade_weights else 1.0
            out.append(weight * max(0.0, 1.0 - grade_step_penalty * abs(int(a["grade"]) - int(g))))
    return out


def balanced_weights(expert_grades: list) -> dict[int, float]:
    """Expert grade -> n / (grades present x its count): the mean weight over these funds is 1, and
    every grade carries the same total weight.

    >>> balanced_weights([3, 3, 3, 1])
    {1: 2.0, 3: 0.6667}
    """
    labelled = [int(g) for g in expert_grades if not _missing(g)]
    counts = {g: labelled.count(g) for g in sorted(set(labelled))}
    return {g: round(len(labelled) / (len(counts) * c), 4) for g, c in counts.items()}


def score_reward(
    completions: list,
    expert_grade: list,
    expert_score: list | None = None,
    *,
    schema: dict,
    methodology: Methodology,
    score_tolerance: float,
    **columns: Any,
) -> list[float | None]:
    """1 at the expert's score, falling linearly to 0 at `score_tolerance` points away.

    Without an expert score the target is the midpoint of the expert grade's band.

    >>> methodology, schema = example_methodology()
    >>> good = '{"grade": 2, "score": 80, "reasoning": "ok"}'
    >>> score_reward([good, good], [2, 1], [80.0, 20.0], schema=schema, methodology=methodology, score_tolerance=25)
    [1.0, 0.0]
    >>> score_reward([good], [2], schema=schema, methodology=methodology, score_tolerance=25)  # band midpoint 75
    [0.8]
    """
    midpoint = {b.grade: b.midpoint for b in methodology.bands}
    scores = expert_score if expert_score is not None else [None] * len(completions)
    out: list[float | None] = []
    for a, g, s in zip(answers(completions, schema), expert_grade, scores):
        if _missing(g) and _missing(s):
            out.append(None)
            continue
        target = midpoint[int(g)] if _missing(s) else float(s)
        out.append(0.0 if a is None else max(0.0, 1.0 - abs(float(a["score"]) - target) / score_tolerance))
    return out


def evidence_reward(
    completions: list,
    evidence: list,
    rule_grade: list | None = None,
    *,
    schema: dict,
    methodology: Methodology,
    **columns: Any,
) -> list[float]:
    """Is the evaluation complete and right? `methodology.claims.score`: every checkable claim (the
    verdict against the grade, the methodology's grade against `rule_grade` and the direction the
    grade moved from it, each named criterion's side, band and numbers) earns `claims.CLAIM_CREDIT`
    times its weight, a misstatement costing twice what a right claim earns, within -1..1.

    >>> methodology, schema = example_methodology()
    >>> says = lambda side: f'{{"grade": 2, "score": 80, "reasoning": "Sharpe ratio {side} 20%"}}'
    >>> pct = ['{"sharpe_3y": 85}'] * 4
    >>> evidence_reward([says("top"), says("bottom"), says(""), says("top 10%; Sharpe ratio")], pct,
    ...                 schema=schema, methodology=methodology)
    [1.0, -1.0, 0.25, -1.0]
    """
    rules = rule_grade if rule_grade is not None else [None] * len(completions)
    return [
        0.0 if a is None else claims.score(a["reasoning"], ev, methodology, a["grade"], None if _missing(r) else int(r))
        for a, ev, r in zip(answers(completions, schema), evidence, rules)
    ]


def departure_reward(
    completions: list,
    expert_grade: list,
    shown_grade: list | None = None,
    *,
    schema: dict,
    departure_cost: float,
    **columns: Any,
) -> list[float | None]:
    """A bet on departing from the grade the prompt suggested (`shown_grade`: the statistical
    estimate shown, else the methodology's grade): agreeing earns 0.5, a right departure 1, a wrong
    one 0.5 - 0.5 * `departure_cost`. With cost c, departing pays in expectation only when it is
    right more often than c / (1 + c) (cost 1: one time in two). 0 malformed; None with no label or
    nothing shown.

    >>> _, schema = example_methodology()
    >>> say = lambda grade: f'{{"grade": {grade}, "score": 50, "reasoning": "ok"}}'
    >>> departure_reward([say(1), say(2), say(2), say(1), "{"], [2, 2, 1, None, 2], [1, 1, 1, 1, 1],
    ...                  schema=schema, departure_cost=1.0)
    [0.5, 1.0, 0.0, None, 0.0]
    """
    shown = shown_grade if shown_grade is not None else [None] * len(completions)
    out: list[float | None] = []
    for a, g, s in zip(answers(completions, schema), expert_grade, shown):
        if _missing(g) or _missing(s):
            out.append(None)
        elif a is None:
            out.append(0.0)
        elif int(a["grade"]) == int(s):
            out.append(0.5)
        else:
            out.append(1.0 if int(a["grade"]) == int(g) else 0.5 - 0.5 * departure_cost)
    return out


def calibration_reward(completions: list, expert_grade: list, *, schema: dict, **columns: Any) -> list[float | None]:
    """How well the stated confidence matches being right: 1 minus the Brier score of
    `confidence` (percent) against whether the grade is the expert's (a proper scoring rule, as in
    RLCR: saying 90 is best exactly when right 9 times in 10). 0 for an answer that is invalid or
    states no confidence; None unlabelled.

    >>> _, schema = example_methodology()
    >>> say = lambda grade, c: f'{{"grade": {grade}, "score": 80, "reasoning": "ok", "confidence": {c}}}'
    >>> calibration_reward([say(2, 90), say(1, 90), say(1, 10), say(2, 90)], [2, 2, 2, None], schema=schema)
    [0.99, 0.19, 0.99, None]
    >>> calibration_reward(['{"grade": 2, "score": 80, "reasoning": "ok"}'], [2], schema=schema)
    [0.0]
    """
    out: list[float | None] = []
    for a, g in zip(answers(completions, schema), expert_grade):
        if _missing(g):
            out.append(None)
        elif a is None or "confidence" not in a:
            out.append(0.0)
        else:
            right = float(int(a["grade"]) == int(g))
            out.append(round(1.0 - (a["confidence"] / 100.0 - right) ** 2, 6))
    return out


def length_reward(completions: list, *, schema: dict, reasoning_chars: tuple[int, int], **columns: Any) -> list[float]:
    """1 when the reasoning's length is within the band, falling to 0 at 0 or twice the maximum.

    >>> _, schema = example_methodology()
    >>> answer = lambda text: f'{{"grade": 2, "score": 80, "reasoning": "{text}"}}'
    >>> length_reward([answer("x" * 10), answer("x"), answer("x" * 60)], schema=schema, reasoning_chars=(5, 40))
    [1.0, 0.2, 0.5]
    """
    low_chars, high_chars = reasoning_chars
    out = []
    for a in answers(completions, schema):
        if a is None:
            out.append(0.0)
            continue
        n = len(a["reasoning"])
        if n < low_chars:
            out.append(n / low_chars)
        elif n <= high_chars:
            out.append(1.0)
        else:
            out.append(max(0.0, 1.0 - (n - high_chars) / high_chars))
    return out


# The rule rewards by name, in the order of params.RULE_REWARDS (the one list of names; each
# `<name>_reward` above). TRL logs each as rewards/<function name>.
def citations_reward(
    completions: list, documents: list | None = None, *, schema: dict, methodology: Methodology, **columns: Any
) -> list[float | None]:
    """The qualitative criteria covered and their citations verified (`methodology.citations.reward`) against
    the documents the prompt showed; None where the record has no documents column (no qualitative criteria).

    >>> methodology, schema = example_methodology()
    >>> citations_reward(['{"grade": 2, "score": 80, "reasoning": "ok"}'], schema=schema, methodology=methodology)
    [None]
    """
    if documents is None or not methodology.qualitative:
        return [None] * len(completions)
    ids = tuple(q.id for q in methodology.qualitative)
    return [
        0.0 if a is None else citations.reward(a.get("pillars"), json.loads(d), ids)
        for a, d in zip(answers(completions, schema), documents)
    ]


def pillars_reward(
    completions: list, pillars: list | None = None, *, methodology: Methodology, **columns: Any
) -> list[float | None]:
    """The share of the criteria the analysts judged from the documents that the answer judges the same
    way (`methodology.citations.directions`); None where nothing was judged from documents.

    >>> ref = ['{"people": {"judgement": -1, "evidence": []}, "parent": {"judgement": 1, "evidence": []}}']
    >>> said = '{"grade": 2, "score": 80, "reasoning": "ok", "pillars": {"people": {"judgement": -1, "evidence": []}}}'
    >>> pillars_reward([said], pillars=ref, methodology=compiler.load("methodology/documents.yaml"))
    [0.5]
    """
    if pillars is None or not methodology.qualitative:
        return [None] * len(completions)
    out: list[float | None] = []
    for text, ref in zip(completions, pillars):
        if ref is None:  # no analyst judged this fund from its documents
            out.append(None)
            continue
        same = citations.directions((parse_answer(completion_text(text)) or {}).get("pillars"), json.loads(ref))
        out.append(sum(same) / len(same) if same else None)
    return out


REWARDS: dict[str, RewardFn] = {name: globals()[f"{name}_reward"] for name in RULE_REWARDS}


def settings(
    methodology: Methodology, schema: dict, params: GrpoParams, train_rows: list[PromptRecord] | None = None
) -> dict[str, Any]:
    """Every keyword a rule reward may take; `bind` hands each reward the ones it declares."""
    balance = params.balance_grades and train_rows
    return {
        "schema": schema,
        "methodology": methodology,
        "score_tolerance": params.score_tolerance,
        "grade_step_penalty": params.grade_step_penalty,
        "grade_weights": balanced_weights(expert_grades(train_rows or [])) if balance else None,
        "reasoning_chars": tuple(params.reasoning_chars),
        "departure_cost": params.departure_cost,
    }


def bind(
    methodology: Methodology, schema: dict, params: GrpoParams, train_rows: list[PromptRecord] | None = None
) -> dict[str, RewardFn]:
    """The rule rewards with their settings filled in, ready for TRL (`__name__` kept; never raising).
    `train_rows` give the grade reward its weights when `grpo.balance_grades` is on.

    >>> methodology, schema = example_methodology()
    >>> rewards = bind(methodology, schema, GrpoParams())
    >>> list(rewards)[-3:], rewards["grade"].__name__
    (['departure', 'citations', 'pillars'], 'grade_reward')
    >>> rewards["grade"](['{"grade": 2, "score": 80, "reasoning": "ok"}', "{"], expert_grade=[1, 1])
    [0.0, 0.0]
    """
    given = settings(methodology, schema, params, train_rows)
    out = {}
    for name, fn in REWARDS.items():
        takes = inspect.signature(fn).parameters
        bound = functools.partial(fn, **{k: v for k, v in given.items() if k in takes})
        out[name] = never_raises(functools.update_wrapper(bound, fn))
    return out
