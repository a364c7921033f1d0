"""Drift of a new batch against the training reference, with Evidently 0.7 (new API).

Data drift: one pinned per-column test on the fund features (Evidently's default test
switches from a p-value to a distance above 1000 rows, which would change what the
threshold means as data grows); the dataset verdict is the share of drifted columns
against `monitor.drift_share` (the new API has no dataset-drift flag).

Prediction drift: the same kind of test on the champion's grade distribution over the
batch against that over the reference, and the rating migration: the share of share classes
in both frames whose champion grade moved. A ranked methodology hands out the same share of
each grade in any snapshot, so a market-wide shift leaves the distribution as it was; what
moves is which funds hold which grade (rule scorer on the synthetic default, 6 months on:
0.27 of share classes move in a calm market, 0.45 after a volatility spike).

Below `monitor.min_rows` rows in either frame there is no verdict: the report says
"too few rows for a verdict" instead.
"""

from __future__ import annotations

import html
import json
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from fundgrpo import io
from fundgrpo.data.canonical import BY_NAME, LABELS
from fundgrpo.data.documents import HANGUL
from fundgrpo.params import MonitorParams

DRIFTED_COLUMNS = "evidently:metric_v2:DriftedColumnsCount"
VALUE_DRIFT = "evidently:metric_v2:ValueDrift"


class DriftError(ValueError):
    """The frames cannot be compared; the message says why."""


@dataclass(frozen=True)
class DataDrift:
    verdict: bool | None  # None: no verdict (the reason says why)
    reason: str
    share: float | None = None  # share of drifted feature columns
    drifted: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)  # column -> test statistic
    rows: dict[str, int] = field(default_factory=dict)  # {"reference": n, "current": n}
    method: str = ""
    threshold: float = 0.0
    drift_share: float = 0.0


@dataclass(frozen=True)
class PredictionDrift:
    verdict: bool | None
    reason: str
    score: float | None = None
    distribution: dict[str, dict[str, float]] = field(default_factory=dict)  # frame -> grade -> share
    method: str = ""
    threshold: float = 0.0
    migration: float | None = None  # share of the share classes graded in both frames whose grade moved
    paired: int = 0  # share classes graded in both frames
    transitions: dict[str, dict[str, int]] = field(default_factory=dict)  # reference grade -> batch grade -> count
    migration_threshold: float = 0.0


# ------------------------------------------------------------------- columns


def feature_columns(reference: pd.DataFrame, current: pd.DataFrame, params: MonitorParams) -> list[str]:
    """`monitor.features`, or every numeric canonical column (labels excluded) with values in both frames.

    >>> ref = pd.DataFrame({"return_1y": [1.0], "return_5y": [None], "expert_grade": [3], "name": ["a"]})
    >>> feature_columns(ref, ref, MonitorParams())
    ['return_1y']
    """
    if params.features:
        unknown = [c for c in params.features if c not in BY_NAME]
        missing = [c for c in params.features if c not in reference or c not in current]
        if unknown or missing:
            raise DriftError(
                f"monitor.features: {unknown + missing} are not canonical columns "
                "present in both the batch and the reference"
            )
        return list(params.features)
    columns = [
        c.name
        for c in BY_NAME.values()
        if c.kind == "number"
        and c.name not in LABELS
        and c.name in reference
        and c.name in current
        and reference[c.name].notna().any()
        and current[c.name].notna().any()
    ]
    if not columns:
        raise DriftError("the batch and the reference share no numeric fund feature to compare")
    return columns


def too_few_rows(n_reference: int, n_current: int, min_rows: int, unit: str = "rows") -> str | None:
    """Why there can be no verdict, or None.

    >>> too_few_rows(500, 12, 30)
    'too few rows for a verdict: the batch has 12 rows, monitor.min_rows is 30'
    >>> too_few_rows(0, 40, 30, "documents")
    'too few documents for a verdict: the reference has 0 documents, monitor.min_rows is 30'
    """
    for what, n in (("batch", n_current), ("reference", n_reference)):
        if n < min_rows:
            return f"too few {unit} for a verdict: the {what} has {n} {unit}, monitor.min_rows is {min_rows}"
    return None


# ------------------------------------------------------------------ evidently


