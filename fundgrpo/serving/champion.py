"""The registered champion's grades on a frame of funds: prediction drift and batch backtests.

Prompts are built exactly as for training (`fundgrpo.methodology.preparation.build_records`), with the
peer context computed over the frame itself (a batch is a snapshot of the market).
Rows without an expert grade are graded too; they only drop out of the metrics.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from pathlib import Path

import pandas as pd

from fundgrpo.evaluation.backtesting import metrics, predictions_from_texts
from fundgrpo.methodology.preparation import build_records, split_of
from fundgrpo.params import BacktestParams, PrepareParams
from fundgrpo.registry import mlflow_registry
from fundgrpo.training import modelling


def prompt_records(
    funds: pd.DataFrame, rubric: dict, prepare: PrepareParams, only: Collection[str] | None = None
) -> list[dict]:
    """One record per row (labelled or not; with `only`, per listed share class), with `labelled`
    and the fund's `split` added. Peer percentiles come from every row either way."""

    funds = funds.reset_index(drop=True)
    grades = funds["expert_grade"] if "expert_grade" in funds else pd.Series(pd.NA, index=funds.index, dtype="Int64")
    labelled = grades.notna()
    # build_records skips unrated rows; the prompt does not depend on the grade, so a placeholder will do.
    placeholder = rubric["grades"][len(rubric["grades"]) // 2]
    records = build_records(funds.assign(expert_grade=grades.fillna(placeholder)), rubric, prepare, only)
    if only is not None:
        labelled = labelled[funds["share_class_id"].astype(str).isin({str(x) for x in only})]
    for record, is_labelled in zip(records, labelled):
        record["labelled"] = bool(is_labelled)
        record["split"] = split_of(record["fund_id"], prepare)
    return records


def sample(records: list[dict], n: int, seed: int) -> list[dict]:
    """At most `n` records, a seeded sample in the original order.

    >>> [r["i"] for r in sample([{"i": i} for i in range(5)], 3, 0)]
    [0, 3, 4]
    """
    if n <= 0 or len(records) <= n:
        return list(records)
    keep = sorted(random.Random(seed).sample(range(len(records)), n))
    return [records[i] for i in keep]


def load_champion(tracking_uri: str, model_name: str, dst: Path) -> tuple[Path, int] | None:
    """(local folder, version) of `models:/<name>@champion`, or None when no champion exists."""
    from mlflow import MlflowClient

    version = mlflow_registry.champion_version(MlflowClient(tracking_uri=tracking_uri), model_name)
    if version is None:
        return None
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)  # download_artifacts resolves models:/ through the global URI
    return mlflow_registry.load_components(f"models:/{model_name}/{version.version}", dst), int(version.version)


def grade(
    folder: str | Path, records: list[dict], rubric: dict, schema: dict, backtest: BacktestParams, desc: str
) -> list[dict]:
    """Greedy answers of the model at `folder` for the records, parsed (invalid -> neutral, flagged)."""

    if not records:
        return []
    model, tokenizer = modelling.load(folder)
    texts = modelling.generate(
        model, tokenizer, [r["prompt"] for r in records], backtest.max_new_tokens, backtest.batch_size, desc=desc
    )
    return predictions_from_texts(texts, rubric, schema)


def scored(records: list[dict], predictions: list[dict], rubric: dict) -> dict[str, float] | None:
    """Backtest metrics over the labelled test-split records (funds never trained on), or None if there are none."""

    pairs = [(r, p) for r, p in zip(records, predictions) if r["labelled"] and r["split"] == "test"]
    if not pairs:
        return None
    rows, preds = zip(*pairs)
    return {**metrics(list(rows), list(preds), rubric["grades"]), "n": float(len(rows))}
