"""Prefect flow `monitoring`: new fund data -> validation -> drift -> relearning -> the same gate.

For each new file in `monitor.incoming_dir` (see monitoring/batches.py for the format):

1. load it as a table source and validate it with the project's GX suite; a batch that
   cannot be read or fails validation is quarantined with its report
   (`monitor.quarantine_dir/<date>/<batch>/`), never merged, and the flow goes on;
2. compare it with the training reference (`validate.out`) with Evidently: data drift on
   the fund features, document drift on the documents that came with it (text descriptors and
   the mix of kinds, against the documents the training reference read; monitoring/batches.py),
   and prediction drift on the champion's grade distribution and its
   rating migration (the same share classes graded on the reference and on the batch);
   reports land in `monitor.report_dir/<date>/<batch>/` (drift.html/.json, documents_drift.html/.json,
   prediction_drift.html/.json, summary.json), the figures in the MLflow experiment
   `monitor.experiment`; too few rows give no verdict (the report says so);
3. on drift (and `monitor.retrain`), accept the batch into the training data
   (`ingest.batches_dir`) and run the `training` flow as a subflow: DVC retrains on the
   reference plus the batch, backtests on the frozen expert test set, and the register
   stage moves `champion` only if the candidate wins by `register.gate.margin`. The
   candidate and the old champion are also scored on the batch's rated test-split funds;
   both results go to summary.json and MLflow.

4. count the analysts' decisions made since the newest model version was trained (the API's store); at
   `monitor.relearn_after_decisions` or more, and no batch relearned in this run, run the
   `training` flow: the `decisions` stage makes them labels, and the same gate decides.

The file is then moved to `monitor.processed_dir/<date>/`. A retrain that fails leaves
the champion as it was; the batch stays accepted for the next training run, and the
flow fails with the error after writing the summary.

    python -m flows.monitoring_flow          # one run, here
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed

from flows import common
from flows.training_flow import mlflow_check, training
from fundgrpo import io
from fundgrpo.cli import lean_exit
from fundgrpo.data import analyst_labels, documents, identity
from fundgrpo.data.ingestion import IngestError
from fundgrpo.data.reading import IngestReport
from fundgrpo.data.validation import validate_frame
from fundgrpo.evaluation.agreement import rule_predictions
from fundgrpo.methodology.compiler import Methodology, load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import Params, load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving import champion
from monitoring import batches, drift

# ---------------------------------------------------------------------- tasks


@task(name="load-batch", task_run_name="load {name}", cache_policy=NO_CACHE)
def load_batch(path: str, name: str, params: Params) -> tuple[pd.DataFrame, IngestReport]:
    table, report = batches.load(Path(path), params.ingest)
    get_run_logger().info("batch %s: %d rows, %d columns", name, len(table), len(table.columns))
    return table, report


@task(name="validate-batch", task_run_name="validate {name}", cache_policy=NO_CACHE)
def validate_batch(table: pd.DataFrame, name: str, params: Params, report_dir: str, notes: tuple[str, ...] = ()):
    return validate_frame(table, params.validate, Path(report_dir), notes)


@task(name="data-drift", task_run_name="data drift {name}", cache_policy=NO_CACHE)
def data_drift(reference: pd.DataFrame, table: pd.DataFrame, name: str, params: Params, out: str) -> drift.DataDrift:
    result = drift.data_drift(reference, table, params.monitor, Path(out))
    get_run_logger().info("batch %s, data drift: %s", name, result.reason)
    return result


@task(name="document-drift", task_run_name="document drift {name}", cache_policy=NO_CACHE)
def document_drift(
    reference: pd.DataFrame, posted: pd.DataFrame | None, name: str, params: Params, root: str, out: str
) -> drift.DocumentDrift:
    """The batch's documents against those the training reference read (as of its date)."""
    if posted is None:
        return drift.DocumentDrift(None, "no documents came with the batch")
    path = Path(root) / params.ingest.documents_out
    stored = pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=list(documents.COLUMNS))
    read = documents.readable(stored, documents.as_of(params.ingest.documents, reference))
    result = drift.document_drift(read, posted, params.monitor, Path(out))
    get_run_logger().info("batch %s, document drift: %s", name, result.reason)
    return result


