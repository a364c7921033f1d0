"""Batch scoring: a fund file and a model -> one evaluation per share class.

    python -m fundgrpo.serving.batch FUNDS [--documents PATH] [--model URI_OR_FOLDER] [--out evaluations.parquet]

FUNDS is canonical Parquet (what `ingest` writes) or any export the `ingest` settings in
params.yaml read (the same column map, markers and ids); a mapped metric the file lacks (an export
without 10-year returns) is scored as missing for every fund, as a fund without that history is
in training, and named in a warning and in each row's `missing_criteria`. The model is
`models:/fund-evaluator@champion` by default (the registry of `register.tracking_uri`), or a
local folder such as `models/policy`. Peer context comes from the reference universe the model
was trained with (`validate.out`, the validated table), so even a single fund is placed among
its peers as in training. Beside the model's grade, score, reasoning and valid flag (an invalid
answer has no grade, and `reason` says why), each row carries its grade probabilities (`p_<grade>`),
expected grade and confidence (the calibrate stage's fit for the policy folder or a registered
version), `needs_analyst` and `review` (why an analyst should look: the review queue's rule,
fundgrpo/serving/review.py), `flags` (no peers
in the category, criteria without data, misstated criteria), the methodology's rule grade and the
gradient-boosting grade and confidence (the `evidence` stage's training-split model).
`grade_note` says in words why a grade is served that its own probabilities do not put first
(fundgrpo/serving/explain.py); `as_of` is the date the fund's data cover (when the file says) and
`evaluated_at` when this run scored it. When the file carries expert grades,
the same agreement metrics as the backtest, over the share classes no model learnt from
(`seen_in_training` false), are printed and written next to the output (`<out>.metrics.json`).
Under a methodology with qualitative criteria, each fund's documents are those `ingest` stored and
those of `--documents` (a folder or file in ingest's documents format, keyed by the file's share
classes, funds or companies; checked the same way); `pillars` holds each criterion's judgement with
its citations, or "not assessed" and why (a fund without documents is never judged).
Output: .parquet, .csv or .jsonl, by the extension of `--out`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fundgrpo import io
from fundgrpo.cli import lean_exit, offline
from fundgrpo.data import documents, identity, ingestion
from fundgrpo.data.canonical import BY_NAME
from fundgrpo.data.columns import to_canonical
from fundgrpo.data.reading import IngestReport, read_source
from fundgrpo.evaluation.agreement import filled, grade_metrics
from fundgrpo.evaluation.statistical import load_estimator
from fundgrpo.methodology.compiler import Methodology, load_compiled
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import Params, load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving import evaluation
from fundgrpo.serving.champion import calibration_of, grade, prompt_records, stored_reading

CHAMPION = "models:/{name}@champion"
OUTPUT_COLUMNS = (
    "share_class_id",
    "fund_id",
    "name",
    "category",
    "grade",
    "grade_note",
    "serves",  # whose probabilities the grade comes from (lm, gbm, stack: calibrate's choice on validation)
    "lm_weight",  # the language model's share of that belief (0: the grade is gradient boosting's)
    "written_grade",  # the grade the language model wrote in its evaluation
    "score",
    "reasoning",
    "valid",
    "rated",  # false: the methodology does not rate the fund (too little data); `reason` says what it lacks
    "reason",
    "confidence",
    "expected_grade",
    "needs_analyst",
    "review",
    "flags",
    "rule_grade",
    "rule_score",
    "missing_criteria",
    "peers",
    "unsupported",
    "pillars",  # JSON: per qualitative criterion, the judgement with its citations or "not assessed" and why
    "gbm_grade",
    "gbm_confidence",
    "expert_grade",
    "seen_in_training",
    "model",
    "as_of",
    "evaluated_at",
)


class EvaluateError(ValueError):
    """The funds, the model or the output cannot be used; the message says which and why."""


# Canonical kinds whose mapped source column a file of new funds may lack: scored as missing.
MAY_BE_ABSENT = ("number", "grade")


def read_funds(path: Path, params: Params) -> tuple[pd.DataFrame, IngestReport]:
    """Canonical Parquet as it is; anything else through the ingest settings (`fundgrpo.data.columns.to_canonical`).
    With the report of what reading and the settings did (`IngestReport`).

    A metric (or the expert grade) that `ingest.column_map` maps to a column the file lacks is
    not an error here: its canonical column is left empty (NaN), so the criteria it feeds are
    scored as missing, as for a fund without that history in training. The report's `absent`
    names them (canonical name -> source column).
    """

    if path.suffix.lower() in (".parquet", ".pq"):
        table = pd.read_parquet(path)
        missing = [c for c in ("share_class_id", "category") if c not in table]
        if not missing:
            table = table.assign(fund_id=table["fund_id"] if "fund_id" in table else table["share_class_id"])
            return table, IngestReport(source=str(path), encoding="parquet")
    settings = replace(params.ingest, source="table", path=str(path.resolve()), batches_dir="")
    raw, report = read_source(path, settings.encoding, settings.delimiter)
    if params.ingest.source != "table" or path.resolve() != Path(params.ingest.path).resolve():
        identity.positional_ids(params.ingest, str(path), raw.columns)  # ids by row only in the training file
    absent = {
        name: source
        for name, source in settings.column_map.items()
        if source not in raw.columns and name in BY_NAME and BY_NAME[name].kind in MAY_BE_ABSENT
    }
    if absent:
        settings = replace(
            settings,
            column_map={k: v for k, v in settings.column_map.items() if k not in absent},
            scale={k: v for k, v in settings.scale.items() if k not in absent},
        )
    table, report = to_canonical(raw, settings, str(path), report)
    for name in absent:
        if name not in table:  # a same-named column in the file was taken instead
            table[name] = pd.array([pd.NA] * len(table), dtype="Int64") if name == "expert_grade" else np.nan
    return ingestion.derive(table), replace(report, absent=absent)


def absent_warning(funds: pd.DataFrame, report: IngestReport, methodology: Methodology) -> str | None:
    """One line naming the mapped columns the fund file lacks and the criteria scored as missing.

    >>> funds = pd.DataFrame({"mrar_10y": [np.nan]})
    >>> report = IngestReport(source="f.csv", absent={"return_10y": "GBRReturnM120"})
    >>> from fundgrpo.methodology.compiler import parse
    >>> methodology = parse({"criteria": [{"metric": "mrar_10y", "weight": 1}],
    ...                      "grades": [{"grade": 1, "min": 0, "max": 50}, {"grade": 2, "min": 50, "max": 100}]})
    >>> print(absent_warning(funds, report, methodology))
    ... # doctest: +NORMALIZE_WHITESPACE
    f.csv has no column 'GBRReturnM120' (ingest.column_map.return_10y): return_10y is missing for every fund,
    and criteria mrar_10y are scored as missing (see missing_criteria)
    """
    absent = report.absent
    if not absent:
        return None
    columns = ", ".join(f"{source!r} (ingest.column_map.{name})" for name, source in absent.items())
    empty = [c.metric for c in methodology.criteria if c.metric not in funds or funds[c.metric].isna().all()]
    return (
        f"{report.source or 'the fund file'} has no column {columns}: {', '.join(absent)} is missing for "
        f"every fund, and criteria {', '.join(empty) or '(none)'} are scored as missing (see missing_criteria)"
    )


def missing_criteria(funds: pd.DataFrame, methodology: Methodology) -> list[str]:
    """Per fund, the criterion metrics it lacks (left out of the rule score, as in training), comma-separated.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> missing_criteria(pd.DataFrame({"sharpe_3y": [1.0, np.nan]}), example_methodology())
    ['ongoing_cost', 'sharpe_3y, ongoing_cost']
    """
    metrics = [c.metric for c in methodology.criteria]
    present = {m: funds[m].notna().to_numpy() if m in funds else np.zeros(len(funds), dtype=bool) for m in metrics}
    return [", ".join(m for m in metrics if not present[m][i]) for i in range(len(funds))]


def repeated_ids(funds: pd.DataFrame, report: IngestReport = IngestReport()) -> str | None:
    """Which share_class_ids repeat and where (1-based data rows of the fund file), with the fix.

    >>> funds = pd.DataFrame({"share_class_id": ["a", "b", "a"], "category": ["x", "y", "x"]})
    >>> print(repeated_ids(funds))  # doctest: +NORMALIZE_WHITESPACE
    the fund file: share_class_id repeats: 'a' (data rows 1, 3; counted from 1 after the header); data row(s) 3
    repeat an earlier row in every column: set ingest.drop_duplicate_rows: true (params.yaml) to drop exact
    duplicate rows, or remove them
    """
    ids = funds["share_class_id"].astype(str).reset_index(drop=True)
    repeated = ids[ids.duplicated(keep=False)]
    if repeated.empty:
        return None
    groups = list(repeated.groupby(repeated, sort=False).indices.items())
    listed = "; ".join(
        f"{key!r} (data rows {', '.join(str(repeated.index[i] + 1) for i in positions[:5])}"
        + ("; counted from 1 after the header)" if n == 0 else ")")
        for n, (key, positions) in enumerate(groups[:3])
    )
    dropped = (report.duplicates_dropped or {}).get("rows")
    counted = f" (counted after {dropped} exact duplicate row(s) were dropped)" if dropped else ""
    try:
        exact = np.flatnonzero(funds.reset_index(drop=True).duplicated(keep="first").to_numpy())
    except TypeError:
        exact = np.array([], dtype=int)
    fix = (
        f"; data row(s) {', '.join(str(i + 1) for i in exact[:5])} repeat an earlier row in every column: set "
        "ingest.drop_duplicate_rows: true (params.yaml) to drop exact duplicate rows, or remove them"
        if len(exact)
        else "; give each share class its own id (or build one: ingest.share_class_id_from)"
    )
    return f"{report.source or 'the fund file'}: share_class_id repeats: {listed}{counted}{fix}"


def with_reference(funds: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """The reference universe with the new rows laid over it (a share class in both: the new row).

    >>> ref = pd.DataFrame({"share_class_id": ["a", "b"], "category": ["x", "x"], "v": [1, 2]})
    >>> new = pd.DataFrame({"share_class_id": ["b", "c"], "category": ["x", "y"], "v": [9, 3]})
    >>> with_reference(new, ref)["v"].tolist()
    [1, 9, 3]
    """
    kept = reference[~reference["share_class_id"].astype(str).isin(funds["share_class_id"].astype(str))]
    return pd.concat([kept, funds], ignore_index=True)


def training_mask(reference: pd.DataFrame, params: Params) -> pd.Series:
    """Reference rows the models learnt from: labelled, in prepare's train split."""

    in_train = reference["fund_id"].astype(str).map(lambda f: split_of(f, params.prepare) == "train")
    return (reference["expert_grade"].notna() & in_train).astype(bool)


