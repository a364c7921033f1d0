"""The claims check reads everything checkable in an evaluation, in English and Korean, and the
reference evaluations (the SFT targets) pass it: right, complete and within the length budget."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fundgrpo.data import synthetic
from fundgrpo.methodology import claims
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import preparation as prepare
from fundgrpo.params import PrepareParams, SyntheticParams
from tests.support import REPO


@pytest.fixture(params=["default.yaml", "default_ko.yaml"])
def methodology(request):
    return meth.load(REPO / "methodology" / request.param)


def words(methodology):
    return ("top", "bottom") if methodology.language == "en" else ("상위", "하위")


def test_the_dashboard_misstatement_is_caught_on_both_counts(methodology):
    """Found by an analyst on the dashboard: Sharpe ratio percentile 79 and ongoing cost percentile 58
    read "Sharpe ratio top 10%; ongoing cost bottom 10%": the band of one and the side of the other."""
    top, bottom = words(methodology)
    label = {c.id: methodology.label(c) for c in methodology.criteria}
    text = f"{label['sharpe']} {top} 10%; {label['cost']} {bottom} 10%"
    found = {c["about"]: (c["status"], c["why"]) for c in claims.check(text, {"sharpe": 79, "cost": 58}, methodology)}
    assert found == {"sharpe": ("wrong", "band"), "cost": ("wrong", "side")}
    right = f"{label['sharpe']} {top} 30%; {label['cost']} {top} 50%"
    assert claims.misstated(right, {"sharpe": 79, "cost": 58}, methodology) == []


def test_numbers_verdicts_and_context_are_checked(methodology):
    top, bottom = words(methodology)
    label = {c.id: methodology.label(c) for c in methodology.named}
    verdict = {b.grade: b.label[methodology.language] for b in methodology.bands}
    pct = {"sharpe": 72.4, "cost": 35.0, "tenure": 12.0}
    text = f"{verdict[4]}. {label['sharpe']} {top} 30% (72); {label['tenure']} {bottom} 20%"
    assert claims.misstated(text, pct, methodology, grade=4) == []
    assert claims.misstated(text, pct, methodology, grade=5) == ["verdict"]  # its words are grade 4's label
    assert claims.misstated(text.replace("(72)", "(75)"), pct, methodology, grade=4) == ["sharpe"]  # not the percentile
    assert claims.misstated(text.replace(f"{bottom} 20%", f"{bottom} 10%"), pct, methodology, 4) == ["tenure"]
    # a criterion the prompt had no data on
    assert claims.misstated(f"{label['cost']} {bottom} 40%", {"cost": None}, methodology) == ["cost"]


def test_reference_evaluations_are_right_complete_and_within_budget(methodology):
    """Every SFT target states the verdict of its grade, cites the weightiest criteria with true
    bands, says what moved the grade off the methodology's, and fits the JSON Schema's length."""
    funds = synthetic.later_batch(SyntheticParams(n_funds=120, n_months=48), 3)
    records = prepare.build_records(funds, methodology, replace(PrepareParams(), answer_style="evaluation"))
    assert len(records) > 50
    budget = methodology.reasoning_max_chars
    moved = 0
    for r in records:
        answer = json.loads(r.reference)
        assert claims.misstated(answer["reasoning"], r.evidence, methodology, answer["grade"], r.rule_grade) == []
        assert claims.complete(answer["reasoning"], r.evidence, methodology), answer
        assert len(answer["reasoning"]) <= budget
        assert r.shown_grade == r.rule_grade  # the methodology's grade is what the prompt suggests
        said = claims.check(answer["reasoning"], json.loads(r.evidence), methodology, r.expert_grade, r.rule_grade)
        assert [c["about"] for c in said[:2]] == ["verdict", "methodology"]
        assert said[1]["status"] == "right"  # the methodology's grade, and which way the grade moved from it
        moved += r.expert_grade != r.rule_grade
    assert moved > 0  # some grades depart from the methodology, and their evaluations say why
    # the same evaluation said of a grade that moved the other way, or of another methodology grade: misstated
    r = next(r for r in records if r.expert_grade > r.rule_grade)
    text = json.loads(r.reference)["reasoning"]
    assert "methodology" in claims.misstated(text, r.evidence, methodology, r.expert_grade, r.rule_grade + 1)
    assert "methodology" in claims.misstated(text, r.evidence, methodology, r.rule_grade - 1 or 1, r.rule_grade)
    summary = claims.summary(
        [json.loads(r.reference)["reasoning"] for r in records], [r.evidence for r in records], methodology,
        [r.expert_grade for r in records], [r.rule_grade for r in records],
    )  # fmt: skip
    assert summary["misstated_claims"] == 0.0 and summary["complete"] == 1.0


def test_references_and_the_check_read_the_percentile_the_prompt_shows(methodology):
    """A percentile of 89.6 is shown as "percentile 90": its band is "top 10%" in the reference, and
    the claims check reads 90 too, so a model that reads its prompt right is never called wrong."""
    funds = synthetic.later_batch(SyntheticParams(n_funds=60, n_months=48), 3)
    records = prepare.build_records(funds, methodology, replace(PrepareParams(), answer_style="evaluation"))
    shown = [v for r in records for v in json.loads(r.evidence).values() if v is not None]
    assert shown and all(float(v).is_integer() for v in shown)
    r = records[0]
    content = r.prompt[-1]["content"]
    for cid, v in json.loads(r.evidence).items():
        if v is not None and cid in {c.id for c in methodology.criteria}:
            label = methodology.label(next(c for c in methodology.criteria if c.id == cid))
            line = next(line for line in content.splitlines() if label in line)
            assert str(int(v)) in line  # the prompt's number is the evidence column's
    top, _ = words(methodology)
    text = f"{methodology.label(methodology.criteria[0])} {top} 10%"
    assert claims.misstated(text, {methodology.criteria[0].id: 90.0}, methodology) == []


def test_with_bands_shown_every_claim_of_a_reference_is_on_its_prompt_line(methodology):
    """`prepare.show_bands`: each percentile is followed by its band, and each band the reference
    answer claims is the one its criterion's prompt line shows (so a model can copy it)."""
    funds = synthetic.later_batch(SyntheticParams(n_funds=60, n_months=48), 3)
    params = replace(PrepareParams(), answer_style="evaluation", show_bands=True)
    records = prepare.build_records(funds, methodology, params)
    plain = prepare.build_records(funds, methodology, replace(params, show_bands=False))
    assert [r.reference for r in records] == [r.reference for r in plain]  # the answers do not change
    top, bottom = words(methodology)
    checked = 0
    for r in records:
        lines = r.prompt[-1]["content"].splitlines()
        reasoning = json.loads(r.reference)["reasoning"]
        for c in methodology.criteria:
            claim = next(
                (part for part in reasoning.split(". ")[1].split("; ") if part.startswith(methodology.label(c))), None
            )
            if claim is None:
                continue
            placed = claim[len(methodology.label(c)) :].strip()
            assert placed.split()[0] in (top, bottom)
            line = next(line for line in lines if line.lstrip("- ").startswith(methodology.label(c)))
            assert f"({placed})" in line, (claim, line)
            checked += 1
    assert checked >= len(records)


