import copy

import numpy as np
import pandas as pd
import pytest
import yaml

from fundgrpo.methodology import compiler as meth


@pytest.fixture
def raw(repo_root):
    return yaml.safe_load((repo_root / "methodology/default.yaml").read_text(encoding="utf-8"))


def test_default_methodologies_compile(repo_root):
    for name in ("default.yaml", "default_ko.yaml"):
        m = meth.load(repo_root / "methodology" / name)
        assert m.grades == [1, 2, 3, 4, 5]
        schema = meth.output_schema(m)
        assert schema["required"] == ["grade", "score", "reasoning"]
        assert meth.rubric(meth.from_rubric(meth.rubric(m))) == meth.rubric(m)


def test_korean_labels_reach_the_rubric(repo_root):
    r = meth.rubric(meth.load(repo_root / "methodology/default_ko.yaml"))
    assert r["language"] == "ko"
    assert [c["label"] for c in r["criteria"]][0] == "샤프지수"


def test_weights_not_summing_to_one_are_named(raw):
    raw["criteria"][0]["weight"] = 0.5
    with pytest.raises(meth.MethodologyError, match=r"sum to 1, they sum to 1\.15.*sharpe=0\.5"):
        meth.parse(raw)


def test_overlapping_bands_are_named(raw):
    raw["grades"][1]["min"] = 5
    with pytest.raises(meth.MethodologyError, match="overlap: grade 1"):
        meth.parse(raw)


def test_gap_and_coverage(raw):
    gap = copy.deepcopy(raw)
    gap["grades"][1]["min"] = 12
    with pytest.raises(meth.MethodologyError, match="gap between grade 1 and 2"):
        meth.parse(gap)
    raw["grades"][-1]["max"] = 95
    with pytest.raises(meth.MethodologyError, match="cover 0-100"):
        meth.parse(raw)


def test_unknown_metric_and_bad_file(raw, tmp_path):
    raw["criteria"][0]["metric"] = "sharpe_ratio"
    with pytest.raises(meth.MethodologyError, match="unknown metric 'sharpe_ratio'"):
        meth.parse(raw)
    bad = tmp_path / "m.yaml"
    bad.write_text("criteria: [", encoding="utf-8")
    with pytest.raises(meth.MethodologyError, match="not valid YAML"):
        meth.load(bad)
    with pytest.raises(meth.MethodologyError, match="not found"):
        meth.load(tmp_path / "missing.yaml")


def test_rule_scorer_orders_funds_and_renormalises_missing_metrics():
    m = meth.parse(
        {
            "scoring": "weighted",
            "criteria": [
                {"metric": "return_3y", "weight": 0.4},
                {"metric": "return_5y", "weight": 0.6},
            ],
            "grades": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}],
            "coverage": {"min_weight": 0.4},  # the 3-year criterion alone rates a fund
        }
    )
    funds = pd.DataFrame({"category": ["a"] * 3, "return_3y": [1.0, 2.0, 3.0], "return_5y": [1.0, np.nan, 3.0]})
    s = meth.rule_score(m, funds)
    assert s["rule_score"].tolist() == [0.0, 50.0, 100.0]  # middle fund: 3y only, percentile 50
    assert s["rule_grade"].tolist() == [1, 2, 2]


def test_ranked_scoring_spreads_grades(repo_root):
    m = meth.load(repo_root / "methodology/default.yaml")
    rng = np.random.default_rng(0)
    n = 400
    funds = pd.DataFrame(
        {
            "category": rng.choice(["x", "y"], n),
            **{c.metric: rng.normal(size=n) for c in m.criteria},
        }
    )
    grades = meth.rule_score(m, funds)["rule_grade"].value_counts(normalize=True).sort_index()
    # 10 / 22.5 / 35 / 22.5 / 10 % bands on the within-category rank
    assert np.allclose(grades.values, [0.10, 0.225, 0.35, 0.225, 0.10], atol=0.02)


def test_context_metrics_are_shown_not_scored():
    import pandas as pd

    from fundgrpo.methodology import compiler as meth

    raw = {
        "criteria": [{"metric": "sharpe_3y", "weight": 1.0, "label": "Sharpe"}],
        "context": [{"metric": "ongoing_cost", "higher_is_better": False, "label": "Cost"}],
        "grades": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}],
    }
    m = meth.parse(raw)
    assert [c.metric for c in m.context] == ["ongoing_cost"]
    assert meth.from_rubric(meth.rubric(m)) == m  # survives compiling
    funds = pd.DataFrame({"category": ["a"] * 3, "sharpe_3y": [0.1, 0.2, 0.3], "ongoing_cost": [2.0, 1.0, 0.5]})
    assert (
        meth.rule_score(m, funds)["rule_grade"].tolist()
        == meth.rule_score(meth.parse({**raw, "context": []}), funds)["rule_grade"].tolist()
    )
    pct = meth.criterion_percentiles(m, funds, with_context=True)
    assert pct["ongoing_cost"].tolist() == [0.0, 50.0, 100.0]  # lower cost is better
    with pytest.raises(meth.MethodologyError, match="already a criterion"):
        meth.parse({**raw, "context": [{"metric": "sharpe_3y"}]})


