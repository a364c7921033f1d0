"""Real Evidently reports: the verdict flips with planted drift, keeps its meaning at any size,
and too few rows give no verdict."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fundgrpo.params import MonitorParams
from monitoring import drift

FEATURES = ["return_1y", "return_3y", "volatility_3y", "sharpe_3y", "ongoing_cost", "fund_size"]
PARAMS = MonitorParams()  # wasserstein, threshold 0.5, drift share 0.3, min rows 30


def frame(n: int, seed: int, shift: dict[str, float] | None = None) -> pd.DataFrame:
    """Standard-normal fund features (plus labels and text that drift must ignore), some shifted in std units."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({c: rng.standard_normal(n) + (shift or {}).get(c, 0.0) for c in FEATURES})
    df["expert_grade"] = rng.integers(1, 6, n)
    df["name"] = [f"F{i}" for i in range(n)]
    return df


def test_verdict_flips_with_planted_drift(tmp_path):
    reference = frame(300, 0)
    calm = drift.data_drift(reference, frame(300, 1), PARAMS, tmp_path / "calm")
    planted = drift.data_drift(
        reference,
        frame(300, 2, {"return_1y": 1.5, "volatility_3y": 1.5, "sharpe_3y": -1.5}),
        PARAMS,
        tmp_path / "planted",
    )
    assert calm.verdict is False and calm.drifted == []
    assert planted.verdict is True and planted.drifted == ["return_1y", "volatility_3y", "sharpe_3y"]
    assert planted.share == pytest.approx(0.5)
    assert planted.scores["return_1y"] > PARAMS.threshold > calm.scores["return_1y"]
    assert set(planted.scores) == set(FEATURES)  # labels and text are not features
    for out in ("calm", "planted"):
        assert (tmp_path / out / "drift.html").stat().st_size > 10_000
        report = json.loads((tmp_path / out / "drift.json").read_text())
        assert {m["config"]["type"] for m in report["metrics"]} >= {drift.DRIFTED_COLUMNS, drift.VALUE_DRIFT}


@pytest.mark.parametrize("n", [200, 1500])  # Evidently's own default switches tests at 1000 rows
def test_pinned_test_means_the_same_at_any_size(tmp_path, n):
    reference = frame(n, 10)
    small = drift.data_drift(reference, frame(n, 11, {c: 0.2 for c in FEATURES[:3]}), PARAMS, tmp_path / "small")
    large = drift.data_drift(reference, frame(n, 12, {c: 1.0 for c in FEATURES[:3]}), PARAMS, tmp_path / "large")
    assert (small.verdict, large.verdict) == (False, True)
    assert small.method == large.method == "wasserstein"


def test_drift_share_threshold_decides_the_dataset_verdict(tmp_path):
    reference, current = frame(300, 0), frame(300, 3, {"return_1y": 1.5})  # 1 of 6 columns
    assert drift.data_drift(reference, current, PARAMS, tmp_path / "a").verdict is False
    assert drift.data_drift(reference, current, replace(PARAMS, drift_share=0.1), tmp_path / "b").verdict is True


def test_too_few_rows_says_so_instead_of_a_verdict(tmp_path):
    result = drift.data_drift(frame(300, 0), frame(12, 1, {"return_1y": 5.0}), PARAMS, tmp_path)
    assert result.verdict is None and result.share is None
    assert result.reason == "too few rows for a verdict: the batch has 12 rows, monitor.min_rows is 30"
    assert "too few rows for a verdict" in (tmp_path / "drift.html").read_text()
    assert not (tmp_path / "drift.json").exists()
    few = drift.prediction_drift([3] * 100, [1] * 5, PARAMS, tmp_path)
    assert few.verdict is None and "too few rows" in few.reason


def test_prediction_drift_flips_on_the_grade_distribution(tmp_path):
    grades = [1, 2, 2, 3, 3, 3, 4, 4, 5] * 10
    same = drift.prediction_drift(grades, list(reversed(grades)), PARAMS, tmp_path / "same")
    collapsed = drift.prediction_drift(grades, [3] * 60 + [4] * 10, PARAMS, tmp_path / "collapsed")
    assert (same.verdict, collapsed.verdict) == (False, True)
    assert collapsed.score > PARAMS.prediction_threshold > same.score
    assert collapsed.distribution["current"] == {"3": 0.8571, "4": 0.1429}
    assert (tmp_path / "collapsed" / "prediction_drift.html").exists()


