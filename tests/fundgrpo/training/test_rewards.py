import dataclasses
import json
from dataclasses import replace

import pytest
import yaml

from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import RULE_REWARDS, GrpoParams, RewardWeights
from fundgrpo.training.rewards import REWARDS, bind, example_methodology, json_reward
from tests.support import REPO

# rewards that read documents: None for every item when the methodology judges nothing from documents
FROM_DOCUMENTS = ("citations", "pillars")
DOCUMENT_COLUMNS = {"documents": '{"D1": "The lead manager resigned."}', "pillars": '{"people": {"judgement": -1}}'}


@pytest.fixture(params=["default.yaml", "default_ko.yaml", "documents.yaml"])
def setup(request, repo_root):
    m = meth.load(repo_root / "methodology" / request.param)
    return m, bind(m, meth.output_schema(m), replace(GrpoParams(), reasoning_chars=(10, 80), grade_step_penalty=0.5))


def answer(grade, score, reasoning):
    return [
        {
            "role": "assistant",
            "content": json.dumps({"grade": grade, "score": score, "reasoning": reasoning}, ensure_ascii=False),
        }
    ]


MALFORMED = [
    "",
    "{",
    '{"grade": 3}',  # missing fields
    '{"grade": 7, "score": 50, "reasoning": "x"}',  # grade outside the scale
    '{"grade": "3", "score": 50, "reasoning": "x"}',  # wrong type
    '{"grade": 3, "score": 150, "reasoning": "x"}',  # score outside 0-100
    '{"grade": 3, "score": 50, "reasoning": "x", "extra": 1}',
    '{"grade": 3, "score": 50, "reasoning": "x"} trailing',
    "[3, 50]",
    "null",
]


def test_malformed_completions_get_zero_not_errors(setup):
    _, rewards = setup
    cols = {
        "expert_grade": [3] * len(MALFORMED),
        "expert_score": [50.0] * len(MALFORMED),
        "evidence": ["{}"] * len(MALFORMED),
        "shown_grade": [3] * len(MALFORMED),
        **{k: [v] * len(MALFORMED) for k, v in DOCUMENT_COLUMNS.items()},
    }
    m, _ = setup
    for name, fn in rewards.items():
        nothing = name in FROM_DOCUMENTS and not m.qualitative
        assert fn(MALFORMED, **cols) == [None if nothing else 0.0] * len(MALFORMED), name


def test_grade_reward_is_ordinal_and_skips_unlabelled(setup):
    _, rewards = setup
    comps = [answer(g, 50, "x" * 20) for g in (3, 4, 5, 1)]
    got = rewards["grade"](comps, expert_grade=[3, 3, 3, None])
    assert got == [1.0, 0.5, 0.0, None]


def test_score_reward_falls_back_to_band_midpoint(setup):
    _, rewards = setup
    got = rewards["score"]([answer(3, 50, "x")] * 2, expert_grade=[3, 3], expert_score=[None, 75.0])
    assert got == [1.0, 0.0]


def test_evidence_reward_in_the_methodology_language(setup):
    r, rewards = setup
    label = {c.id: r.label(c) for c in r.criteria}
    top, bottom = ("top", "bottom") if r.language == "en" else ("상위", "하위")
    ev = [json.dumps({"sharpe": 90, "return": 20, "cost": 50, "drawdown": 50, "information_ratio": 50})] * 4
    right = f"{label['sharpe']} {top} 10%; {label['return']} {bottom} 20%"
    wrong = f"{label['sharpe']} {bottom} 10%; {label['return']} {top} 20%"
    vague = f"{label['sharpe']}; {label['return']}"
    got = rewards["evidence"]([answer(4, 70, t) for t in (right, wrong, vague, "nothing cited here")], evidence=ev)
    assert got[0] == pytest.approx(1.0)
    assert got[1] == -1.0  # wrong on both: below citing nothing
    assert got[2] == pytest.approx(0.25)
    assert got[3] == 0.0
    wrong_band = f"{label['sharpe']} {top} 10%; {label['return']} {bottom} 10%"  # return is at 20: not the bottom 10 %
    assert rewards["evidence"]([answer(4, 70, wrong_band)], evidence=ev[:1])[0] < 0.0