def test_a_grade_label_list_is_named_with_the_format(repo_root, tmp_path):
    """`label: [poor, 매우 부진]` instead of `label: {en: poor, ko: 매우 부진}`: the band and the format
    are named, not a bare "dictionary update sequence" ValueError."""
    text = (repo_root / "methodology/default.yaml").read_text(encoding="utf-8")
    listed = text.replace("label: {en: poor, ko: 매우 부진}", "label: [poor, 매우 부진]")
    assert listed != text
    path = tmp_path / "house.yaml"
    path.write_text(listed, encoding="utf-8")
    with pytest.raises(meth.MethodologyError) as err:
        meth.load(path)
    message = str(err.value)
    assert str(path) in message and "grade band 1 (grade 1): label must be text or a mapping" in message
    assert "e.g. label: {en: poor, ko: 매우 부진}" in message and "got a list: ['poor', '매우 부진']" in message

    crit = text.replace("label: {en: Sharpe ratio, ko: 샤프지수}", "label: [Sharpe ratio, 샤프지수]")
    path.write_text(crit, encoding="utf-8")
    with pytest.raises(meth.MethodologyError, match=r"criterion 1 \(sharpe_3y\): label must be text or a mapping"):
        meth.load(path)


def test_grades_and_bands_of_the_wrong_shape_are_named(raw):
    bands = copy.deepcopy(raw)
    bands["grades"] = {1: "poor", 2: "good"}
    with pytest.raises(meth.MethodologyError, match=r"grades must be a list \(one '- \.\.\.' entry each\)"):
        meth.parse(bands, where="m.yaml")
    raw["grades"][2] = 3
    with pytest.raises(
        meth.MethodologyError, match=r"m.yaml: grade band 3 must be a mapping \(key: value, \.\.\.\), got 3"
    ):
        meth.parse(raw, where="m.yaml")


# ------------------------------------------------------------------- coverage


def five_funds() -> pd.DataFrame:
    """Five funds of one category; the last has only an ongoing cost (one criterion of five, 20 % of the weight)."""
    return pd.DataFrame(
        {
            "share_class_id": list("abcde"),
            "category": ["x"] * 5,
            "sharpe_3y": [0.1, 0.5, 0.9, 1.2, np.nan],
            "return_3y": [1.0, 3.0, 5.0, 7.0, np.nan],
            "ongoing_cost": [1.5, 1.0, 0.8, 0.5, 0.1],
            "max_drawdown_3y": [-30.0, -20.0, -15.0, -10.0, np.nan],
            "information_ratio_3y": [-0.5, 0.0, 0.3, 0.6, np.nan],
        }
    )


def test_a_fund_with_one_criterion_of_five_is_not_rated_and_told_what_it_lacks(raw):
    """Renormalising the missing criteria's weights onto a cheap fee once rated such a fund 5."""
    m = meth.parse(raw)
    funds = five_funds()
    scored = meth.rule_score(m, funds)
    assert scored["rule_grade"].iloc[:4].notna().all() and pd.isna(scored["rule_grade"].iloc[4])
    assert np.isnan(scored["rule_score"].iloc[4])
    reasons = meth.not_rated(m, meth.criterion_percentiles(m, funds))
    assert reasons.iloc[:4].isna().all()
    assert reasons.iloc[4] == (
        "not rated: data for 20% of the criteria weight, the methodology needs 50%; "
        "missing: Sharpe ratio, 3-year return, max drawdown, information ratio"
    )
    # the other funds are ranked among themselves: the unrated fund takes no rank below them
    alone = meth.rule_score(m, funds.iloc[:4])
    assert scored["rule_score"].iloc[:4].tolist() == alone["rule_score"].tolist()


def test_coverage_reads_the_files_rule_and_says_it_in_korean(raw, repo_root):
    funds = five_funds().assign(sharpe_3y=[0.1, 0.5, 0.9, np.nan, 0.3])  # d lacks its Sharpe ratio (35 %)
    m = meth.parse({**raw, "coverage": {"min_weight": 0.2, "required": ["sharpe"]}})
    reasons = meth.not_rated(m, meth.criterion_percentiles(m, funds))
    assert reasons.iloc[3] == ("not rated: no data for the required criterion Sharpe ratio; missing: Sharpe ratio")
    assert reasons.iloc[4] is None  # 20 % and the Sharpe ratio: enough under this file's rule
    ko = meth.load(repo_root / "methodology/default_ko.yaml")
    said = meth.not_rated(ko, meth.criterion_percentiles(ko, five_funds())).iloc[4]
    assert said.startswith("평가 제외: 기준 가중치의 20%만 자료가 있어 방법론 기준 50%에 미달") and "샤프지수" in said
    assert meth.from_rubric(meth.rubric(m)).required == ("sharpe",)  # the rule survives compilation


@pytest.mark.parametrize(
    "coverage, message",
    [
        ({"min_weight": 0}, r"coverage.min_weight must be a share of the criteria weight in \(0, 1\], got 0"),
        ({"min_weight": 1.5}, r"in \(0, 1\], got 1.5"),
        ({"required": ["tenure"]}, r"coverage.required names 'tenure', not a criterion id"),
        ({"min_share": 0.5}, r"coverage must be a mapping with min_weight"),
    ],
)
def test_a_bad_coverage_rule_is_named(raw, coverage, message):
    with pytest.raises(meth.MethodologyError, match=message):
        meth.parse({**raw, "coverage": coverage})