def resolve_model(
    model: str, params: Params, scratch: Path, methodology: Methodology | None = None
) -> tuple[Path, str]:
    """(local folder, a name for the output's `model` column) for a folder or a models:/ URI; a
    registered version trained on another methodology than `methodology` (the compiled one) is refused,
    the champion falling back to the newest promoted version trained on it (`served_version`)."""
    if not model.startswith("models:/"):
        folder = Path(model)
        if not folder.is_dir():
            raise EvaluateError(f"--model {model}: no such folder (or give a models:/NAME@ALIAS URI)")
        return folder, str(folder)
    import mlflow
    from mlflow import MlflowClient

    uri = mlflow_registry.local_uri(mlflow_registry.tracking_uri(params.register), Path("."))
    mlflow.set_tracking_uri(uri)  # download_artifacts resolves models:/ through the global URI
    name, _, alias = model[len("models:/") :].partition("@")
    client = MlflowClient(tracking_uri=uri)
    try:  # `champion`: a version the gate promoted (served_version says which, and why)
        version, note = (
            mlflow_registry.served_version(client, name, alias, compiled_now=methodology) if alias else (None, None)
        )
    except mlflow_registry.AliasError as err:
        raise EvaluateError(f"--model: {err} (registry: {uri})") from err
    if note:
        print(f"evaluate: warning: {note}", file=sys.stderr)
    pinned = f"models:/{name}/{version}" if version else model
    return mlflow_registry.load_components(pinned, scratch), pinned


