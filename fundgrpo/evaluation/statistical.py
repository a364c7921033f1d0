"""Statistical evidence for the prompt (stage `evidence`): gradient boosting's grade and grade
probabilities for every share class, computed so that no estimate saw its own fund's grade.

A low-confidence language model follows the strongest evidence in its prompt (SmolLM2 keeps the
methodology's grade shown to it on 78 % of Morningstar funds), so `prepare.show_model: gbm` shows
this estimate beside the methodology's verdict. Leakage is the trap: an estimate shown for a
training fund must come from a model that never saw that fund, or the language model learns to
copy an estimate that is right only because it was fitted on the answer.

* Training and validation funds: out of fold. Their funds are dealt into `evidence.folds` folds by
  a seeded hash of the fund id (share classes of one fund never straddle folds, and a fund keeps
  its fold as the universe grows); each fold's estimates come from a model fitted on the other folds.
* Test funds, unlabelled rows and new funds (`evaluate`, the API, monitoring): the model fitted on
  the training split, which is also the `baseline` stage's gradient-boosting baseline. It is saved
  (`model.pkl`) so that new funds get the very same evidence.

The model and its tuning are the baseline's (`baseline:` in params.yaml, `fundgrpo.evaluation.baselines`);
features are taken over the whole validated universe, as for the prompts.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fundgrpo import io
from fundgrpo.evaluation import baselines, text_baseline
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.methodology import compiler
from fundgrpo.methodology.estimates import EvidenceError, prob_column
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import BaselineParams, EvidenceParams, PrepareParams

TABLE = "estimates.parquet"
MODEL = "model.pkl"
META = "meta.json"
TRAIN_FIT = -1  # `fold` of a row estimated by the training split's model


def fold_of(fund_id: str, folds: int, seed: int) -> int:
    """The fold of a fund, from a seeded hash of its id (stable as funds come and go).

    >>> fold_of("F1", 5, 0) == fold_of("F1", 5, 0), 0 <= fold_of("F1", 5, 0) < 5
    (True, True)
    """
    return int(hashlib.sha256(f"evidence:{seed}:{fund_id}".encode()).hexdigest()[:12], 16) % folds


@dataclass
class Estimator:
    """The training split's model, with how its features are built: what new funds are scored with."""

    fitted: baselines.Fitted | text_baseline.TextFitted
    features: tuple[str, ...]
    category: bool

    @property
    def grades(self) -> list[int]:
        return self.fitted.grades

    def estimate(
        self, universe: pd.DataFrame, ids: list[str] | None = None, texts: pd.Series | None = None
    ) -> pd.DataFrame:
        """Grade and probabilities for the share classes `ids` of `universe` (all rows when None),
        indexed by share_class_id; features are taken over the whole universe. `texts` (a text model's
        input, row-aligned with `universe`): each row's documents; without them a text model reads none."""
        universe = universe.reset_index(drop=True)
        X = baselines.features(universe, self.features or None, category=self.category)
        if texts is not None:
            X[text_baseline.TEXT] = texts.to_numpy()
        for column in self.fitted.columns:  # a metric the training universe had and this one lacks
            if column not in X:
                X[column] = np.nan
        rows = (
            np.arange(len(universe))
            if ids is None
            else np.flatnonzero(universe["share_class_id"].astype(str).isin({str(i) for i in ids}).to_numpy())
        )
        probs = self.fitted.predict_proba(X.iloc[rows])
        return table(universe["share_class_id"].iloc[rows].astype(str).tolist(), probs, self.grades)


def table(ids: list[str], probs: np.ndarray, grades: list[int]) -> pd.DataFrame:
    """Estimates indexed by share_class_id: `gbm_grade` (the most probable grade) and one
    probability column per grade.

    >>> table(["a"], np.array([[0.1, 0.7, 0.2]]), [1, 2, 3]).loc["a"].tolist()
    [2.0, 0.1, 0.7, 0.2]
    """
    out = pd.DataFrame(probs, columns=[prob_column(g) for g in grades], index=pd.Index(ids, name="share_class_id"))
    out.insert(0, "gbm_grade", np.asarray(grades)[probs.argmax(axis=1)].astype(int))
    return out