@task(name="prediction-drift", task_run_name="prediction drift {name}", cache_policy=NO_CACHE)
def prediction_drift(
    reference: pd.DataFrame,
    table: pd.DataFrame,
    name: str,
    params: Params,
    root: str,
    uri: str,
    out: str,
    posted: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The champion's grades on samples of both frames (the batch's with its documents, `posted`); its
    drift, and its scores on the batch."""
    logger = get_run_logger()
    monitor = params.monitor
    methodology, schema = _schema(Path(root), params)
    estimator = champion.estimator_for(params, Path(root))
    batch_records = champion.sample(
        champion.prompt_records(
            table,
            methodology,
            params.prepare,
            estimator=estimator,
            reading=champion.stored_reading(params, methodology, table, Path(root), posted),
        ),  # fmt: skip
        monitor.prediction_sample,
        monitor.seed,
    )
    if monitor.prediction_sample <= 0:
        return {
            "drift": drift.PredictionDrift(None, "prediction drift off (monitor.prediction_sample is 0)"),
            "records": batch_records,
        }
    few = drift.too_few_rows(min(len(reference), monitor.prediction_sample), len(batch_records), monitor.min_rows)
    if few:  # no verdict possible: do not spend minutes generating
        return {"drift": drift.PredictionDrift(None, few), "records": batch_records}
    with tempfile.TemporaryDirectory() as tmp:
        loaded = champion.load_champion(uri, params.register.model_name, Path(tmp), methodology)
        if loaded is None:
            logger.info("no champion in the registry: prediction drift skipped")
            return {
                "drift": drift.PredictionDrift(None, "no champion in the registry: prediction drift skipped"),
                "records": batch_records,
            }
        folder, version = loaded
        # The same share classes on the reference where it has them (their grades then pair up for
        # the rating migration); a batch of mostly new share classes is compared by distribution only.
        known = set(reference["share_class_id"].astype(str))
        paired_ids = [r.share_class_id for r in batch_records if r.share_class_id in known]
        if len(paired_ids) >= monitor.min_rows:
            ref_records = champion.prompt_records(
                reference, methodology, params.prepare, paired_ids, estimator,
                champion.stored_reading(params, methodology, reference, Path(root)),
            )  # fmt: skip
        else:
            ref_records = champion.sample(
                champion.prompt_records(
                    reference,
                    methodology,
                    params.prepare,
                    estimator=estimator,
                    reading=champion.stored_reading(params, methodology, reference, Path(root)),
                ),  # fmt: skip
                monitor.prediction_sample,
                monitor.seed,
            )
        ref_preds = champion.grade(
            folder, ref_records, methodology, schema, params.generation, f"champion v{version} on reference"
        )
        batch_preds = champion.grade(
            folder, batch_records, methodology, schema, params.generation, f"champion v{version} on batch"
        )
    before = {r.share_class_id: p.grade for r, p in zip(ref_records, ref_preds)}
    pairs = [
        (before[r.share_class_id], p.grade) for r, p in zip(batch_records, batch_preds) if r.share_class_id in before
    ]
    result = drift.prediction_drift(
        [p.grade for p in ref_preds], [p.grade for p in batch_preds], monitor, Path(out), pairs
    )
    logger.info("batch %s, prediction drift (champion v%s): %s", name, version, result.reason)
    return {
        "drift": result,
        "records": batch_records,
        "champion_version": version,
        "champion_on_batch": champion.scored(batch_records, batch_preds, methodology),
    }


@task(name="candidate-on-batch", cache_policy=NO_CACHE)
def candidate_on_batch(records: list[PromptRecord], params: Params, root: str) -> dict[str, Any]:
    """The new candidate (models/policy) and the rule scorer on the batch's rated test-split funds."""

    methodology, schema = _schema(Path(root), params)
    rows = [r for r in records if r.labelled and r.split == "test" and not r.not_rated]
    if not rows:
        return {"n": 0, "note": "no rated test-split fund in the batch sample"}
    preds = champion.grade(
        Path(root) / params.grpo.out_dir, rows, methodology, schema, params.generation, "candidate on batch"
    )
    return {
        "candidate": champion.scored(rows, preds, methodology),
        "rule": champion.scored(rows, rule_predictions(rows), methodology),
    }


