"""A tuned non-LLM baseline: gradient boosting on the fund's metrics and their peer percentiles.

The LLM is only worth its cost if it beats this. Inputs are the canonical numeric
metrics a fund row carries (or a chosen list: e.g. a methodology's criteria), for each the
fund's percentile within its category (`fundgrpo.data.peers.percentile_within`, the peer
context the prompts show), and the category itself as a categorical feature (ratings
are relative to the peer group, so cut-offs differ by group: +2.5 points of exact
agreement on the Morningstar file). Never inputs: the labels (`expert_grade`,
`expert_score`) and the columns that leak the rating company's own pipeline
(`LEAKING`); only canonical columns are read, so a raw export's other columns cannot
slip in either.

Percentiles are taken over the whole universe passed in (training and test funds
together), as the `prepare` stage does for the prompts: they use no label, and an
analyst rates a fund against all its peers.

Model: `HistGradientBoostingClassifier` (grades as classes), or with
`objective: regressor` a `HistGradientBoostingRegressor` on the grade, rounded to the
nearest grade (ordinal; on the Morningstar file as good, and 4x faster). Both are
NaN-aware: a young fund's missing 5/10-year figures stay missing.

Tuning (`fit_predict`): each learning rate and leaf count of a small grid is fitted on
an inner fund-grouped split of the training funds, and the boosting round with the
lowest inner loss (log-loss; squared error for the regressor) is found; the best
setting is refitted on all training funds. Share classes of one fund never straddle
the inner split: they are near-copies, and a random split would reward memorising them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import numpy as np
import pandas as pd

from fundgrpo.data import canonical
from fundgrpo.data.peers import percentiles_within
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord, expert_grades
from fundgrpo.params import BaselineParams
from fundgrpo.threads import small_data

# Morningstar's own ratings and risk scores: derived from the very pipeline being imitated.
LEAKING = ("QuantitativeRating", "MorningstarRiskM255", "SustainabilityRank")
EXCLUDED = frozenset(LEAKING) | frozenset(canonical.LABELS)
MIN_TUNING_FUNDS = 10  # fewer training funds: no inner split, the first grid setting as it is
MAX_CATEGORIES = 250  # HistGradientBoosting bins a categorical feature into at most 255 values
OBJECTIVES = ("classifier", "regressor")


class BaselineError(ValueError):
    """The baseline cannot be fitted on these inputs; the message says what to rerun."""


def input_metrics(funds: pd.DataFrame, inputs: Methodology | Iterable[str] | None = None) -> list[str]:
    """The metric columns the baseline reads, in canonical order.

    `inputs`: None or empty for every canonical numeric input `funds` has; a compiled
    methodology for its criteria's metrics; or a list of canonical metric names.
    Labels, leaking columns and non-canonical names are refused; absent columns skipped.

    >>> f = pd.DataFrame({"category": ["a"], "return_3y": [1.0], "sharpe_3y": [0.5], "expert_grade": [3],
    ...                   "QuantitativeRating": [4]})
    >>> input_metrics(f)
    ['return_3y', 'sharpe_3y']
    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> input_metrics(f, example_methodology())
    ['sharpe_3y']
    >>> input_metrics(f, ["expert_grade"])
    Traceback (most recent call last):
    ...
    ValueError: baseline inputs may not include labels or leaking columns: ['expert_grade']
    """
    if isinstance(inputs, Methodology):
        wanted = [c.metric for c in inputs.criteria]
    elif inputs:
        wanted = list(inputs)
    else:
        wanted = [c.name for c in canonical.COLUMNS if c.kind == "number" and c.name not in EXCLUDED]
    refused = [m for m in wanted if m in EXCLUDED]
    if refused:
        raise ValueError(f"baseline inputs may not include labels or leaking columns: {refused}")
    unknown = [m for m in wanted if m not in canonical.BY_NAME or canonical.BY_NAME[m].kind != "number"]
    if unknown:
        raise ValueError(f"baseline inputs must be canonical numeric metrics, got {unknown}")
    wanted_set = set(wanted)
    return [c.name for c in canonical.COLUMNS if c.name in wanted_set and c.name in funds.columns]


def features(
    funds: pd.DataFrame, inputs: Methodology | Iterable[str] | None = None, category: bool = True
) -> pd.DataFrame:
    """Feature matrix: each input metric as is, its percentile within the category
    (`<metric>_pct`), and the category itself (a pandas categorical, so a tree can learn
    per-peer-group cut-offs; left out with `category=False` or beyond `MAX_CATEGORIES`).

    >>> f = pd.DataFrame({"category": ["a", "a", "b"], "return_3y": [1.0, 3.0, None]})
    >>> X = features(f)
    >>> X[["return_3y", "return_3y_pct"]].to_dict("list")
    {'return_3y': [1.0, 3.0, nan], 'return_3y_pct': [0.0, 100.0, nan]}
    >>> X["category"].dtype.name, list(features(f, category=False).columns)
    ('category', ['return_3y', 'return_3y_pct'])
    """
    metrics = input_metrics(funds, inputs)
    if not metrics:
        raise ValueError("baseline: the funds carry none of the input metrics")
    X = funds[metrics].astype(float).copy()
    pct = percentiles_within(funds, {m: True for m in metrics})
    X[[f"{m}_pct" for m in metrics]] = pct[metrics].to_numpy()
    if category and funds["category"].nunique() <= MAX_CATEGORIES:
        X["category"] = funds["category"].astype(str).astype("category")
    return X


# ----------------------------------------------------------------------- model


def _model(params: BaselineParams, learning_rate: float, max_leaf_nodes: int, max_iter: int):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    if params.objective not in OBJECTIVES:
        raise ValueError(f"baseline.objective must be one of {OBJECTIVES}, got {params.objective!r}")
    cls = HistGradientBoostingClassifier if params.objective == "classifier" else HistGradientBoostingRegressor
    return cls(
        learning_rate=learning_rate,
        max_leaf_nodes=max_leaf_nodes,
        max_iter=max_iter,
        l2_regularization=params.l2_regularization,
        min_samples_leaf=params.min_samples_leaf,
        categorical_features="from_dtype",  # the category column, when present
        early_stopping=False,  # rounds are chosen on the fund-grouped inner split instead
        random_state=params.seed,
    )


def to_grades(predicted: np.ndarray, grades: list[int]) -> np.ndarray:
    """Model output -> grades: a regressor's number rounds to the nearest grade.

    >>> to_grades(np.array([0.2, 2.49, 2.51, 7.0]), [1, 2, 3, 4, 5]).tolist()
    [1, 2, 3, 5]
    """
    g = np.asarray(sorted(grades))
    return g[np.abs(np.asarray(predicted, dtype=float)[:, None] - g[None, :]).argmin(axis=1)]


def _staged_loss(model, X: pd.DataFrame, y: np.ndarray) -> np.ndarray:
    """Inner loss after each boosting round: log-loss for a classifier (a class the model
    never saw counts as p = 1e-15), squared error for a regressor."""
    if not hasattr(model, "classes_"):
        return np.asarray([np.mean((pred - y) ** 2) for pred in model.staged_predict(X)])
    classes = list(model.classes_)
    col = np.array([classes.index(v) if v in classes else -1 for v in y])
    losses = []
    for proba in model.staged_predict_proba(X):
        p = np.where(col >= 0, proba[np.arange(len(y)), np.maximum(col, 0)], 0.0)
        losses.append(-np.mean(np.log(np.clip(p, 1e-15, 1.0))))
    return np.asarray(losses)


def _present(X: pd.DataFrame) -> list[str]:
    """Columns with at least one value (HistGradientBoosting cannot bin an all-NaN feature,
    e.g. 5-year figures when no fund has 5 years of history).

    >>> _present(pd.DataFrame({"a": [1.0, None], "b": [None, None]}))
    ['a']
    """
    return [c for c in X.columns if X[c].notna().any()]


def tune(X: pd.DataFrame, y: np.ndarray, groups: np.ndarray, params: BaselineParams) -> dict[str, Any]:
    """The grid setting and round count with the lowest loss on an inner fund-grouped split."""
    from sklearn.model_selection import GroupShuffleSplit

    if len(np.unique(groups)) < MIN_TUNING_FUNDS:
        return {
            "learning_rate": params.learning_rate[0],
            "max_leaf_nodes": params.max_leaf_nodes[0],
            "max_iter": params.max_iter,
            "inner_loss": None,
        }
    split = GroupShuffleSplit(n_splits=1, test_size=params.inner_validation_share, random_state=params.seed)
    fit_idx, val_idx = next(split.split(X, y, groups))
    best: dict[str, Any] | None = None
    for lr in params.learning_rate:
        for leaves in params.max_leaf_nodes:
            model = _model(params, lr, leaves, params.max_iter)
            cols = _present(X.iloc[fit_idx])
            model.fit(X.iloc[fit_idx][cols], y[fit_idx])
            losses = _staged_loss(model, X.iloc[val_idx][cols], y[val_idx])
            rounds = int(np.argmin(losses)) + 1
            if best is None or losses[rounds - 1] < best["inner_loss"]:
                best = {
                    "learning_rate": lr,
                    "max_leaf_nodes": leaves,
                    "max_iter": rounds,
                    "inner_loss": float(losses[rounds - 1]),
                }
    assert best is not None
    best["inner_loss"] = round(best["inner_loss"], 4)
    return best


@dataclasses.dataclass
class Fitted:
    """A tuned model refitted on all training rows, with the columns it reads and the grades it knows."""

    model: Any  # HistGradientBoostingClassifier / Regressor, or None for a one-grade training set
    columns: list[str]
    grades: list[int]
    chosen: dict[str, Any]
    constant: int | None = None  # the only grade the training rows had

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Grades for the rows of `X` (a regressor's number rounded to the nearest grade)."""
        if self.model is None:
            return np.full(len(X), self.constant, dtype=int)
        with small_data():
            return to_grades(self.model.predict(X[self.columns]), self.grades).astype(int)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """(rows, grades) probabilities, one column per grade of the methodology in order; a grade the
        training rows never had gets 0. Only a classifier has them (`baseline.objective: classifier`)."""
        out = np.zeros((len(X), len(self.grades)))
        if self.model is None:
            assert self.constant is not None  # fitted on one grade: the model is that constant
            out[:, self.grades.index(self.constant)] = 1.0
            return out
        if not hasattr(self.model, "classes_"):
            raise BaselineError(
                "grade probabilities need baseline.objective: classifier (a regressor predicts a number only)"
            )
        with small_data():
            proba = self.model.predict_proba(X[self.columns])
        for j, c in enumerate(self.model.classes_):
            out[:, self.grades.index(int(c))] = proba[:, j]
        return out


