"""The registered champion's grades on a frame of funds: prediction drift and batch backtests.

Prompts are built exactly as for training (`fundgrpo.methodology.preparation.build_records`), with the
peer context computed over the frame itself (a batch is a snapshot of the market).
Rows without an expert grade are graded too; they only drop out of the metrics.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection
from pathlib import Path

import pandas as pd

from fundgrpo.data import documents
from fundgrpo.data.reading import IngestError
from fundgrpo.evaluation.agreement import metrics
from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.statistical import MODEL as MODEL_FILE
from fundgrpo.evaluation.statistical import Estimator, EvidenceError, load_estimator
from fundgrpo.methodology import citations
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.preparation import build_records
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import modelling
from fundgrpo.model.inference import answer
from fundgrpo.params import GenerationParams, Params, PrepareParams
from fundgrpo.registry import mlflow_registry
from fundgrpo.registry.mlflow_registry import CALIBRATION_FILE


def prompt_records(
    funds: pd.DataFrame,
    methodology: Methodology,
    prepare: PrepareParams,
    only: Collection[str] | None = None,
    estimator: Estimator | None = None,
    reading: citations.Reading | None = None,
) -> list[PromptRecord]:
    """One record per row (labelled or not: an unlabelled one has no expert grade nor reference; with `only`,
    per listed share class). Peer percentiles come from every row either way. `estimator`
    (the evidence stage's training-split model) gives each record its statistical estimate, which
    the prompt states under `prepare.show_model: gbm`. `reading` (`stored_reading`): the documents
    the prompts show and the text baseline reads, as in training; a fund without any gets none."""

    funds = funds.reset_index(drop=True)
    if prepare.show_model != "none" and estimator is None:
        raise EvidenceError(
            f"prepare.show_model is {prepare.show_model!r}: the prompts need the evidence model; "
            "run `dvc repro evidence`"
        )
    estimates = None
    if estimator is not None:
        texts = None
        if reading is not None:  # what the text baseline reads: each share class's documents, as in `evidence`
            texts = documents.texts(reading.documents, funds["share_class_id"])
        estimates = estimator.estimate(funds, None if only is None else [str(x) for x in only], texts)
    if "expert_grade" not in funds:
        funds = funds.assign(expert_grade=pd.Series(pd.NA, index=funds.index, dtype="Int64"))
    return build_records(funds, methodology, prepare, only, estimates, reading, labelled_only=False)


def stored_reading(
    params: Params,
    methodology: Methodology,
    universe: pd.DataFrame,
    root: Path = Path("."),
    posted: pd.DataFrame | None = None,
    only: list[str] | None = None,
) -> citations.Reading | None:
    """The documents and judgements `ingest` checked, with `posted` (documents sent with the funds,
    `documents.posted` or `documents.read`), as the prompts of `universe` read them (None when the
    methodology judges nothing from documents). Funds no document names get none; with `only` (the share
    classes evaluated), the other funds of `universe` get none either: their documents are read by no prompt
    and no estimate, and indexing all of them cost most of a one-fund request."""
    if not methodology.qualitative:
        return None
    docs_path, judged_path = root / params.ingest.documents_out, root / params.ingest.judgements_out
    docs = pd.read_parquet(docs_path) if docs_path.exists() else pd.DataFrame(columns=list(documents.COLUMNS))
    if posted is not None and not posted.empty:
        again = sorted(set(posted["document_id"]) & set(docs["document_id"]))
        if again:  # the stored one would be read twice or replaced unseen: the sender renames it
            raise IngestError(f"documents: document_id {again[:5]} already stored (ingest); give another id")
        docs = pd.concat([docs, posted], ignore_index=True)
    judged = pd.read_parquet(judged_path) if judged_path.exists() else pd.DataFrame(columns=["fund_id"])
    as_of = documents.as_of(params.ingest.documents, universe)
    if posted is not None:
        check_posted_dates(posted, as_of)
    funds = universe if only is None else universe[universe["share_class_id"].astype(str).isin(set(only))]
    return citations.reading(docs, judged, funds, as_of, params.prepare.document_chars)


def check_posted_dates(posted: pd.DataFrame, as_of: str | None) -> None:
    """Documents sent with funds are sent to be read: one dated after the data's as-of date, which no
    evaluation as of it may read, is an error naming it, never silently left out."""
    if not as_of or posted.empty:
        return
    later = posted[~posted["document_id"].isin(documents.readable(posted, as_of)["document_id"])]
    if not later.empty:
        named = ", ".join(f"{r.source} ({r.date})" for r in later.head(5).itertuples())
        raise IngestError(f"documents dated after the data's as-of date {as_of}, which no evaluation as of it "
                          f"reads: {named}; send the funds' metrics as of a later date")  # fmt: skip


def sample(records: list[PromptRecord], n: int, seed: int) -> list[PromptRecord]:
    """At most `n` records, a seeded sample in the original order.

    >>> [r.share_class_id for r in sample([PromptRecord.example(share_class_id=str(i)) for i in range(5)], 3, 0)]
    ['0', '3', '4']
    """
    if n <= 0 or len(records) <= n:
        return list(records)
    keep = sorted(random.Random(seed).sample(range(len(records)), n))
    return [records[i] for i in keep]


def load_champion(
    tracking_uri: str, model_name: str, dst: Path, methodology: Methodology | None = None
) -> tuple[Path, int] | None:
    """(local folder, version) of the champion as serving sees it (a version the gate promoted, trained
    on `methodology` when given; see mlflow_registry.served_version), or None when there is none to serve."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    if mlflow_registry.champion_version(client, model_name) is None:
        return None
    try:
        version, _ = mlflow_registry.served_version(
            client, model_name, mlflow_registry.CHAMPION, compiled_now=methodology
        )
    except mlflow_registry.AliasError:
        return None
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)  # download_artifacts resolves models:/ through the global URI
    return mlflow_registry.load_components(f"models:/{model_name}/{version}", dst), int(version)