def test_rating_migration_is_drift_where_the_distribution_cannot_show_it(tmp_path):
    """A ranked methodology keeps each grade's share: a reshuffle shows only as migration."""
    grades = [1, 2, 2, 3, 3, 3, 4, 4, 5] * 10
    shuffled = grades[4:] + grades[:4]  # the same distribution, every fund on another grade
    steady = grades[:80] + shuffled[80:]  # a few move
    calm = drift.prediction_drift(grades, grades, PARAMS, tmp_path / "calm", list(zip(grades, steady)))
    moved = drift.prediction_drift(grades, shuffled, PARAMS, tmp_path / "moved", list(zip(grades, shuffled)))
    assert moved.score == calm.score == 0.0  # the distribution test sees nothing either time
    assert calm.migration < PARAMS.migration_threshold <= moved.migration
    assert (calm.verdict, moved.verdict) == (False, True)
    assert "rating migration 1.00 of 90 share classes graded in both (threshold 0.35)" in moved.reason
    assert sum(moved.transitions["3"].values()) == 30 and moved.paired == 90
    off = drift.prediction_drift(
        grades, shuffled, replace(PARAMS, migration_threshold=0.0), tmp_path / "off", list(zip(grades, shuffled))
    )
    assert off.verdict is False and "migration" not in off.reason  # 0 turns the check off
    few = drift.prediction_drift(grades, shuffled, PARAMS, tmp_path / "few", list(zip(grades, shuffled))[:10])
    assert few.verdict is False  # fewer pairs than monitor.min_rows: no migration verdict


def test_feature_columns_and_bad_feature_lists():
    ref = frame(40, 0)
    ref["return_5y"] = np.nan  # a column with no value cannot drift
    assert drift.feature_columns(ref, frame(40, 1), PARAMS) == FEATURES
    with pytest.raises(drift.DriftError, match="return_10y"):
        drift.feature_columns(ref, ref, replace(PARAMS, features=("return_1y", "return_10y")))
    with pytest.raises(drift.DriftError, match="no numeric fund feature"):
        drift.feature_columns(ref[["name"]], ref[["name"]], PARAMS)


def test_invalid_answers_are_a_category_not_a_crash(tmp_path):
    """An invalid answer has no grade (None): it counts as its own category in the distribution and
    in the migration (it once stopped every monitoring run with a TypeError)."""
    grades = [1, 2, 2, 3, 3, 3, 4, 4, 5] * 10
    batch = [None] + grades[1:]  # the champion answered one fund invalidly
    result = drift.prediction_drift(grades, batch, PARAMS, tmp_path / "one", list(zip(grades, batch)))
    assert result.verdict is False and result.paired == 90
    assert result.migration == round(1 / 90, 4) and result.transitions["1"] == {"1": 9, "invalid": 1}
    assert result.distribution["current"]["invalid"] == round(1 / 90, 4)
    assert json.loads((tmp_path / "one" / "prediction_drift.json").read_text())  # Evidently wrote its report
    broken = drift.prediction_drift(grades, [None] * 90, PARAMS, tmp_path / "all", list(zip(grades, [None] * 90)))
    assert broken.verdict is True and broken.migration == 1.0  # a champion gone invalid is drift
    assert broken.distribution["current"] == {"invalid": 1.0}


@pytest.fixture(scope="module")
def synthetic_documents_frame() -> pd.DataFrame:
    """The synthetic universe's documents (both languages, every kind), as ingest stores them."""
    from fundgrpo.data import synthetic, synthetic_documents
    from fundgrpo.params import SyntheticParams

    p = SyntheticParams(n_funds=240, documents=True)
    sc = synthetic.universe(p)
    docs = synthetic_documents.write_documents(sc, synthetic.qualitative_facts(p, sc), p, lambda f: False)
    return docs.reset_index(drop=True)


def test_documents_drift_when_their_language_kind_and_words_change_and_not_between_halves(
    synthetic_documents_frame, tmp_path
):
    """Two random halves of one set of documents do not drift; the same reference against documents in
    another language, kind and vocabulary does, naming the descriptors that moved; too few documents give no
    verdict. Evidently's text descriptors, on real text."""
    docs = synthetic_documents_frame
    half = docs.sample(frac=0.5, random_state=0)
    rest = docs.drop(half.index)
    calm = drift.document_drift(half, rest, PARAMS, tmp_path / "calm")
    assert calm.verdict is False and calm.drifted == [], calm.reason
    assert (tmp_path / "calm/documents_drift.html").exists()

    english = half[half["language"] == "en"]
    shifted = pd.DataFrame({
        "document_id": [f"N{i}" for i in range(60)], "kind": "broker_research", "language": "ko", "date": "2025-01-01",
        "text": [f"증권사 리서치 {i}호: 반도체 업황 회복과 환율 변동성 확대로 목표주가를 상향한다." for i in range(60)],
    })  # fmt: skip
    moved = drift.document_drift(english, shifted, PARAMS, tmp_path / "moved")
    assert moved.verdict is True and {"korean_share", "unseen_word_share", "kind"} <= set(moved.drifted), moved.reason
    assert moved.kinds["current"] == {"broker_research": 1.0}
    assert moved.rows == {"reference": len(english) // 2, "current": 60}  # the other half gives the vocabulary
    report = json.loads((tmp_path / "moved/documents_drift.json").read_text())
    assert {m["config"]["column"] for m in report["metrics"]} >= {"length", "korean_share", "kind"}

    few = drift.document_drift(english, shifted.head(5), PARAMS, tmp_path / "few")
    assert few.verdict is None and "the batch has 5 documents" in few.reason