# -------------------------------------------------------------------- helpers


def _schema(root: Path, params: Params) -> tuple[Methodology, dict]:
    """(methodology, output schema) as the schema stage wrote them."""
    return load_compiled(root / params.methodology.out_dir)


def _reference(root: Path, params: Params) -> pd.DataFrame:
    path = root / params.validate.out
    if not path.exists():
        raise FileNotFoundError(f"no training reference at {path}: run the training flow (or dvc repro) first")
    return pd.read_parquet(path)


def _thresholds(params: Params) -> dict[str, Any]:
    m = params.monitor
    return {
        "min_rows": m.min_rows,
        "method": m.method,
        "threshold": m.threshold,
        "drift_share": m.drift_share,
        "prediction_method": m.prediction_method,
        "prediction_threshold": m.prediction_threshold,
        "migration_threshold": m.migration_threshold,
        "prediction_sample": m.prediction_sample,
        "gate_metric": params.register.gate.metric,
        "gate_margin": params.register.gate.margin,
    }


class MonitoringRun:
    """The batch's MLflow run in `monitor.experiment`, written through the client (tasks run in threads)."""

    def __init__(self, uri: str, params: Params, root: Path, name: str) -> None:
        from mlflow import MlflowClient

        register = replace(
            params.register,
            experiment=params.monitor.experiment,
            tracking_uri=uri,
            artifact_location=str(root / params.register.artifact_location),
        )
        experiment_id = mlflow_registry.setup(register)
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id = self.client.create_run(
            experiment_id, run_name=f"monitor {name}", tags={"batch": name}
        ).info.run_id

    def log(
        self,
        metrics: dict[str, float | None] | None = None,  # None: not measured, not logged
        params: dict[str, Any] | None = None,
        tags: dict[str, Any] | None = None,
    ) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(datetime.now(timezone.utc).timestamp() * 1000)
        self.client.log_batch(
            self.run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None],
            params=[Param(k, str(v)) for k, v in (params or {}).items()],
            tags=[RunTag(k, str(v)[:5000]) for k, v in (tags or {}).items()],
        )

    def finish(self, report_dir: Path, ok: bool) -> None:
        self.client.log_artifacts(self.run_id, str(report_dir), "report")
        self.client.set_terminated(self.run_id, "FINISHED" if ok else "FAILED")


def _drift_figures(
    data: drift.DataDrift, pred: drift.PredictionDrift, docs: drift.DocumentDrift
) -> dict[str, float | None]:
    figures: dict[str, float | None] = {
        "documents_drift.share": docs.share,
        "documents_drift.detected": None if docs.verdict is None else float(docs.verdict),
        "drift.share": data.share,
        "drift.columns_drifted": float(len(data.drifted)) if data.verdict is not None else None,
        "drift.dataset": None if data.verdict is None else float(data.verdict),
        "prediction_drift.score": pred.score,
        "prediction_drift.migration": pred.migration,
        "prediction_drift.detected": None if pred.verdict is None else float(pred.verdict),
    }
    figures.update({f"drift.score.{c}": v for c, v in data.scores.items()})
    return figures


# ----------------------------------------------------------------------- flow


