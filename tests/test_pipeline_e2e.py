"""The whole pipeline under DVC, tiny profile: the session's trained repo (one `training` flow run,
which is `dvc repro` stage by stage; tests/support.py), this module's own copy of it.

Checks: every declared output appears; MLflow holds a registered version with its
metrics; a second `dvc repro` runs nothing but the decisions export; changing one GRPO param would rerun
grpo and the stages after it only (`dvc repro --dry`: the sweep test runs such a rerun for real).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


def run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def stages_run(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")]


@pytest.fixture(scope="module")
def workspace(trained) -> tuple[Path, dict]:
    root, _ = trained
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(
        {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    )
    return root, env


@pytest.fixture(scope="module")
def first_repro(trained) -> list[str]:
    """The stages the first run ran, in order (from a fresh copy, every one)."""
    return trained[1]["result"]["stages_run"]


def test_repro_produces_every_output(workspace, first_repro):
    root, _ = workspace
    ran = first_repro
    assert sorted(ran) == sorted(
        [
            "synthetic/dvc.yaml:generate",
            "batches",
            "ingest",
            "validate",
            "methodology",
            "decisions",
            "evidence",
            "prepare",
            "model",
            "sft",
            "grpo",
            "calibrate",
            "baseline",
            "backtest",
            "register",
        ]
    )
    assert ran[-4:] == ["grpo", "calibrate", "backtest", "register"]
    for path in [
        "data/canonical/funds.parquet",
        "data/validated/funds.parquet",
        "data/schema/output_schema.json",
        "data/prepared/test.jsonl",
        "models/policy/model.safetensors",
        "reports/validation/index.html",
        "reports/backtest/confusion.png",
        "reports/grpo/rewards.png",
        "plots/confusion_grpo.json",
        "plots/grpo_rewards.json",
        "metrics/baseline.json",
        "plots/confusion_gbm.json",
        "data/evidence/estimates.parquet",
        "models/calibration.json",
        "plots/reliability_gbm.json",
    ]:
        assert (root / path).exists(), path
    backtest = json.loads((root / "metrics/backtest.json").read_text())
    # gradient boosting with its validation-chosen rule and the SFT start under its own choice are
    # measured even when the tiny model answers nothing valid; the model's own parts when it does
    parts = {"grpo", "sft", "base", "rule", "gbm", "gbm_rule", "sft_served"}
    assert parts <= set(backtest["models"]) <= parts | {"grpo_alone", "grpo_stack"}
    served = backtest["models"]["grpo"]["served"]
    assert served["serves"] in ("lm", "gbm", "stack") and 0 <= served["equal_to_gbm_rule"] <= 1
    assert "grpo-gbm_rule" in backtest["comparisons"]
    assert {"valid_json", "exact", "within_one", "qwk", "spearman", "score_mae"} <= set(backtest["models"]["grpo"])
    assert {"ece", "brier", "exact_top70"} <= set(backtest["models"]["gbm"]["trust"])
    assert "grpo-gbm" in backtest["comparisons"]


def test_mlflow_holds_a_registered_version_with_metrics(workspace, first_repro):
    from mlflow import MlflowClient

    root, _ = workspace
    decision = json.loads((root / "metrics/register.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    version = client.get_model_version(decision["model_name"], str(decision["version"]))
    metrics = client.get_run(version.run_id).data.metrics
    assert "backtest.grpo.qwk" in metrics and "backtest.rule.exact" in metrics
    assert decision["alias"] in client.get_registered_model(decision["model_name"]).aliases
    # the gate's figures are the logged model's own (MLflow's model page), and the curves keep their steps
    run = client.get_run(version.run_id)
    [model] = [m for m in client.search_logged_models([run.info.experiment_id]) if m.source_run_id == run.info.run_id]
    assert {m.key for m in model.metrics} >= {"backtest.grpo.qwk", "backtest.rule.exact"}
    assert not any(m.key.startswith("curve.") for m in model.metrics)
    curves = json.loads((root / "plots/grpo_rewards.json").read_text())
    curve = next(k for k in curves[-1] if k != "step")
    logged = client.get_metric_history(version.run_id, f"curve.{curve}")
    assert sorted(m.step for m in logged) == sorted(r["step"] for r in curves if r.get(curve) is not None)


def test_second_repro_is_a_no_op_and_a_grpo_param_would_rerun_only_downstream(workspace, first_repro):
    root, env = workspace
    again = run(["dvc", "repro"], root, env).stdout
    assert stages_run(again) == ["decisions"]  # always run (its store is outside DVC); its table unchanged
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    params["grpo"]["learning_rate"] = params["grpo"]["learning_rate"] / 2
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")
    # what DVC would rerun, without training (the sweep test and the monitoring flow's relearn run it):
    # grpo and what follows it, nothing upstream
    changed = run(["dvc", "repro", "--dry"], root, env).stdout
    ran = [s for s in stages_run(changed) if s != "decisions"]
    assert ran == ["grpo", "calibrate", "backtest", "register"], ran