def grade(
    folder: str | Path,
    records: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    generation: GenerationParams,
    desc: str,
    rule: DecisionRule | None = None,
) -> list[Prediction]:
    """Greedy evaluations of the model at `folder` for the records, parsed (an invalid one has no
    grade and says why); with a decision `rule`, each with its probabilities and confidence."""

    if not records:
        return []
    model, tokenizer = modelling.load(folder, generation.dtype)
    return answer(
        model,
        tokenizer,
        records,
        methodology,
        schema=schema,
        max_new_tokens=generation.max_new_tokens,
        batch_size=generation.batch_size,
        desc=desc,
        rule=rule,
    )


def calibration_of(folder: str | Path, params: Params, root: Path = Path(".")) -> DecisionRule:
    """The decision rule that goes with a model folder: from `calibration.json` beside its weights (a
    registered version's, written by `load_components`), the calibrate stage's for the policy
    folder (params' paths are under the workspace `root`, whatever the working directory), else
    the default rule (the belief at the score as read, the written grade kept)."""
    folder = Path(folder)
    beside = folder / CALIBRATION_FILE
    if beside.exists():
        return DecisionRule.of(json.loads(beside.read_text(encoding="utf-8")))
    stage = Path(root) / params.calibrate.out
    if folder.resolve() == (Path(root) / params.grpo.out_dir).resolve() and stage.exists():
        return DecisionRule.of(json.loads(stage.read_text(encoding="utf-8")))
    return DecisionRule()


def estimator_for(params: Params, root: Path = Path(".")) -> Estimator | None:
    """The evidence stage's training-split model, or None where it was not built and no prompt needs it."""
    folder = root / params.evidence.out_dir
    if not (folder / MODEL_FILE).exists() and params.prepare.show_model == "none":
        return None
    return load_estimator(folder)


def scored(
    records: list[PromptRecord], predictions: list[Prediction], methodology: Methodology
) -> dict[str, float] | None:
    """Backtest metrics over the labelled test-split records (funds never trained on) the methodology rates,
    or None if there are none."""

    pairs = [(r, p) for r, p in zip(records, predictions) if r.labelled and r.split == "test" and not r.not_rated]
    if not pairs:
        return None
    rows, preds = zip(*pairs)
    return {**metrics(list(rows), list(preds), methodology.grades), "n": float(len(rows))}