def handle_batch(
    root: Path, params: Params, path: Path, uri: str, retrain: bool, retries: int, retry_delay_s: float, day: str
) -> dict[str, Any]:
    """One batch from the watched folder to its verdict (and relearning); returns its summary."""

    logger = get_run_logger()
    name = batches.name_of(path)
    out = root / params.monitor.report_dir / day / name
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"batch": name, "file": path.name, "date": day, "thresholds": _thresholds(params)}

    def quarantined(reason: str, report: Path | None) -> dict[str, Any]:
        dest = batches.quarantine(path, report, reason, params.monitor, root, day)
        logger.error("batch %s QUARANTINED (not merged) in %s: %s", name, dest, reason)
        summary.update(verdict="quarantined", reason=reason, quarantine=str(dest.relative_to(root)))
        io.write_json(summary, out / "summary.json")
        return summary

    try:
        table, read = load_batch(str(path), name, params)
    except IngestError as err:
        return quarantined(f"cannot be read: {err}", None)
    checked = validate_batch(table, name, params, str(out / "validation"), read.notes)
    if not checked.success:
        return quarantined(
            f"failed validation ({len(checked.failures)} expectation(s)): " + "; ".join(checked.failures),
            out / "validation",
        )
    try:  # the documents that came with it, checked as ingest checks them, dated no later than its data
        posted = batches.load_documents(path, table, params.ingest.documents)
        if posted is not None:
            champion.check_posted_dates(posted, documents.as_of(params.ingest.documents, table))
    except IngestError as err:
        return quarantined(f"its documents cannot be read: {err}", None)
    summary["rows"] = len(table)
    summary["as_of"] = str(table["as_of"].iloc[0]) if "as_of" in table and len(table) else None

    reference = _reference(root, params)
    clash = identity.conflicts(table, reference, f"batch {name}")
    if clash:  # merged, its rows would replace other funds of the universe
        return quarantined(clash, None)
    try:
        data = data_drift(reference, table, name, params, str(out))
    except drift.DriftError as err:  # e.g. no fund feature in common: bad input, not a verdict
        return quarantined(f"cannot be compared with the reference: {err}", out / "validation")
    docs = document_drift(reference, posted, name, params, str(root), str(out))
    predicted = prediction_drift(reference, table, name, params, str(root), uri, str(out), posted)
    pred: drift.PredictionDrift = predicted["drift"]
    drifted = bool(data.verdict) or bool(pred.verdict) or bool(docs.verdict)
    if data.verdict is None and pred.verdict is None and docs.verdict is None:
        verdict = "no verdict"
    else:
        verdict = "drift" if drifted else "no drift"
    reason = "; ".join([data.reason] + [r.reason for r in (pred, docs) if r.verdict])
    summary.update(
        verdict=verdict,
        reason=reason,
        data_drift=asdict(data),
        prediction_drift=asdict(pred),
        documents_drift=asdict(docs),
        champion_version=predicted.get("champion_version"),
        champion_on_batch=predicted.get("champion_on_batch"),
    )
    io.write_json(summary, out / "summary.json")

    run = MonitoringRun(uri, params, root, name)
    run.log(
        _drift_figures(data, pred, docs),
        params={f"monitor.{k}": v for k, v in summary["thresholds"].items()} | {"rows": len(table)},
        tags={"verdict": verdict, "reason": reason, "prediction_drift.reason": pred.reason},
    )
    logger.info("batch %s: %s (%s; %s)", name, verdict.upper(), data.reason, pred.reason)

    ok = True
    try:
        if drifted and retrain:
            summary["retrain"] = relearn(root, params, name, table, predicted, retries, retry_delay_s, run)
        elif drifted:  # report only, but keep the data: the next training run (scheduled or by hand) learns from it
            with common.workspace_lock(root, -1, logger.info):
                stored = batches.accept(table, name, root / params.ingest.batches_dir)
            summary["retrain"] = {
                "status": "skipped",
                "accepted": str(stored.relative_to(root)),
                "reason": "drift found but retraining is off (monitor.retrain / retrain=False): the batch is "
                "accepted into the training data for the next training run",
            }
        else:
            summary["retrain"] = {"status": "not needed", "reason": f"{verdict}: the batch is archived, not merged"}
    except Exception as err:
        ok = False
        summary["retrain"] = {
            "status": "failed",
            "error": str(err),
            "note": "the champion is unchanged; the batch stays accepted for the next training run",
        }
        raise
    finally:
        summary["processed"] = str(batches.archive(path, params.monitor, root, day).relative_to(root))
        io.write_json(summary, out / "summary.json")
        run.log(tags={"retrain": summary["retrain"]["status"]})
        run.finish(out, ok)
        common.markdown_artifact("drift-verdict", verdict_table(summary), reason[:500], logger.warning)
    return summary


