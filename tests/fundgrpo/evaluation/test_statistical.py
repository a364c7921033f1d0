"""Statistical evidence: out-of-fold estimates for the funds the LLM trains on, the training split's
model for the rest, and every stale or mismatched evidence file named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from fundgrpo.evaluation import baselines, statistical
from fundgrpo.methodology import estimates
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import BaselineParams, EvidenceParams, Params, ParamsError, PrepareParams, from_dict
from tests.fundgrpo.evaluation.test_baselines import universe

FAST = BaselineParams(max_iter=40, learning_rate=(0.1,), max_leaf_nodes=(7,), min_samples_leaf=5)
GRADES = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def estimated():
    funds = universe(120, seed=3)
    funds["expert_grade"] = funds["expert_grade"].astype("Int64")
    funds.loc[funds.index[-3:], "expert_grade"] = pd.NA  # unrated share classes get an estimate too
    table, estimator, summary = statistical.estimate(funds, FAST, EvidenceParams(folds=4), PrepareParams(), GRADES)
    return funds, table, estimator, summary


def test_every_share_class_gets_a_grade_and_probabilities(estimated):
    funds, table, _, summary = estimated
    assert table["share_class_id"].tolist() == funds["share_class_id"].astype(str).tolist()
    probs = table[[statistical.prob_column(g) for g in GRADES]].to_numpy()
    assert np.allclose(probs.sum(axis=1), 1.0)
    assert (table["gbm_grade"].to_numpy() == np.asarray(GRADES)[probs.argmax(axis=1)]).all()
    assert table["split"].iloc[-3:].tolist() == ["unlabelled"] * 3
    assert set(table.loc[table["split"].isin(["train", "validation"]), "fold"]) == {0, 1, 2, 3}
    assert (table.loc[~table["split"].isin(["train", "validation"]), "fold"] == statistical.TRAIN_FIT).all()
    assert summary["out_of_fold"]["exact"] > 0.3 and "test" not in summary  # the test funds are the backtest's


def test_a_training_funds_estimate_comes_from_a_model_that_never_saw_its_fold(estimated):
    """The leakage guard: refit without the fund's fold and predict it; the same probabilities."""
    funds, table, _, _ = estimated
    row = table[table["split"] == "train"].iloc[0]
    X = baselines.features(funds, None, category=True)
    seen = table["split"].isin(["train", "validation"]).to_numpy()
    rest = seen & (table["fold"].to_numpy() != row["fold"])
    y = funds["expert_grade"].to_numpy()
    model = baselines.fit(X[rest], y[rest].astype(int), funds["fund_id"].to_numpy()[rest], FAST, GRADES)
    here = np.flatnonzero(table["share_class_id"].to_numpy() == row["share_class_id"])
    expected = model.predict_proba(X.iloc[here])[0]
    assert np.allclose(expected, row[[statistical.prob_column(g) for g in GRADES]].to_numpy(dtype=float))
    # and it is not the in-sample fit: a model that saw the fund would be surer of its grade on average
    full = baselines.fit(X[seen], y[seen].astype(int), funds["fund_id"].to_numpy()[seen], FAST, GRADES)
    index = [GRADES.index(int(g)) for g in y[seen]]
    in_sample = full.predict_proba(X[seen])[np.arange(seen.sum()), index].mean()
    oof = table.loc[seen, [statistical.prob_column(g) for g in GRADES]].to_numpy()[np.arange(seen.sum()), index].mean()
    assert oof < in_sample


def test_share_classes_of_one_fund_share_a_fold(estimated):
    _, table, _, _ = estimated
    seen = table[table["split"].isin(["train", "validation"])]
    assert (seen.groupby("fund_id")["fold"].nunique() == 1).all()


def test_test_funds_and_new_funds_get_the_training_splits_model(estimated):
    funds, table, estimator, _ = estimated
    test = table[table["split"] == "test"]
    again = estimator.estimate(funds, test["share_class_id"].tolist())
    assert np.allclose(again["gbm_p3"].to_numpy(), test["gbm_p3"].to_numpy())
    new = funds.iloc[:1].assign(share_class_id="NEW", fund_id="NEWF")
    one = estimator.estimate(pd.concat([funds, new], ignore_index=True), ["NEW"])
    assert one.index.tolist() == ["NEW"] and one.iloc[0][
        [statistical.prob_column(g) for g in GRADES]
    ].sum() == pytest.approx(1)


def test_files_round_trip_and_a_different_split_is_refused(estimated, tmp_path):
    _, table, estimator, summary = estimated
    statistical.write(tmp_path / "ev", table, estimator, summary)
    read = statistical.read(tmp_path / "ev", PrepareParams())
    assert read.index.tolist() == table["share_class_id"].tolist()
    assert statistical.load_estimator(tmp_path / "ev").grades == GRADES
    with pytest.raises(statistical.EvidenceError, match="another split .* rerun `dvc repro evidence`"):
        statistical.read(tmp_path / "ev", PrepareParams(seed=99))
    with pytest.raises(statistical.EvidenceError, match="no evidence file; run `dvc repro evidence`"):
        statistical.read(tmp_path / "missing", PrepareParams())


def test_stale_evidence_is_named(estimated):
    _, table, _, _ = estimated
    indexed = table.set_index("share_class_id")
    ids = indexed.index[:2].tolist()
    with pytest.raises(statistical.EvidenceError, match="no estimate for 1 share class.*stale"):
        estimates.for_records(indexed, [*ids, "GONE"], ["train", "train", "train"], "prepare")
    wrong = ["test" if s != "test" else "train" for s in indexed.loc[ids, "split"]]
    with pytest.raises(statistical.EvidenceError, match="another split than when the evidence was computed"):
        estimates.for_records(indexed, ids, wrong, "prepare")


def test_the_split_is_prepares():
    funds = universe(40)
    table, _, _ = statistical.estimate(funds, FAST, EvidenceParams(), PrepareParams(seed=5), GRADES)
    assert table["split"].tolist() == [split_of(f, PrepareParams(seed=5)) for f in funds["fund_id"]]


def test_settings_are_checked_at_load():
    with pytest.raises(ParamsError, match="evidence.folds must be at least 2"):
        from_dict(Params, {"evidence": {"folds": 1}})
    with pytest.raises(ParamsError, match="need baseline.objective: classifier"):
        from_dict(Params, {"prepare": {"show_model": "gbm"}, "baseline": {"objective": "regressor"}})
    with pytest.raises(ParamsError, match="prepare.show_model must be one of"):
        from_dict(Params, {"prepare": {"show_model": "xgb"}})
    with pytest.raises(statistical.EvidenceError, match="need baseline.objective: classifier"):
        statistical.estimate(
            universe(20), dataclasses.replace(FAST, objective="regressor"), EvidenceParams(), PrepareParams(), GRADES
        )


def test_a_methodology_without_the_experts_grades_is_named_before_any_fit():
    """Two grade bands where the experts give five: the first stage that reads both says so (it once
    failed with `3 is not in list`)."""
    funds = universe(60, seed=4)
    with pytest.raises(statistical.EvidenceError, match=r"expert_grade 3, 4, 5 \(data rows .*bands must cover"):
        statistical.estimate(funds, FAST, EvidenceParams(folds=4), PrepareParams(), [1, 2])