def test_citing_less_is_never_worse_than_citing_wrongly(setup):
    """A policy that cites every criterion, each wrongly (side or band), earns less than one that cites
    nothing, and adding a wrong claim to right ones always lowers the reward."""
    r, rewards = setup
    top, bottom = ("top", "bottom") if r.language == "en" else ("상위", "하위")
    pct = {"sharpe": 95, "return": 72, "cost": 8, "drawdown": 40, "information_ratio": 61}
    ev = [json.dumps(pct)]

    def says(ids, band):  # band(pct) -> the words after the label
        return answer(4, 70, "; ".join(f"{r.label(c)} {band(pct[c.id])}" for c in r.criteria if c.id in ids))

    def right(p):
        return f"{top} {max(10, -(-(100 - p) // 10) * 10)}%" if p >= 50 else f"{bottom} {max(10, -(-p // 10) * 10)}%"

    def wrong_side(p):
        return f"{bottom} 50%" if p >= 50 else f"{top} 50%"

    def wrong_band(p):
        return f"{top} {max(1, 100 - p - 5)}%" if p >= 50 else f"{bottom} {max(1, p - 5)}%"

    everything = set(pct)
    nothing = rewards["evidence"]([answer(4, 70, "no criterion named")], evidence=ev)[0]
    for wrong in (wrong_side, wrong_band):
        assert rewards["evidence"]([says(everything, wrong)], evidence=ev)[0] < nothing == 0.0
    all_right = rewards["evidence"]([says(everything, right)], evidence=ev)[0]
    assert all_right == pytest.approx(1.0)
    two_right = rewards["evidence"]([says({"sharpe", "cost"}, right)], evidence=ev)[0]
    text = "; ".join(
        [f"{r.label(c)} {right(pct[c.id])}" for c in r.criteria if c.id in ("sharpe", "cost")]
        + [f"{r.label(c)} {wrong_side(pct[c.id])}" for c in r.criteria if c.id == "return"]
    )
    mixed = answer(4, 70, text)
    assert rewards["evidence"]([mixed], evidence=ev)[0] < two_right


def test_departure_reward_pays_only_departures_that_are_right_often_enough(setup):
    """The departure reward is a bet: departing from the suggested grade pays in expectation only when
    right more often than cost / (1 + cost); at the default cost 1, more than one time in two."""
    _, rewards = setup
    shown, n = 3, 10

    def mean(answered, right_share):  # a policy that answers `answered` where the experts give 4 this often
        experts = [4] * round(n * right_share) + [3] * (n - round(n * right_share))
        got = rewards["departure"]([answer(answered, 70, "x" * 20)] * n, expert_grade=experts, shown_grade=[shown] * n)
        return sum(got) / n

    agree = mean(3, 0.5)
    assert mean(4, 0.7) > agree > mean(4, 0.3)
    assert mean(4, 0.5) == pytest.approx(agree)  # the break-even at cost 1
    assert rewards["departure"]([answer(4, 70, "x")], expert_grade=[4], shown_grade=[None]) == [None]


def test_length_reward_band(setup):
    _, rewards = setup
    got = rewards["length"]([answer(3, 50, "x" * n) for n in (5, 40, 120, 400)])
    assert got == [0.5, 1.0, 0.5, 0.0]


HOSTILE = [
    [{"role": "assistant", "content": None}],  # a message without text
    [{"role": "assistant"}, "stray", None, 7],  # not messages at all
    None,
    b'{"grade": 3}',
    "[" * 100_000,  # nesting deeper than the parser's recursion limit
    '{"a": ' * 5000 + "1" + "}" * 5000,
    '{"grade": 3, "score": NaN, "reasoning": "Sharpe ratio top 10%"}',  # not JSON, though Python's json reads it
    '{"grade": 3, "score": Infinity, "reasoning": "Sharpe ratio top 10%"}',
    '{"grade": 3, "score": 1e999, "reasoning": "Sharpe ratio top 10%"}',
    '{"grade": 3, "score": 50, "reasoning": "\\u0000\\ud800"}',  # NUL and a lone surrogate
    "\x00" * 64,
]


def test_rewards_never_raise_on_hostile_completions_or_columns(setup):
    """A reward that raises would stop the GRPO step; each item gets a number (0 when malformed)."""
    _, rewards = setup
    n = len(HOSTILE)
    columns = dict(
        expert_grade=[3] * n, expert_score=[50.0] * n, evidence=['{"sharpe_3y": 80}'] * n, shown_grade=[2] * n
    )
    columns.update({k: [v] * n for k, v in DOCUMENT_COLUMNS.items()})
    m, _ = setup
    for name, fn in rewards.items():
        if name in FROM_DOCUMENTS and not m.qualitative:
            assert fn(HOSTILE, **columns) == [None] * n, name
            continue
        got = fn(HOSTILE, **columns)
        assert len(got) == n and all(isinstance(x, float) for x in got), name
        assert all(x == 0.0 for x in got[:-2]), (name, got)  # all but the NUL-reasoning answer are malformed
    # bad columns cost only their own item: a label that is no grade, evidence that is not JSON
    good = answer(3, 50, "Sharpe ratio top 10%")
    odd = dict(
        expert_grade=[3, "three", 3],
        expert_score=[50.0, 50.0, "x"],
        evidence=['{"sharpe_3y": 80}', "{", '{"sharpe_3y": 80}'],
        shown_grade=[3, "x", 3],
        documents=[DOCUMENT_COLUMNS["documents"], "{", "null"],
        pillars=[DOCUMENT_COLUMNS["pillars"], "[", "{}"],
    )
    for name, fn in rewards.items():
        got = fn([good] * 3, **odd)
        assert len(got) == 3 and got[0] == fn([good], **{k: v[:1] for k, v in odd.items()})[0], name


