"""Qualitative criteria in the methodology file: checked, compiled into the rubric and the answer's
schema, and left unassessed by the rule scorer."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml

from fundgrpo.methodology import compiler
from fundgrpo.methodology.fields import MethodologyError
from fundgrpo.methodology.qualitative import NOT_ASSESSED
from tests.support import REPO

RAW = yaml.safe_load((REPO / "methodology" / "documents.yaml").read_text(encoding="utf-8"))


def parse(change) -> compiler.Methodology:
    raw = copy.deepcopy(RAW)
    change(raw)
    return compiler.parse(raw, "documents.yaml")


@pytest.mark.parametrize("name", ["documents.yaml", "documents_ko.yaml"])
def test_the_documents_methodology_compiles_and_round_trips_through_its_rubric(name):
    m = compiler.load(REPO / "methodology" / name)
    assert [q.id for q in m.qualitative] == ["people", "process", "parent"]
    assert sum(c.weight for c in m.criteria) + sum(q.weight for q in m.qualitative) == pytest.approx(1.0)
    back = compiler.from_rubric(compiler.rubric(m))
    assert back.qualitative == m.qualitative and compiler.fingerprint(back) == compiler.fingerprint(m)
    pillars = compiler.output_schema(m)["properties"]["pillars"]
    assert pillars["properties"]["people"]["properties"]["judgement"]["enum"] == [-1, 0, 1, NOT_ASSESSED]
    assert "pillars" not in compiler.output_schema(compiler.load(REPO / "methodology" / "default.yaml"))["properties"]


def test_guidance_changes_the_fingerprint_a_served_model_is_checked_against():
    m = compiler.parse(RAW, "documents.yaml")
    other = parse(lambda r: r["qualitative"][0]["guidance"].update(lowers="any change of manager"))
    assert compiler.fingerprint(m) != compiler.fingerprint(other)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["qualitative"][0]["guidance"].pop("neutral"), "(people): guidance is missing 'neutral'"),
        (lambda r: r["qualitative"][1].pop("guidance"), "criterion 2 (process): guidance must be a mapping"),
        (lambda r: r["qualitative"][2].update(weight=0.5), "weights must sum to 1, they sum to 1.37"),
        (lambda r: r["qualitative"][2].update(weight=-0.13), "(parent): weight must be a share of the overall grade"),
        (lambda r: r["qualitative"][0].update(scale=4), "(people): scale must be one of (3, 5) points"),
        (lambda r: r["qualitative"][1].update(id="people"), "qualitative criterion ids repeat"),
        (lambda r: r["qualitative"][0].update(id="sharpe"), "qualitative ids repeat a criterion id: ['sharpe']"),
        (lambda r: r.update(qualitative={"people": 0.4}), "qualitative must be a list"),
    ],
)  # fmt: skip
def test_a_malformed_qualitative_criterion_is_named(change, message):
    with pytest.raises(MethodologyError) as err:
        parse(change)
    assert message in str(err.value)


def test_the_rule_scorer_grades_on_the_numeric_criteria_and_coverage_ignores_the_pillars():
    m = compiler.parse(RAW, "documents.yaml")
    numeric_only = compiler.parse({k: v for k, v in RAW.items() if k != "qualitative"} | {
        "criteria": [{**c, "weight": c["weight"] / 0.6} for c in RAW["criteria"]]}, "numeric.yaml")  # fmt: skip
    funds = pd.DataFrame(
        {
            "category": ["a"] * 4,
            "sharpe_3y": [0.1, 0.5, 0.9, None],
            "return_3y": [1.0, 5.0, 9.0, None],
            "ongoing_cost": [1.5, 1.0, 0.5, 1.0],
            "max_drawdown_3y": [-30.0, -20.0, -10.0, None],
            "information_ratio_3y": [-0.2, 0.1, 0.4, None],
        }
    )
    assert compiler.rule_score(m, funds).equals(compiler.rule_score(numeric_only, funds))
    pct = compiler.criterion_percentiles(m, funds)
    assert compiler.coverage(m, pct).tolist()[:3] == [1.0, 1.0, 1.0]
    assert compiler.not_rated(m, pct).iloc[3].startswith("not rated: data for 20% of the criteria weight")