def verdict_table(summary: dict[str, Any]) -> str:
    """One batch's verdict as markdown: data drift, prediction drift, what was done, the gate's decision.

    >>> print(verdict_table({"batch": "b", "verdict": "no drift", "reason": "calm",
    ...       "data_drift": {"share": 0.1}, "prediction_drift": {"migration": 0.2},
    ...       "retrain": {"status": "not needed", "reason": "archived"}}))
    ### b: no drift
    <BLANKLINE>
    | check | figure | verdict |
    |---|---|---|
    | feature drift share | 0.1 | calm |
    | champion's rating migration | 0.2 |  |
    | retrain | not needed | archived |
    """
    d, p, r = summary.get("data_drift") or {}, summary.get("prediction_drift") or {}, summary.get("retrain") or {}
    out = [f"### {summary['batch']}: {summary['verdict']}", "", "| check | figure | verdict |", "|---|---|---|"]
    out.append(f"| feature drift share | {d.get('share')} | {summary.get('reason', '')} |")
    out.append(f"| champion's rating migration | {p.get('migration')} | {p.get('reason', '')} |")
    out.append(f"| retrain | {r.get('status')} | {r.get('message') or r.get('reason') or ''} |")
    decision = r.get("decision")
    if decision:
        verdict = "promoted" if decision["promoted"] else "refused"
        out.append(f"| gate | v{decision['version']} {verdict} | {decision['reason']} |")
    return "\n".join(out)


def relearn(
    root: Path,
    params: Params,
    name: str,
    table: pd.DataFrame,
    predicted: dict,
    retries: int,
    retry_delay_s: float,
    run: MonitoringRun,
) -> dict[str, Any]:
    """Accept the batch, run the training flow, score the candidate on the batch; the gate's decision."""
    logger = get_run_logger()
    with common.workspace_lock(root, -1, logger.info):  # never write a dependency under a running training
        stored = batches.accept(table, name, root / params.ingest.batches_dir)
    logger.info("batch %s accepted into the training data: %s; retraining", name, stored.relative_to(root))
    result = training(root=str(root), retries=retries, retry_delay_s=retry_delay_s)
    decision = result["decision"] if result["registered"] else None
    outcome: dict[str, Any] = {
        "status": "done",
        "accepted": str(stored.relative_to(root)),
        "message": result["message"],
        "decision": decision,
    }
    if decision is not None:
        backtest = json.loads((root / params.backtest.metrics).read_text(encoding="utf-8"))
        outcome["on_test_set"] = {
            "n_funds": backtest.get("n_funds"),
            **{m: backtest["models"][m] for m in ("grpo", "rule") if m in backtest["models"]},
        }
        outcome["on_batch"] = candidate_on_batch(predicted["records"], params, str(root))
        outcome["on_batch"]["champion"] = predicted.get("champion_on_batch")
        candidate = (outcome["on_batch"].get("candidate") or {}).get(params.register.gate.metric)
        run.log(
            metrics={
                "gate.promoted": float(decision["promoted"]),
                "gate.candidate": decision["candidate"],
                "gate.baseline": decision["baseline"],
                f"batch.candidate.{params.register.gate.metric}": candidate,
            },
            tags={
                "gate.reason": decision["reason"],
                "gate.version": decision["version"],
                "gate.alias": decision["alias"],
            },
        )
    logger.info("batch %s: %s", name, result["message"])
    return outcome


def last_trained(uri: str, params: Params) -> tuple[str, datetime] | None:
    """(version, when it was registered) of the newest registered version, champion or not; None
    when there is none. Decisions are counted from there: a version the gate refused was still
    trained on the decisions before it, and retraining on the same ones would only repeat it."""
    from mlflow import MlflowClient

    versions = MlflowClient(tracking_uri=uri).search_model_versions(f"name = '{params.register.model_name}'")
    if not versions:
        return None
    newest = max(versions, key=lambda v: int(v.version))
    return str(newest.version), datetime.fromtimestamp(newest.creation_timestamp / 1000, tz=timezone.utc)