def _run_report(
    metrics: list[Any], reference: pd.DataFrame, current: pd.DataFrame, definition: Any, out: Path, stem: str
) -> dict:
    """Run an Evidently report, write <stem>.html and <stem>.json atomically; return the JSON."""
    from evidently import Dataset, Report

    with warnings.catch_warnings():  # evidently/scipy warn on constant columns; the scores say it
        warnings.simplefilter("ignore")
        snapshot = Report(metrics, include_tests=True).run(
            current_data=Dataset.from_pandas(current, data_definition=definition),
            reference_data=Dataset.from_pandas(reference, data_definition=definition),
        )
    result = json.loads(snapshot.json())  # plain JSON: snapshot.dict() holds numpy scalars
    with io.atomic_path(out / f"{stem}.html") as tmp:
        snapshot.save_html(str(tmp))
    io.write_json(result, out / f"{stem}.json")
    return result


def _column_results(result: dict) -> tuple[dict[str, float], dict[str, bool]]:
    """Per-column scores (metrics) and drift flags (failed tests) from a report's JSON."""
    scores = {
        m["config"]["column"]: float(m["value"]) for m in result["metrics"] if m["config"].get("type") == VALUE_DRIFT
    }
    drifted = {
        t["metric_config"]["params"]["column"]: t["status"] == "FAIL"
        for t in result.get("tests", [])
        if t["metric_config"]["params"].get("type") == VALUE_DRIFT
    }
    return scores, drifted


def data_drift(reference: pd.DataFrame, current: pd.DataFrame, params: MonitorParams, out: Path) -> DataDrift:
    """Evidently data drift on the fund features; writes drift.html and drift.json into `out`."""
    rows = {"reference": len(reference), "current": len(current)}
    pinned = DataDrift(None, "", rows=rows, method=params.method, threshold=params.threshold,
                       drift_share=params.drift_share)  # fmt: skip
    reason = too_few_rows(len(reference), len(current), params.min_rows)
    if reason:
        io.write_text(_no_verdict_html("Data drift", reason), out / "drift.html")
        return replace(pinned, reason=reason)

    from evidently import DataDefinition
    from evidently.presets import DataDriftPreset

    columns = feature_columns(reference, current, params)
    # Declared numerical: a feature with few distinct values must not turn categorical.
    definition = DataDefinition(numerical_columns=columns, categorical_columns=[])
    preset = DataDriftPreset(
        columns=columns, num_method=params.method, num_threshold=params.threshold, drift_share=params.drift_share
    )
    result = _run_report([preset], reference[columns], current[columns], definition, out, "drift")
    counted = next(m["value"] for m in result["metrics"] if m["config"].get("type") == DRIFTED_COLUMNS)
    scores, flags = _column_results(result)
    share = float(counted["share"])
    drifted = [c for c in columns if flags.get(c)]
    verdict = share >= params.drift_share
    verb = "drift" if verdict else "no drift"
    reason = (
        f"{verb}: {len(drifted)} of {len(columns)} fund features drifted "
        f"(share {share:.2f}, threshold {params.drift_share:g})"
    )
    return replace(pinned, verdict=verdict, reason=reason, share=share, drifted=drifted, scores=scores)


@dataclass(frozen=True)
class DocumentDrift:
    verdict: bool | None  # None: no verdict (too few documents, or none sent)
    reason: str
    share: float | None = None  # share of drifted descriptors
    drifted: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)  # descriptor -> test statistic
    rows: dict[str, int] = field(default_factory=dict)  # documents: {"reference": n, "current": n}
    kinds: dict[str, dict[str, float]] = field(default_factory=dict)  # frame -> document kind -> share


TEXT_NUMBERS = ("length", "non_letter_share", "korean_share", "unseen_word_share")  # per document
WORD = re.compile(r"[^\W\d_]+")


def words(text: str) -> list[str]:
    """The words of a text, lower-cased (Hangul runs are words too).

    >>> words("The lead-manager LEFT in 2024; 책임운용역이 퇴사")
    ['the', 'lead', 'manager', 'left', 'in', '책임운용역이', '퇴사']
    """
    return [w.lower() for w in WORD.findall(text)]


