"""Registration: log a candidate run to MLflow, register its model, and move the alias through the gate.

Tracking store: `register.tracking_uri` (sqlite + local artifacts by default), or
MLFLOW_TRACKING_URI from the environment (a server with a database). The model is
registered only after everything else is logged, so a failure leaves nothing
half-registered; the `champion` alias moves only when the gate says so.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path

from fundgrpo.cli import StageError
from fundgrpo.evaluation import contest
from fundgrpo.evaluation.calibration import CalibrationFit
from fundgrpo.evaluation.story import served_words
from fundgrpo.methodology.compiler import Methodology, fingerprint
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import modelling
from fundgrpo.model.inference import evaluate_model
from fundgrpo.params import Params, to_dict
from fundgrpo.registry import mlflow_registry


def log_model(policy_dir: Path, max_new_tokens: int, calibration: CalibrationFit | None = None):
    """Log the Hugging Face model with MLflow's transformers flavour; returns ModelInfo.

    Components are passed as objects (MLflow 3.17 cannot log a transformers 5 checkpoint
    by path) and requirements are pinned here (MLflow's inference wants torchvision). The
    calibrate stage's fit travels in the model's metadata (`calibration`), so whoever serves a
    version reads its confidence as the backtest did.
    """
    import mlflow

    model, tokenizer = modelling.load(policy_dir)
    # Offline, MLflow's transformers flavour warns that it cannot fetch a model card and licence from the
    # hub for every model it logs; the model card that matters is the registry's gate record.
    quiet = logging.getLogger("mlflow.transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return mlflow.transformers.log_model(
            transformers_model={"model": model, "tokenizer": tokenizer},
            name="model",
            task="text-generation",
            model_config={"max_new_tokens": max_new_tokens},
            pip_requirements=[f"{p}=={version(p)}" for p in ("torch", "transformers", "accelerate")],
            metadata={"calibration": serving_fit(calibration)} if calibration else None,
        )
    finally:
        quiet.setLevel(level)


def serving_fit(fit: CalibrationFit) -> dict:
    """What serving needs of the calibrate stage's record: its decision rule (the validation figures stay
    in the run's artifacts).

    >>> from fundgrpo.evaluation.calibration import DecisionRule
    >>> serving_fit(CalibrationFit(DecisionRule(cutpoints=(1.5,)), options={"lm/score/expected": {}}))["cutpoints"]
    [1.5]
    """
    return fit.rule.as_dict()


def dvc_experiment() -> dict[str, str]:
    """MLflow tags naming the DVC experiment this run belongs to (empty outside `dvc exp run`).

    DVC sets DVC_EXP_NAME and DVC_EXP_BASELINE_REV for every stage of an experiment,
    queued or in the workspace; the name also becomes the MLflow run name.
    """
    tags = {"dvc.exp_name": os.environ.get("DVC_EXP_NAME"), "dvc.baseline_rev": os.environ.get("DVC_EXP_BASELINE_REV")}
    return {k: v for k, v in tags.items() if v}


def champion_baseline(
    client, params: Params, backtest: dict, rows: list[PromptRecord], methodology: Methodology, schema: dict
):
    """(metrics, name) of the current champion on this backtest, or None when there is none.

    If the champion was measured on another test set, it is re-evaluated on this one.
    """
    version = mlflow_registry.champion_version(client, params.register.model_name)
    if version is None:
        return None
    try:  # the champion serving would use: a version moved there by hand is not the bar to beat
        number, _ = mlflow_registry.served_version(client, params.register.model_name, mlflow_registry.CHAMPION)
    except mlflow_registry.AliasError:
        return None
    version = client.get_model_version(params.register.model_name, number)
    name = f"champion v{version.version}"
    if version.tags.get("test_fingerprint") == backtest["test_fingerprint"]:
        run = client.get_run(version.run_id)
        prefix = "backtest.grpo."
        found = {k[len(prefix) :]: v for k, v in run.data.metrics.items() if k.startswith(prefix)}
        if "trust.ece" in found:  # flattened when logged
            found["trust"] = {"ece": found["trust.ece"]}
        return found, name
    with tempfile.TemporaryDirectory() as tmp:
        folder = mlflow_registry.load_components(f"models:/{params.register.model_name}/{version.version}", Path(tmp))
        # scored as serving answers with it: its own registered fit and decision rule, as the candidate's
        beside = folder / mlflow_registry.CALIBRATION_FILE
        fit = CalibrationFit.of(json.loads(beside.read_text(encoding="utf-8"))) if beside.exists() else None
        metrics, _ = evaluate_model(
            folder,
            rows,
            methodology,
            schema,
            max_new_tokens=params.generation.max_new_tokens,
            batch_size=params.generation.batch_size,
            desc=name,
            methods=contest.methods_needed([fit]) if fit else (),
            fit=fit,
            dtype=params.generation.dtype,
        )
    return metrics, f"{name} (re-evaluated on this test set with its own fit)"


def baselines(
    client, params: Params, backtest: dict, rows: list[PromptRecord], methodology: Methodology, schema: dict
) -> list[tuple]:
    """(metrics, name, non-inferiority) of each baseline `register.gate.against` names, in order: the
    champion (the rule scorer where there is none) and the rule scorer, to beat; gradient boosting
    with its validation-chosen rule (the backtest's `gbm_rule`: the firm's best alternative without a
    language model), not to fall below (`gate.statistical_margin`)."""
    found = []
    for against in params.register.gate.against:
        if against == "champion":
            metrics, name = champion_baseline(client, params, backtest, rows, methodology, schema) or (
                backtest["models"]["rule"],
                "rule scorer",
            )
            found.append((metrics, name, False))
        elif against == "rule":
            found.append((backtest["models"]["rule"], "rule scorer", False))
        elif "gbm_rule" in backtest["models"]:
            found.append((backtest["models"]["gbm_rule"], "gradient boosting with its validation-chosen rule", True))
        else:
            raise StageError(
                "register.gate.against names gbm_rule, but the backtest has no gbm_rule block "
                "(it needs gradient boosting's probabilities: stage evidence, and a calibrate fit); rerun `dvc repro`"
            )
    return found


def register(
    params: Params,
    backtest: dict,
    train: dict,
    curves: list[dict],
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    artifacts: list[Path],
    calibration: CalibrationFit | None = None,
) -> dict:
    """Log, register, gate. Returns the decision record. `calibration`: the calibrate stage's fit,
    logged with the model (its file is among `artifacts`)."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    experiment_id = mlflow_registry.setup(params.register)
    client = MlflowClient()
    name = params.register.model_name
    exp = dvc_experiment()
    with mlflow.start_run(experiment_id=experiment_id, run_name=exp.get("dvc.exp_name")) as active:
        if exp:
            mlflow.set_tags(exp)
        mlflow.log_params(mlflow_registry.flatten(to_dict(params)))
        for path in artifacts:
            if path.is_dir():
                mlflow.log_artifacts(str(path), artifact_path=path.name)
            elif path.exists():
                mlflow.log_artifact(str(path))
        mlflow.set_tags(
            {
                "test_fingerprint": backtest["test_fingerprint"],
                "methodology": f"{methodology.name} v{methodology.version}",
                "methodology_fingerprint": fingerprint(methodology),
            }
        )
        info = log_model(Path(params.grpo.out_dir), params.generation.max_new_tokens, calibration)
        # Metrics go after the model, the gate's linked to it in one request: logged before, MLflow links
        # a run's metrics to the model by reading each one's history (one request a metric, ~190 here).
        metrics = {
            k: v
            for k, v in mlflow_registry.flatten(backtest["models"], "backtest.").items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        metrics |= {f"train.{k}": v for k, v in train.items() if isinstance(v, (int, float))}
        mlflow.log_metrics(metrics, model_id=info.model_id)
        now = int(time.time() * 1000)
        client.log_batch(  # every step's curves in one request (chunked by MLflow), not one a step
            active.info.run_id,
            metrics=[
                Metric(f"curve.{k}", v, now, int(row["step"]))
                for row in curves
                for k, v in row.items()
                if k != "step" and v is not None
            ],
        )
        # Read champion -> decide -> register -> move alias, one candidate at a time (registry-wide lock).
        with mlflow_registry.promotion_lock(client, name):
            mlflow_registry.finish_pending(client, name)
            version, decision, gate_passed = gate_and_register(
                client, params, backtest, rows, methodology=methodology, schema=schema, info=info,
                run_id=active.info.run_id, calibration=calibration,
            )  # fmt: skip
    return {
        "model_name": name,
        "version": int(version.version),
        "alias": mlflow_registry.CHAMPION if decision.promote else mlflow_registry.CHALLENGER,
        "promoted": decision.promote,
        "gate_passed": gate_passed,
        "reason": decision.reason,
        "metric": params.register.gate.metric,
        "candidate": decision.candidate,
        "baseline": decision.baseline,
        "baseline_name": decision.baseline_name,
        "run_id": active.info.run_id,
    }


def gate_and_register(
    client,
    params: Params,
    backtest: dict,
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    info,
    run_id: str,
    calibration: CalibrationFit | None = None,
):
    """Compare with the champion (or, without one, the rule scorer) and the other baselines the gate
    names, register the version last (everything before it succeeded, so it is complete), move its
    alias; (version, decision, gate passed). The reason ends with what the candidate serves, in words
    (`story.served_words`): whether its grade is gradient boosting's alone is never left to be inferred."""
    import mlflow

    name = params.register.model_name
    decisions = [
        mlflow_registry.decide(backtest["models"]["grpo"], metrics, who, params.register.gate, non_inferior)
        for metrics, who, non_inferior in baselines(client, params, backtest, rows, methodology, schema)
    ]
    # the first baseline not passed decides; when every one is passed, the strongest is the one named
    failed = [d for d in decisions if not d.promote]
    decision = failed[0] if failed else max(decisions, key=lambda d: d.baseline)
    if not failed and len(decisions) > 1:
        decision = replace(decision, reason="; ".join(d.reason for d in decisions))
    if calibration:
        decision = replace(decision, reason=f"{decision.reason}; it serves {served_words(calibration.rule)}")
    gate_passed = decision.promote
    if gate_passed and not params.register.promote:
        decision = replace(
            decision, promote=False, reason=f"{decision.reason}; not promoted: register.promote is false"
        )
    mlflow.set_tags(
        {"gate.promote": str(decision.promote), "gate.passed": str(gate_passed), "gate.reason": decision.reason}
    )
    tags = {
        "test_fingerprint": backtest["test_fingerprint"],
        "gate.reason": decision.reason,
        "run_id": run_id,
        mlflow_registry.REGISTRATION: "pending",
    }
    version = mlflow.register_model(info.model_uri, name, tags=tags)  # the version and its tags in one request
    try:
        # the record serving trusts (an artifact: the UI can move aliases and edit tags, not this)
        record = gate_record(decision, gate_passed, version.version, params, methodology, calibration)
        mlflow.log_dict(record.as_dict(), mlflow_registry.GATE_RECORD)
        client.set_registered_model_alias(
            name, mlflow_registry.CHAMPION if decision.promote else mlflow_registry.CHALLENGER, version.version
        )
    except Exception:
        mlflow_registry.discard_pending(client, name, version.version)
        raise
    try:  # the alias is set: the registration happened; a lost tag is finished by the next one
        client.set_model_version_tag(name, version.version, mlflow_registry.REGISTRATION, "complete")
    except Exception as err:  # noqa: BLE001
        print(
            f"register: {name} v{version.version} stays tagged {mlflow_registry.REGISTRATION}=pending "
            f"({str(err)[:200]}); "
            "the next registration marks it complete"
        )
    return version, decision, gate_passed


def gate_record(
    decision,
    gate_passed: bool,
    version: str,
    params: Params,
    methodology: Methodology | None = None,
    calibration: CalibrationFit | None = None,
) -> mlflow_registry.GateRecord:
    """What the gate decided for one version, as logged with its run (mlflow_registry.GATE_RECORD): with
    the methodology it was trained on (serving refuses it under another: its fingerprint) and what it
    serves, in words."""
    return mlflow_registry.GateRecord(
        version=str(version),
        promoted=bool(decision.promote),
        reason=decision.reason,
        passed=bool(gate_passed),
        metric=params.register.gate.metric,
        candidate=decision.candidate,
        baseline=decision.baseline,
        baseline_name=decision.baseline_name,
        methodology=mlflow_registry.MethodologyStamp.of(methodology) if methodology is not None else None,
        serves=served_words(calibration.rule) if calibration else None,
    )


def unreachable(uri: str) -> StageError | None:
    """After a failed registration: a clear error when the tracking server no longer answers."""
    try:
        mlflow_registry.check_tracking(uri)
    except mlflow_registry.MlflowUnavailable as err:
        return StageError(
            f"{err}. It stopped answering during registration (after the MLflow client's retries): "
            "no alias moved and metrics/register.json is unchanged; rerun `dvc repro register` once it "
            "answers (an unfinished version is removed then)"
        )
    return None
