"""Reward functions for GRPO, TRL style: `(completions, **columns) -> list[float | None]`.

Each is a pure module-level function: it reads the completion and the dataset columns TRL
passes in (`expert_grade`, `expert_score`, `evidence`) and nothing else. What a reward needs
from the methodology or the settings (the output schema, the rubric, `grpo.score_tolerance` ...)
comes as keyword arguments, which `bind` fills from `params.yaml`; the rewards, in the order
of `fundgrpo.params.RULE_REWARDS`, are `REWARDS`. A malformed completion gets 0, never an
exception; a sample with no label gets None, which TRL leaves out of the mean.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import re
from typing import Any, Callable

import jsonschema

from fundgrpo.methodology import compiler
from fundgrpo.methodology.prompts import BOTTOM_WORDS, TOP_WORDS
from fundgrpo.params import RULE_REWARDS, GrpoParams

RewardFn = Callable[..., list]


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
    obj = parse_answer(text)
    if obj is None:
        return None
    try:
        jsonschema.validate(obj, schema)
    except (jsonschema.ValidationError, RecursionError):
        return None
    return obj


def never_raises(fn: RewardFn) -> RewardFn:
    """A reward that must not stop a GRPO step: an item whose reward raises gets 0 (logged).

    >>> def shaky(completions, **kw): return [1.0 / len(c) for c in completions]
    >>> never_raises(shaky)(["ab", ""])
    [0.5, 0.0]
    """

    @functools.wraps(fn)
    def guarded(completions: list, **columns: Any) -> list:
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


def example_methodology() -> tuple[dict, dict]:
    """(rubric, output schema) of a one-criterion methodology with two grades, for the examples below."""
    m = compiler.parse(
        {
            "criteria": [{"metric": "sharpe_3y", "weight": 1, "label": "Sharpe ratio"}],
            "grades": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}],
        }
    )
    return compiler.rubric(m), compiler.output_schema(m)


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
    completions: list, expert_grade: list, *, schema: dict, grade_step_penalty: float, **columns: Any
) -> list[float | None]:
    """Ordinal agreement: 1 exact, minus `grade_step_penalty` per grade off, floored at 0; None unlabelled.

    >>> _, schema = example_methodology()
    >>> good = '{"grade": 2, "score": 80, "reasoning": "ok"}'
    >>> grade_reward([good, good, good], expert_grade=[2, 1, None], schema=schema, grade_step_penalty=0.5)
    [1.0, 0.5, None]
    """
    out: list[float | None] = []
    for a, g in zip(answers(completions, schema), expert_grade):
        if _missing(g):
            out.append(None)
        elif a is None:
            out.append(0.0)
        else:
            out.append(max(0.0, 1.0 - grade_step_penalty * abs(int(a["grade"]) - int(g))))
    return out


def score_reward(
    completions: list,
    expert_grade: list,
    expert_score: list | None = None,
    *,
    schema: dict,
    rubric: dict,
    score_tolerance: float,
    **columns: Any,
) -> list[float | None]:
    """1 at the expert's score, falling linearly to 0 at `score_tolerance` points away.

    Without an expert score the target is the midpoint of the expert grade's band.

    >>> rubric, schema = example_methodology()
    >>> good = '{"grade": 2, "score": 80, "reasoning": "ok"}'
    >>> score_reward([good, good], [2, 1], [80.0, 20.0], schema=schema, rubric=rubric, score_tolerance=25)
    [1.0, 0.0]
    >>> score_reward([good], [2], schema=schema, rubric=rubric, score_tolerance=25)  # band midpoint 75
    [0.8]
    """
    midpoint = {b["grade"]: (b["min"] + b["max"]) / 2 for b in rubric["bands"]}
    scores = expert_score if expert_score is not None else [None] * len(completions)
    out: list[float | None] = []
    for a, g, s in zip(answers(completions, schema), expert_grade, scores):
        if _missing(g) and _missing(s):
            out.append(None)
            continue
        target = midpoint[int(g)] if _missing(s) else float(s)
        out.append(0.0 if a is None else max(0.0, 1.0 - abs(float(a["score"]) - target) / score_tolerance))
    return out


def evidence_reward(completions: list, evidence: list, *, schema: dict, rubric: dict, **columns: Any) -> list[float]:
    """Does the reasoning cite the weightiest criteria, and place the fund on the right side?

    For each criterion label found in the reasoning: full credit if the words after it
    say top/bottom on the side the percentile is on, half credit with no side, none
    for the wrong side; weighted by the criterion weights and normalised by the
    weight of the `cite_top` criteria that a reference reasoning cites.

    >>> rubric, schema = example_methodology()
    >>> says = lambda side: f'{{"grade": 2, "score": 80, "reasoning": "Sharpe ratio {side} 20%"}}'
    >>> evidence_reward([says("top"), says("bottom")], ['{"sharpe_3y": 85}'] * 2, schema=schema, rubric=rubric)
    [1.0, 0.0]
    """
    labels = {c["id"]: c["label"] for c in rubric["criteria"]}
    weights = {c["id"]: c["weight"] for c in rubric["criteria"]}
    top_word, bottom_word = TOP_WORDS[rubric["language"]], BOTTOM_WORDS[rubric["language"]]
    out = []
    for a, ev in zip(answers(completions, schema), evidence):
        if a is None:
            out.append(0.0)
            continue
        pct = json.loads(ev) if isinstance(ev, str) else ev
        reasoning = a["reasoning"]
        got = 0.0
        for cid, label in labels.items():
            at = reasoning.find(label)
            if at < 0 or _missing(pct.get(cid)):
                continue
            clause = re.split(r"[;,.\n]", reasoning[at + len(label) :], maxsplit=1)[0]
            says_top, says_bottom = top_word in clause, bottom_word in clause
            if says_top == says_bottom:  # neither, or both
                credit = 0.5
            else:
                credit = 1.0 if says_top == (pct[cid] >= 50) else 0.0
            got += credit * weights[cid]
        possible = sorted((weights[c] for c in pct if c in weights and not _missing(pct[c])), reverse=True)
        need = sum(possible[: rubric.get("cite_top", 3)]) or 1.0
        out.append(min(1.0, got / need))
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
REWARDS: dict[str, RewardFn] = {name: globals()[f"{name}_reward"] for name in RULE_REWARDS}


def settings(rubric: dict, schema: dict, params: GrpoParams) -> dict[str, Any]:
    """Every keyword a rule reward may take; `bind` hands each reward the ones it declares."""
    return {
        "schema": schema,
        "rubric": rubric,
        "score_tolerance": params.score_tolerance,
        "grade_step_penalty": params.grade_step_penalty,
        "reasoning_chars": tuple(params.reasoning_chars),
    }


def bind(rubric: dict, schema: dict, params: GrpoParams) -> dict[str, RewardFn]:
    """The rule rewards with their settings filled in, ready for TRL (`__name__` kept; never raising).

    >>> rubric, schema = example_methodology()
    >>> rewards = bind(rubric, schema, GrpoParams())
    >>> list(rewards), rewards["grade"].__name__
    (['json', 'grade', 'score', 'evidence', 'length'], 'grade_reward')
    >>> rewards["grade"](['{"grade": 2, "score": 80, "reasoning": "ok"}', "{"], expert_grade=[1, 1])
    [0.0, 0.0]
    """
    given = settings(rubric, schema, params)
    out = {}
    for name, fn in REWARDS.items():
        takes = inspect.signature(fn).parameters
        bound = functools.partial(fn, **{k: v for k, v in given.items() if k in takes})
        out[name] = never_raises(functools.update_wrapper(bound, fn))
    return out