def descriptors(documents: pd.DataFrame, vocabulary: set[str]) -> pd.DataFrame:
    """Per document: its length and non-letter share (Evidently's text descriptors), its Korean share
    (Hangul among letters: the language mix, which a detected language's label hides in mixed text),
    the share of its words the reference documents never used (`vocabulary`), and its kind."""
    from evidently import DataDefinition, Dataset
    from evidently.descriptors import NonLetterCharacterPercentage, TextLength

    texts = documents[["text"]].reset_index(drop=True)
    described = Dataset.from_pandas(
        texts,
        data_definition=DataDefinition(text_columns=["text"]),
        descriptors=[TextLength("text", alias="length"), NonLetterCharacterPercentage("text", alias="non_letter")],
    ).as_dataframe()
    letters = texts["text"].map(lambda t: WORD.findall(t))
    hangul = letters.map(lambda ws: sum(len(HANGUL.findall(w)) for w in ws) / max(1, sum(len(w) for w in ws)))
    unseen = texts["text"].map(lambda t: (lambda ws: sum(w not in vocabulary for w in ws) / max(1, len(ws)))(words(t)))
    return pd.DataFrame(
        {
            "length": described["length"].astype(float),
            "non_letter_share": described["non_letter"].astype(float) / 100,
            "korean_share": hangul.astype(float),
            "unseen_word_share": unseen.astype(float),
            "kind": documents["kind"].astype(str).to_numpy(),
        }
    )


def document_drift(reference: pd.DataFrame, current: pd.DataFrame, params: MonitorParams, out: Path) -> DocumentDrift:
    """Drift of a batch's documents from the reference's (each a `documents.COLUMNS` frame): Evidently's
    per-column test on each descriptor (`descriptors`; the kind's mix as a categorical column, tested as
    the grades are), the verdict by `monitor.drift_share` as for the fund features; writes
    documents_drift.html/.json into `out`."""
    # Half the reference gives the vocabulary, the other half is compared: a document's unseen-word share
    # is then out of sample on both sides (against its own vocabulary the reference's would be 0).
    ordered = reference.sort_values("document_id", kind="stable")
    source, reference = ordered.iloc[::2], ordered.iloc[1::2]
    rows = {"reference": len(reference), "current": len(current)}
    reason = too_few_rows(len(reference), len(current), params.min_rows, "documents")
    if reason:
        io.write_text(_no_verdict_html("Document drift", reason), out / "documents_drift.html")
        return DocumentDrift(None, reason, rows=rows)

    from evidently import DataDefinition
    from evidently.metrics import ValueDrift

    vocabulary = {w for t in source["text"] for w in words(t)}
    ref, cur = descriptors(reference, vocabulary), descriptors(current, vocabulary)
    definition = DataDefinition(numerical_columns=list(TEXT_NUMBERS), categorical_columns=["kind"])
    metrics = [ValueDrift(column=c, method=params.method, threshold=params.threshold) for c in TEXT_NUMBERS]
    metrics.append(ValueDrift(column="kind", method=params.prediction_method, threshold=params.prediction_threshold))
    result = _run_report(metrics, ref, cur, definition, out, "documents_drift")
    scores, flags = _column_results(result)
    columns = [*TEXT_NUMBERS, "kind"]
    drifted = [c for c in columns if flags.get(c)]
    share = len(drifted) / len(columns)
    verdict = share >= params.drift_share
    kinds = {
        name: {str(k): round(float(v), 4) for k, v in frame["kind"].value_counts(normalize=True).sort_index().items()}
        for name, frame in (("reference", ref), ("current", cur))
    }
    named = f" ({', '.join(drifted)})" if drifted else ""
    reason = (
        f"{'drift' if verdict else 'no drift'}: {len(drifted)} of {len(columns)} document descriptors drifted{named} "
        f"(share {share:.2f}, threshold {params.drift_share:g})"
    )
    return DocumentDrift(verdict, reason, round(share, 4), drifted, scores, rows, kinds)


INVALID = "invalid"  # the label of an answer without a grade, in distributions and migrations


def grade_label(grade: int | None) -> str:
    """A grade as text; an invalid answer (no grade) is its own category, never dropped.

    >>> grade_label(3), grade_label(3.0), grade_label(None)
    ('3', '3', 'invalid')
    """
    return INVALID if grade is None or pd.isna(grade) else str(int(grade))