@task(name="analysts-decisions", cache_policy=NO_CACHE)
def decisions_check(root: Path, params: Params, uri: str) -> dict[str, Any]:
    """How many decisions analysts made since the newest model version was trained, against the setting."""
    threshold = params.monitor.relearn_after_decisions
    found = last_trained(uri, params) if threshold else None
    if threshold == 0 or found is None:
        why = "monitor.relearn_after_decisions is 0" if threshold == 0 else "no model version in the registry"
        return {"count": None, "threshold": threshold, "due": False, "reason": f"decisions not counted: {why}"}
    version, when = found
    count = analyst_labels.decisions_since(analyst_labels.store_url(params.decisions.store_url, root), when)
    due = count >= threshold
    reason = f"{count} analyst decision(s) since v{version} was trained (relearn at {threshold})"
    get_run_logger().info(reason)
    return {"count": count, "threshold": threshold, "due": due, "reason": reason, "since_version": version}


@flow(name="monitoring")
def monitoring(
    root: str = ".", retrain: bool | None = None, retries: int = 2, retry_delay_s: float = 30.0
) -> list[dict]:
    """Handle every new batch in the watched folder, then the analysts' decisions; returns one summary
    per batch, and one for the decisions when enough of them made the flow relearn."""
    logger = get_run_logger()
    workspace = Path(root).resolve()
    params = load_params(workspace / "params.yaml")
    files = batches.incoming(params.monitor, workspace)
    uri = common.tracking_uri(params.register, workspace)
    relearn_on = params.monitor.retrain if retrain is None else retrain
    results = []
    if files:
        mlflow_check.with_options(retries=retries, retry_delay_seconds=retry_delay_s)(uri)
        day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        results = [
            handle_batch(workspace, params, path, uri, relearn_on, retries, retry_delay_s, day) for path in files
        ]
    else:
        logger.info("no new batch in %s", workspace / params.monitor.incoming_dir)
    counted = decisions_check(workspace, params, uri)
    if not counted["due"]:
        return finished(results, counted)
    if any(r.get("retrain", {}).get("status") == "done" for r in results):
        logger.info("%s; the training run above already took them as labels", counted["reason"])
        return finished(results, counted)
    summary: dict[str, Any] = {"batch": None, "kind": "decisions", "verdict": "decisions", "reason": counted["reason"]}
    if not relearn_on:
        summary["retrain"] = {"status": "skipped", "reason": f"{counted['reason']}, but retraining is off"}
        return finished([*results, summary], counted)
    result = training(root=str(workspace), retries=retries, retry_delay_s=retry_delay_s)
    summary["retrain"] = {
        "status": "done",
        "message": result["message"],
        "decision": result["decision"] if result["registered"] else None,
    }
    logger.info("analysts' decisions: %s", result["message"])
    return finished([*results, summary], counted)


def finished(results: list[dict], counted: dict) -> Completed:
    """The run's final state: its message says what each batch came to and what the decisions did.

    >>> finished([{"batch": "b", "verdict": "drift", "retrain": {"status": "done", "message": "v2 promoted"}}],
    ...          {"reason": "0 decisions"}).message
    'b: drift, retrain done (v2 promoted); 0 decisions'
    """
    parts = []
    for r in results:
        retrain = r.get("retrain") or {}
        what = r["batch"] or "analysts' decisions"
        told = f" ({retrain['message']})" if retrain.get("message") else ""
        parts.append(f"{what}: {r['verdict']}" + (f", retrain {retrain['status']}{told}" if retrain else ""))
    parts.append(counted["reason"])
    return Completed(message="; ".join(parts)[:1000], data=results)


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.monitoring_flow [--root .] [--no-retrain]`: one run (`--help` says so and runs nothing)."""
    ap = argparse.ArgumentParser(
        prog="python -m flows.monitoring_flow",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--root", default=".", help="the workspace (default: here)")
    ap.add_argument("--no-retrain", action="store_true", help="measure drift only, whatever monitor.retrain says")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    lean_exit()
    results = monitoring(root=args.root, retrain=False if args.no_retrain else None)
    for s in results:
        what = s["batch"] or "analysts' decisions"
        print(f"{what}: {s['verdict']}: {s.get('retrain', {}).get('message') or s['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