def test_with_criteria_by_pull_the_cited_criteria_are_the_first_lines(methodology):
    """`prepare.criteria_order: pull`: the criteria a reference cites are its prompt's first criterion
    lines, in the order it cites them (so which to cite is copied); the answers do not change."""
    funds = synthetic.later_batch(SyntheticParams(n_funds=60, n_months=48), 3)
    params = replace(PrepareParams(), answer_style="evaluation", criteria_order="pull")
    records = prepare.build_records(funds, methodology, params)
    by_weight = prepare.build_records(funds, methodology, replace(params, criteria_order="weight"))
    assert [r.reference for r in records] == [r.reference for r in by_weight]
    labels = [methodology.label(c) for c in methodology.criteria]
    reordered = 0
    for r, w in zip(records, by_weight):
        shown = [
            next(label for label in labels if line.lstrip("- ").startswith(label))
            for line in r.prompt[-1]["content"].splitlines()
            if any(line.lstrip("- ").startswith(label) for label in labels)
        ]
        claimed = json.loads(r.reference)["reasoning"].split(". ")[1].split("; ")
        cited = [next(label for label in labels if part.startswith(label)) for part in claimed]
        assert shown[: len(cited)] == cited, (shown, cited)
        reordered += r.prompt != w.prompt
    assert reordered > len(records) / 4  # the weight order would have failed the check above


def test_morningstar_evaluations_fit_the_budget_and_read_their_labels():
    """The Morningstar file's labels are long ("4 stars (above average)", "10-year risk-adjusted
    return"): an evaluation still fits its 160 characters, and the 5- and 10-year claims are told apart."""
    methodology = meth.load(REPO / "methodology/morningstar.yaml")
    labels = [b.label["en"] for b in methodology.bands]
    text = f"{labels[3]}. 10-year risk-adjusted return top 30%; 5-year risk-adjusted return top 20%. Methodology 3"
    assert len(text) <= methodology.reasoning_max_chars
    assert claims.misstated(text, {"mrar_10y": 75, "mrar_5y": 85, "mrar_3y": 50}, methodology, 4) == []
    assert claims.misstated(text, {"mrar_10y": 75, "mrar_5y": 75, "mrar_3y": 50}, methodology, 4) == ["mrar_5y"]