def rating_migration(pairs: list[tuple[int | None, int | None]]) -> tuple[float | None, dict[str, dict[str, int]]]:
    """Share of (reference grade, batch grade) pairs that differ, and the transition counts. An
    invalid answer (None) counts as its own grade: a fund whose valid grade turns invalid has moved.

    >>> rating_migration([(3, 3), (3, 4), (5, 5), (1, 3)])
    (0.5, {'1': {'3': 1}, '3': {'3': 1, '4': 1}, '5': {'5': 1}})
    >>> rating_migration([(3, None), (None, None), (2, 2)])
    (0.3333, {'2': {'2': 1}, '3': {'invalid': 1}, 'invalid': {'invalid': 1}})
    >>> rating_migration([])
    (None, {})
    """
    if not pairs:
        return None, {}
    labelled = sorted((grade_label(a), grade_label(b)) for a, b in pairs)
    table: dict[str, dict[str, int]] = {}
    for before, after in labelled:
        row = table.setdefault(before, {})
        row[after] = row.get(after, 0) + 1
    return round(sum(a != b for a, b in labelled) / len(labelled), 4), table


def prediction_drift(
    reference_grades: list[int | None],
    current_grades: list[int | None],
    params: MonitorParams,
    out: Path,
    pairs: list[tuple[int | None, int | None]] | None = None,
) -> PredictionDrift:
    """Evidently drift of the champion's grade distribution, and the rating migration over `pairs`
    (the champion's grade of one share class on the reference and on the batch); writes
    prediction_drift.html/.json into `out`. Either past its threshold is drift."""
    migration, transitions = rating_migration(pairs or [])
    pinned = PredictionDrift(
        None,
        "",
        distribution={"reference": _shares(reference_grades), "current": _shares(current_grades)},
        method=params.prediction_method,
        threshold=params.prediction_threshold,
        migration=migration,
        paired=len(pairs or []),
        transitions=transitions,
        migration_threshold=params.migration_threshold,
    )
    reason = too_few_rows(len(reference_grades), len(current_grades), params.min_rows)
    if reason:
        io.write_text(_no_verdict_html("Prediction drift", reason), out / "prediction_drift.html")
        return replace(pinned, reason=reason)

    from evidently import DataDefinition
    from evidently.metrics import ValueDrift

    # Grades as text: a categorical column whatever the values.
    ref = pd.DataFrame({"grade": [grade_label(g) for g in reference_grades]})
    cur = pd.DataFrame({"grade": [grade_label(g) for g in current_grades]})
    definition = DataDefinition(categorical_columns=["grade"], numerical_columns=[])
    metric = ValueDrift(column="grade", method=params.prediction_method, threshold=params.prediction_threshold)
    result = _run_report([metric], ref, cur, definition, out, "prediction_drift")
    scores, flags = _column_results(result)
    shifted = bool(flags.get("grade"))
    reason = (
        f"champion's grade distribution {params.prediction_method} {scores['grade']:.3f} "
        f"(threshold {params.prediction_threshold:g})"
    )
    migrated = False
    if params.migration_threshold > 0 and migration is not None and len(pairs or []) >= params.min_rows:
        migrated = migration >= params.migration_threshold
        reason += (
            f"; rating migration {migration:.2f} of {len(pairs or [])} share classes graded in both "
            f"(threshold {params.migration_threshold:g})"
        )
    verdict = shifted or migrated
    return replace(
        pinned, verdict=verdict, reason=f"{'drift' if verdict else 'no drift'}: {reason}", score=scores["grade"]
    )


def _shares(grades: list[int | None]) -> dict[str, float]:
    """{"1": share, ...} over the grades present; invalid answers as "invalid".

    >>> _shares([1, 3, 3, 5])
    {'1': 0.25, '3': 0.5, '5': 0.25}
    >>> _shares([2, None])
    {'2': 0.5, 'invalid': 0.5}
    """
    counts = pd.Series([grade_label(g) for g in grades], dtype=object).value_counts(normalize=True).sort_index()
    return {str(k): round(float(v), 4) for k, v in counts.items()}


def _no_verdict_html(title: str, reason: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif;margin:2em'><h1>{html.escape(title)}</h1>"
        f"<p><b>No verdict.</b> {html.escape(reason)}.</p></body></html>\n"
    )