def test_reward_names_have_one_home(repo_root):
    """params.RULE_REWARDS orders the registry, the weights and dvc.yaml's reward plot."""
    assert tuple(REWARDS) == RULE_REWARDS
    assert [f.name for f in dataclasses.fields(RewardWeights)] == [*RULE_REWARDS, "judge"]
    assert all(fn.__name__ == f"{name}_reward" for name, fn in REWARDS.items())
    plots = yaml.safe_load((repo_root / "dvc.yaml").read_text(encoding="utf-8"))["plots"]
    # the plot reads the file `grpo.reward_curves` names (dvc.yaml: ${grpo.reward_curves})
    curves = next(p for p in plots if "GRPO reward curves" in p)["GRPO reward curves"]["y"]["${grpo.reward_curves}"]
    assert curves == ["reward", *(f"{n}_reward" for n in RULE_REWARDS)]


def test_each_reward_imports_and_runs_on_its_own():
    """Module-level: a reward is called with its settings as keywords, no factory needed."""
    _, schema = example_methodology()
    assert json_reward(['{"grade": 1, "score": 10, "reasoning": "fine"}'], schema=schema) == [1.0]


def test_a_collapsed_policy_earns_less_grade_reward_than_a_useful_start():
    """The attractor seen on a real export: GRPO's reward rose while greedy answers collapsed onto the
    commonest grade. Weighted by the grade's rarity, answering one grade to every fund earns
    1 / number of grades, less than a start that is right on most funds; unweighted it earns more."""
    m = meth.load(REPO / "methodology/default.yaml")
    methodology, schema = m, meth.output_schema(m)
    experts = [3] * 60 + [2] * 15 + [4] * 15 + [1] * 5 + [5] * 5  # an imbalanced export
    # the start: right on 65 % of funds (its misses one grade off, spread over the grades)
    start = [g if i % 20 < 13 else (g + 1 if g < 5 else g - 1) for i, g in enumerate(experts)]
    collapsed = [3] * len(experts)
    rows = [PromptRecord.example(expert_grade=g) for g in experts]

    def mean_grade_reward(grades, params):
        fn = bind(methodology, schema, params, rows)["grade"]
        got = fn([answer(g, 50, "Sharpe ratio top 10%") for g in grades], expert_grade=experts)
        return sum(got) / len(got)

    balanced = GrpoParams()  # balance_grades is the default
    assert mean_grade_reward(collapsed, balanced) == pytest.approx(1 / 5, abs=1e-3)
    assert mean_grade_reward(collapsed, balanced) < mean_grade_reward(start, balanced)
    plain = replace(GrpoParams(), balance_grades=False)
    assert mean_grade_reward(collapsed, plain) < mean_grade_reward(start, plain)  # here the start wins anyway,
    worse_start = [g if i % 20 < 10 else (g + 1 if g < 5 else g - 1) for i, g in enumerate(experts)]  # right on 50 %
    assert mean_grade_reward(collapsed, plain) > mean_grade_reward(worse_start, plain)  # unweighted: collapse pays
    assert mean_grade_reward(collapsed, balanced) < mean_grade_reward(worse_start, balanced)  # weighted: it does not


def test_the_calibration_reward_is_a_proper_score():
    """Stating the true hit rate earns the most on average: 1 - Brier of the stated confidence."""
    _, schema = example_methodology()
    right_70 = [1] * 7 + [2] * 3  # the answer (grade 1) is right on 7 of 10 funds

    def mean(confidence):
        said = [f'{{"grade": 1, "score": 20, "reasoning": "ok", "confidence": {confidence}}}'] * 10
        got = REWARDS["calibration"](said, right_70, schema=schema)
        return sum(got) / len(got)

    best = max(range(0, 101, 10), key=mean)
    assert best == 70 and mean(70) > mean(100) and mean(70) > mean(30)
    assert REWARDS["calibration"](["{"], [1], schema=schema) == [0.0]  # malformed: 0
    assert REWARDS["calibration"](['{"grade": 1, "score": 5, "reasoning": "ok"}'], [None], schema=schema) == [None]


def test_a_column_shorter_than_the_completions_is_an_error_not_a_short_answer(setup):
    """zip would score only the first completion; every bound reward names the column instead."""
    _, rewards = setup
    two = [answer(3, 50, "x" * 20)] * 2
    for name, fn in rewards.items():
        with pytest.raises(ValueError, match="column expert_grade has 1 values for 2 completions"):
            fn(two, expert_grade=[3], expert_score=[50.0, 50.0], evidence=["{}", "{}"], shown_grade=[3, 3])