def fit(
    X_train: pd.DataFrame,
    y_train,
    groups_train,
    params: BaselineParams = BaselineParams(),
    grades: list[int] | tuple[int, ...] = (1, 2, 3, 4, 5),
) -> Fitted:
    """Tune on an inner fund-grouped split, then refit the chosen setting on all training rows."""
    y = np.asarray(y_train, dtype=int)
    groups = np.asarray(groups_train)
    grades = [int(g) for g in grades]
    if len(np.unique(y)) < 2:  # one class only: nothing to learn, predict it
        only = int(y[0]) if len(y) else grades[len(grades) // 2]
        return Fitted(None, [], grades, {"constant": True}, constant=only)
    with small_data():  # one OpenMP thread (fundgrpo/threads.py says why)
        chosen = tune(X_train, y, groups, params)
        model = _model(params, chosen["learning_rate"], chosen["max_leaf_nodes"], chosen["max_iter"])
        cols = _present(X_train)
        model.fit(X_train[cols], y)
    return Fitted(model, cols, grades, chosen)


def fit_predict(
    X_train: pd.DataFrame,
    y_train,
    groups_train,
    X_test: pd.DataFrame,
    params: BaselineParams = BaselineParams(),
    grades: list[int] | tuple[int, ...] = (1, 2, 3, 4, 5),
) -> tuple[np.ndarray, dict[str, Any]]:
    """Tune, refit on all training rows, predict the test rows: (grades, the chosen setting)."""
    fitted = fit(X_train, y_train, groups_train, params, grades)
    return fitted.predict(X_test), fitted.chosen


def fit_predict_gbm(
    train_funds: pd.DataFrame,
    test_funds: pd.DataFrame,
    seed: int = 0,
    inputs: Methodology | Iterable[str] | None = None,
    params: BaselineParams | None = None,
) -> np.ndarray:
    """Predicted grades for `test_funds` from a GBM trained on the labelled `train_funds`.

    Features are computed over both frames together (peer percentiles use no label).
    `seed` replaces `params.seed`; `inputs` (see `input_metrics`) replaces `params.features`.
    """
    params = dataclasses.replace(params or BaselineParams(), seed=seed)
    both = pd.concat([train_funds, test_funds], ignore_index=True)
    X = features(both, inputs if inputs is not None else (params.features or None), category=params.category)
    n = len(train_funds)
    labelled = train_funds["expert_grade"].notna().to_numpy()
    X_train = X.iloc[:n][labelled]
    grades, _ = fit_predict(
        X_train, train_funds["expert_grade"][labelled], train_funds["fund_id"][labelled], X.iloc[n:], params
    )
    return grades


def gbm_metrics(rows: list[PromptRecord], summary: dict, params: BaselineParams, grades: list[int], split: str) -> dict:
    """The gradient-boosting baseline's figures on the records of one split (the `baseline` stage:
    validation, whose estimates are out of fold; the test split is the backtest's): its grades are
    the `evidence` stage's estimates, which `prepare` puts in each record (`gbm_grade`); `summary`
    is the evidence stage's (features, tuning, sizes).

    >>> rows = [PromptRecord.example(expert_grade=g, gbm_grade=p) for g, p in [(1, 1), (2, 2), (3, 2)]]
    >>> summary = {"train_rows": 9, "train_funds": 5, "features": [], "chosen": {}}
    >>> m = gbm_metrics(rows, summary, BaselineParams(), [1, 2, 3], "validation")
    >>> m["exact"], m["n"], m["split"]
    (0.6667, 3, 'validation')
    """
    stale = sum(r.gbm_grade is None for r in rows)
    if stale:
        raise BaselineError(f"baseline: {stale} {split} record(s) carry no gradient-boosting grade; rerun prepare")
    if not rows:
        raise BaselineError(f"baseline: the {split} split is empty")
    scores = grade_metrics(expert_grades(rows), [r.gbm_grade for r in rows if r.gbm_grade is not None], grades)
    return {
        "model": f"HistGradientBoosting{params.objective.capitalize()}",
        "n_train": summary["train_rows"],
        "n_train_funds": summary.get("train_funds"),
        "split": split,
        "n": len(rows),
        "features": summary["features"],
        "chosen": summary["chosen"],
        **{k: round(v, 4) for k, v in scores.items()},
    }