def estimate(
    funds: pd.DataFrame,
    baseline: BaselineParams,
    evidence: EvidenceParams,
    prepare: PrepareParams,
    grades: list[int],
    texts: pd.Series | None = None,
) -> tuple[pd.DataFrame, Estimator, dict[str, Any]]:
    """(estimates for every row of `funds`, the training split's estimator, a summary).

    `texts` (row-aligned with `funds`: each share class's readable documents as one text) makes the
    model the text baseline (`fundgrpo.evaluation.text_baseline`): the numbers and the documents.

    The estimates table has share_class_id, fund_id, split, fold (TRAIN_FIT for rows estimated by
    the training split's model), gbm_grade and one `gbm_p<grade>` column per grade.
    """
    funds = funds.reset_index(drop=True)
    ids, split = checked_split(funds, baseline, prepare, grades)
    train = split == "train"
    X = baselines.features(funds, baseline.features or None, category=baseline.category)
    fit = baselines.fit if texts is None else text_baseline.fit
    if texts is not None:
        X[text_baseline.TEXT] = texts.to_numpy()
    y = funds["expert_grade"].to_numpy()
    groups = funds["fund_id"].astype(str).to_numpy()

    fitted = fit(X[train], y[train].astype(int), groups[train], baseline, grades)
    probs = np.zeros((len(funds), len(grades)))
    fold = np.full(len(funds), TRAIN_FIT)
    elsewhere = ~np.isin(split, ("train", "validation"))
    probs[elsewhere] = fitted.predict_proba(X[elsewhere])

    seen = np.isin(split, ("train", "validation"))  # labelled funds the LLM trains or is selected on
    fold[seen] = [fold_of(f, evidence.folds, evidence.seed) for f in groups[seen]]
    for k in range(evidence.folds):
        held = seen & (fold == k)
        if not held.any():
            continue
        rest = seen & (fold != k)
        model = fit(X[rest], y[rest].astype(int), groups[rest], baseline, grades)
        probs[held] = model.predict_proba(X[held])

    out = table(ids.tolist(), probs, grades).reset_index()
    out.insert(1, "fund_id", groups)
    out.insert(2, "split", split)
    out.insert(3, "fold", fold.astype(int))
    summary: dict[str, Any] = {
        "folds": evidence.folds,
        "seed": evidence.seed,
        "split": split_settings(prepare),
        "rows": int(len(out)),
        **{f"{s}_rows": int((split == s).sum()) for s in ("train", "validation", "test", "unlabelled")},
        "train_funds": int(len(set(groups[train]))),
        "chosen": fitted.chosen,
        "features": list(X.columns),
        "inputs": "numbers and documents" if texts is not None else "numbers",
    }
    if seen.any():  # out of fold on training and validation funds; the test funds are the backtest's to read
        found = grade_metrics(y[seen].astype(int).tolist(), out.loc[seen, "gbm_grade"].tolist(), grades)
        summary["out_of_fold"] = {k: round(v, 4) for k, v in found.items()}
    # no wall time in the summary: it is written beside the estimates, and equal inputs must give
    # byte-equal outputs (a timing would make DVC rerun every stage after this one for nothing)
    estimator = Estimator(fitted, tuple(baseline.features), baseline.category)
    return out, estimator, summary


def checked_split(
    funds: pd.DataFrame, baseline: BaselineParams, prepare: PrepareParams, grades: list[int]
) -> tuple[pd.Series, np.ndarray]:
    """(share class ids, each row's split: train, validation, test or unlabelled), once the inputs are
    checked: a classifier, every grade labelled, ids unique, a training split that is not empty."""
    if baseline.objective != "classifier":
        raise EvidenceError(
            f"evidence: grade probabilities need baseline.objective: classifier, got {baseline.objective!r}"
        )
    if problem := compiler.uncovered_grades(funds["expert_grade"], grades):
        raise EvidenceError(f"evidence: {problem}")
    ids = funds["share_class_id"].astype(str)
    if ids.duplicated().any():
        raise EvidenceError(
            f"evidence: share_class_id repeats in the validated table (e.g. {ids[ids.duplicated()].iloc[0]!r})"
        )
    labelled = funds["expert_grade"].notna().to_numpy()
    split = np.where(
        labelled, funds["fund_id"].astype(str).map(lambda f: split_of(f, prepare)).to_numpy(), "unlabelled"
    )
    if not (split == "train").any():
        raise EvidenceError(
            "evidence: no labelled fund falls in the training split; add funds or change prepare's shares"
        )
    return ids, split


def split_settings(prepare: PrepareParams) -> dict[str, float]:
    """The prepare settings that decide the split (the evidence must be computed with the same)."""
    return {"seed": prepare.seed, "train_share": prepare.train_share, "validation_share": prepare.validation_share}


# ------------------------------------------------------------------------------ files


def write(out_dir: str | Path, estimates: pd.DataFrame, estimator: Estimator, summary: dict) -> None:
    """The three files, replacing the last good ones together."""
    with io.atomic_path(out_dir) as tmp:
        tmp.mkdir()
        estimates.to_parquet(tmp / TABLE, index=False)
        (tmp / MODEL).write_bytes(pickle.dumps(estimator))
        (tmp / META).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")


def read(out_dir: str | Path, prepare: PrepareParams) -> pd.DataFrame:
    """The estimates table indexed by share_class_id, checked against prepare's split settings."""
    folder = Path(out_dir)
    path, meta = folder / TABLE, folder / META
    if not path.exists() or not meta.exists():
        raise EvidenceError(f"{path}: no evidence file; run `dvc repro evidence` (prepare reads it for every record)")
    recorded = json.loads(meta.read_text(encoding="utf-8")).get("split")
    if recorded != split_settings(prepare):
        raise EvidenceError(
            f"{path} was computed with another split ({recorded}) than prepare's {split_settings(prepare)}: "
            "its out-of-fold estimates would leak; rerun `dvc repro evidence`"
        )
    return pd.read_parquet(path).set_index("share_class_id")


def read_summary(out_dir: str | Path) -> dict:
    path = Path(out_dir) / META
    if not path.exists():
        raise EvidenceError(f"{path}: no evidence summary; run `dvc repro evidence`")
    return json.loads(path.read_text(encoding="utf-8"))


def load_estimator(out_dir: str | Path) -> Estimator:
    path = Path(out_dir) / MODEL
    if not path.exists():
        raise EvidenceError(f"{path}: no evidence model; run `dvc repro evidence`")
    return pickle.loads(path.read_bytes())  # our own artefact, written by the evidence stage