def evaluate(
    funds: pd.DataFrame,
    reference: pd.DataFrame,
    folder: Path,
    methodology: Methodology,
    schema: dict,
    params: Params,
    model_name: str,
    report: IngestReport = IngestReport(),
    posted: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One evaluation per share class of `funds` (see the module docstring); `report`: what reading
    the fund file did (`read_funds`), for the messages; `posted`: documents given with the file."""

    if funds.empty:
        raise EvaluateError("the fund file has no rows")
    repeated = repeated_ids(funds, report)
    if repeated:
        raise EvaluateError(repeated)
    clash = identity.conflicts(funds, reference, report.source or "the fund file")
    if clash:
        raise EvaluateError(clash)
    new_ids = funds["share_class_id"].astype(str).tolist()
    universe = with_reference(funds, reference)
    estimator = load_estimator(Path(params.evidence.out_dir))
    reading = stored_reading(params, methodology, universe, posted=posted, only=new_ids)
    records = prompt_records(universe, methodology, params.prepare, new_ids, estimator, reading)
    by_id = {r.share_class_id: r for r in records}
    mine = [by_id[i] for i in new_ids]
    rule = calibration_of(folder, params)
    predictions = grade(folder, mine, methodology, schema, generation=params.generation, desc="evaluate", rule=rule)
    lacking = missing_criteria(funds, methodology)
    seen = set(
        reference.loc[training_mask(reference.reset_index(drop=True), params).to_numpy(), "share_class_id"].astype(str)
    )
    grades = methodology.grades
    known = set(reference["share_class_id"].astype(str))  # a share class outside it is new to the universe
    rows = []
    evaluated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")  # one run, one time
    for (_, fund), record, p, lacks in zip(funds.iterrows(), mine, predictions, lacking):
        e = evaluation.build(
            record, p, rule, methodology, name=fund.get("name"), lacking=lacks, rule=params.evaluate, known=known
        )
        expert = fund.get("expert_grade")
        rows.append(
            evaluation.as_row(
                e,
                grades,
                expert_grade=None if pd.isna(expert) else int(expert),
                seen_in_training=record.share_class_id in seen,
                model=model_name,
                as_of=None if pd.isna(fund.get("as_of")) else str(fund.get("as_of")),  # the data's date
                evaluated_at=evaluated_at,
            )
        )
    columns = list(OUTPUT_COLUMNS) + [f"p_{g}" for g in grades]
    whole = {c: "Int64" for c in ("expert_grade", "grade", "written_grade", "rule_grade", "gbm_grade")}  # 3, never 3.0
    return pd.DataFrame(rows, columns=columns).astype(whole)


def agreement(evaluations: pd.DataFrame, grades: list[int]) -> dict | None:
    """The backtest's metrics for the model, the rule scorer and gradient boosting on the rows
    with an expert grade that no model learnt from, or None when there are none. Funds the
    methodology does not rate are counted apart (`not_rated`), as in the backtest."""

    unseen = evaluations[evaluations["expert_grade"].notna() & ~evaluations["seen_in_training"].astype(bool)]
    labelled = unseen[unseen["rated"].astype(bool)]
    if labelled.empty:
        return None
    expert = labelled["expert_grade"].astype(int).tolist()
    out: dict[str, Any] = {
        "n": len(labelled),
        "not_rated": len(unseen) - len(labelled),
        "model_valid_json": round(float(labelled["valid"].mean()), 4),
    }
    for name, column in (("model", "grade"), ("rule", "rule_grade"), ("gbm", "gbm_grade")):
        predicted = [None if pd.isna(g) else int(g) for g in labelled[column]]  # an invalid answer: a miss
        found = grade_metrics(expert, filled(expert, predicted, grades).tolist(), grades)
        out[name] = {k: round(v, 4) for k, v in found.items()}
    return out


def write(evaluations: pd.DataFrame, out: Path) -> None:

    suffix = out.suffix.lower()
    if suffix in (".parquet", ".pq"):
        io.write_parquet(evaluations, out)
    elif suffix == ".csv":
        out.parent.mkdir(parents=True, exist_ok=True)
        evaluations.to_csv(out, index=False, encoding="utf-8")
    elif suffix == ".jsonl":
        io.write_jsonl(json.loads(evaluations.to_json(orient="records", force_ascii=False)), out)
    else:
        raise EvaluateError(f"--out {out}: use .parquet, .csv or .jsonl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fundgrpo.serving.batch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("funds", type=Path, help="canonical Parquet, or an export the ingest settings read")
    parser.add_argument("--model", default=None, help="models:/NAME@ALIAS or a folder (default: the champion)")
    parser.add_argument("--out", type=Path, default=None, help="default: <evaluate.out_dir>/evaluations.parquet")
    parser.add_argument("--reference", type=Path, default=None, help="the reference universe (default: validate.out)")
    parser.add_argument(
        "--documents", type=Path, default=None, help="documents of these funds, in ingest's format (folder or file)"
    )
    args = parser.parse_args(argv)
    offline()
    lean_exit()
    try:  # a setting out of range is one line naming it, as the stages say it
        params = load_params()
    except ValueError as err:
        print(f"evaluate failed: {err}", file=sys.stderr)
        return 1
    args.out = args.out or Path(params.evaluate.out_dir) / "evaluations.parquet"
    try:
        if args.out.suffix.lower() not in (".parquet", ".pq", ".csv", ".jsonl"):
            raise EvaluateError(f"--out {args.out}: use .parquet, .csv or .jsonl")
        reference_path = args.reference or Path(params.validate.out)
        if not reference_path.exists():
            raise EvaluateError(
                f"{reference_path}: no reference universe; run `dvc repro validate` (or pass --reference)"
            )
        funds, report = read_funds(args.funds, params)
        methodology, schema = load_compiled(Path(params.methodology.out_dir))
        posted = None
        if args.documents is not None:
            if not methodology.qualitative:
                raise EvaluateError(f"--documents {args.documents}: the methodology judges nothing from documents")
            if not args.documents.exists():
                raise EvaluateError(f"--documents {args.documents}: not found")
            posted = documents.read(replace(params.ingest.documents, path=str(args.documents), judgements=""), funds)
        warning = absent_warning(funds, report, methodology)
        if warning:
            print(f"evaluate: warning: {warning}", file=sys.stderr)
        with tempfile.TemporaryDirectory() as scratch:
            folder, name = resolve_model(
                args.model or CHAMPION.format(name=params.register.model_name), params, Path(scratch), methodology
            )
            evaluations = evaluate(
                funds,
                pd.read_parquet(reference_path),
                folder,
                methodology,
                schema=schema,
                params=params,
                model_name=name,
                report=report,
                posted=posted,
            )
        write(evaluations, args.out)
    except (EvaluateError, FileNotFoundError) as err:
        print(f"evaluate failed: {err}", file=sys.stderr)
        return 1
    except ValueError as err:  # IngestError and the like: the message names the problem
        print(f"evaluate failed: {err}", file=sys.stderr)
        return 1
    metrics = agreement(evaluations, methodology.grades)
    valid = int(evaluations["valid"].sum())
    print(f"evaluate: {len(evaluations)} share classes, {valid} valid answers, model {name} -> {args.out}")
    if metrics:
        args.out.with_name(args.out.name + ".metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        for who in ("model", "rule", "gbm"):
            print(
                f"  vs {metrics['n']} expert grades, {who}: " + ", ".join(f"{k}={v}" for k, v in metrics[who].items())
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
