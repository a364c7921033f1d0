"""The text baseline reads what the documents say and the numbers do not, without seeing its own grades."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fundgrpo.evaluation import baselines, statistical, text_baseline
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.params import BaselineParams, EvidenceParams, PrepareParams

PARAMS = BaselineParams(max_iter=60, learning_rate=(0.1,), max_leaf_nodes=(7,))
GRADES = [1, 2, 3, 4, 5]
SAID = {-1: ["The lead manager resigned last spring.", "Three analysts left the team."],
        0: ["Markets were volatile this quarter.", "The manager did not leave, contrary to rumours."],
        1: ["Two experienced analysts joined the team.", "A seasoned deputy came on board."]}  # fmt: skip


def universe(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """Funds whose grade is half a metric, half what one document says (or nothing: no document)."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=n)
    fact = rng.choice([-1, 0, 1], size=n)
    text = [str(rng.choice(SAID[int(f)])) for f in fact]
    silent = rng.random(n) < 0.1
    grade = np.clip(np.round(3 + quality * 0.8 + fact * 1.0), 1, 5).astype(int)
    return pd.DataFrame(
        {
            "share_class_id": [f"S{i}" for i in range(n)],
            "fund_id": [f"F{i}" for i in range(n)],
            "category": "Equity",
            "sharpe_3y": quality + rng.normal(scale=0.3, size=n),
            "expert_grade": grade,
            "text": np.where(silent, "", text),
        }
    )


def test_the_text_baseline_beats_numbers_alone_when_the_documents_carry_half_the_grade():
    funds = universe()
    train, test = funds.iloc[:450], funds.iloc[450:]
    X = baselines.features(funds, ["sharpe_3y"], category=False)
    numbers = baselines.fit(X.iloc[:450], train["expert_grade"], train["fund_id"], PARAMS, GRADES)
    with_text = text_baseline.fit(X.iloc[:450].assign(document_text=train["text"].to_numpy()),
                                  train["expert_grade"], train["fund_id"], PARAMS, GRADES)  # fmt: skip
    plain = numbers.predict_proba(X.iloc[450:]).argmax(axis=1) + 1
    read = with_text.predict_proba(X.iloc[450:].assign(document_text=test["text"].to_numpy())).argmax(axis=1) + 1
    qwk = {name: grade_metrics(test["expert_grade"].tolist(), p.tolist(), GRADES)["qwk"] for name, p in
           (("numbers", plain), ("text", read))}  # fmt: skip
    assert qwk["text"] > qwk["numbers"] + 0.1, qwk


def test_a_row_without_documents_gets_no_text_features_never_a_guess():
    funds = universe(n=200)
    X = baselines.features(funds, ["sharpe_3y"], category=False).assign(document_text=funds["text"].to_numpy())
    fitted = text_baseline.fit(X, funds["expert_grade"], funds["fund_id"], PARAMS, GRADES)
    probs = fitted.text.predict_proba(pd.Series(["", "Two experienced analysts joined the team."]))
    assert np.isnan(probs[0]).all() and np.isclose(probs[1].sum(), 1.0)
    assert fitted.predict_proba(X.drop(columns=["document_text"]).head(3)).shape == (3, 5)  # scored without any


def test_cross_fitted_text_features_never_saw_their_own_grade():
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghij"), 8)) for _ in range(100)]
    texts = pd.Series([f"fund {w} {w}" for w in words])  # each text names its fund alone
    y = rng.choice([1, 5], 100)
    out = text_baseline.cross_fitted(texts, y, np.array([f"F{i}" for i in range(100)]), [1, 5])
    # a model that had seen the row would read its own token; out of fold it learns nothing from it
    assert abs(np.nanmean(out[y == 5, 1]) - np.nanmean(out[y == 1, 1])) < 0.2


def test_the_evidence_stage_estimates_with_documents_and_says_so():
    funds = universe(n=300)
    estimates, estimator, summary = statistical.estimate(
        funds.drop(columns="text"), PARAMS, EvidenceParams(folds=3), PrepareParams(), GRADES, funds["text"]
    )
    assert summary["inputs"] == "numbers and documents" and len(estimates) == 300
    again = estimator.estimate(funds.drop(columns="text"), ["S1", "S2"], funds["text"])
    assert list(again.index) == ["S1", "S2"]
