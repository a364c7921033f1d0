"""The `training` flow for real (Prefect test server) on a tiny-profile copy of the repo.

One full run is shared (tests/support.py); the other runs here find DVC up to date,
so they cost seconds: a no-op run with overrides, a run that dies in `train`, and a
run against an MLflow server that is down.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest
import yaml

from flows import common
from fundgrpo.params import ParamsError
from tests import support

STAGES = [
    "batches",
    "methodology",
    "decisions",
    "synthetic/dvc.yaml:generate",
    "ingest",
    "validate",
    "evidence",
    "prepare",
    "baseline",
    "model",
    "sft",
    "grpo",
    "calibrate",
    "backtest",
    "register",
]


def digest(root: Path, *paths: str) -> dict[str, str]:
    """Content hashes of files (folders: every file in them), to prove nothing was touched."""
    out = {}
    for rel in paths:
        path = root / rel
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            out[str(f.relative_to(root))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


GUARDED = (
    "dvc.lock",
    "models/policy",
    "models/sft",
    "data/validated/funds.parquet",
    "data/prepared",
    "metrics/register.json",
    "metrics/backtest.json",
)


def test_stage_order_is_dvcs(trained):
    root, _ = trained
    order = common.stage_order(root)
    assert order == STAGES
    names = list(yaml.safe_load((root / "dvc.yaml").read_text())["stages"])
    # every stage of dvc.yaml, and the synthetic generator because the default source is its output
    assert sorted(order) == sorted(names + ["synthetic/dvc.yaml:generate"])


def test_training_flow_runs_every_stage_as_a_task_and_gates(trained):
    root, run = trained  # run: what the flow returned, and what Prefect's API showed of it
    assert run["completed"]
    result = run["result"]
    assert result["stages_run"] == STAGES and result["registered"]
    decision = result["decision"]
    assert decision == json.loads((root / "metrics/register.json").read_text())
    assert decision["alias"] in ("champion", "challenger") and decision["reason"]
    assert result["message"].startswith(f"fund-evaluator v{decision['version']} ")
    assert decision["version"] in support.versions(root)
    # What the Prefect UI shows: one completed task run per stage, with its log.
    by_name = run["task_runs"]
    assert set(STAGES) <= set(by_name)
    assert all(by_name[s]["completed"] and by_name[s]["seconds"] > 0 for s in STAGES)
    # the gate's decision is the run's final message and a markdown artifact with every stage
    assert run["message"] == result["message"]
    artifact = run["artifact"]
    assert f"### {result['message']}" in artifact and "| register | ran |" in artifact
    assert f"| v{decision['version']} |" in artifact


def test_a_second_run_is_a_no_op_and_overrides_are_dvc_exp_run_S(trained):
    from flows.training_flow import training

    root, _ = trained
    before = digest(root, *GUARDED)
    text = (root / "params.yaml").read_text()
    current = yaml.safe_load(text)["grpo"]["learning_rate"]
    state = training(root=str(root), overrides={"grpo.learning_rate": str(current)}, retries=0, return_state=True)
    result = state.result()
    assert result["stages_run"] == ["decisions"] and not result["registered"]  # always run: its store is outside DVC
    # stages DVC skipped show as such in Prefect: a Completed state named Skipped
    runs = {r.name: r for r in support.task_runs(state.state_details.flow_run_id)}
    assert runs["grpo"].state.name == "Skipped" and runs["decisions"].state.name == "Completed"
    # one `dvc status` for the run: a stage it found up to date, with nothing upstream rerun, starts no
    # DVC process; one downstream of a stage that ran (decisions, always run) is left to `dvc repro`
    assert runs["grpo"].state.message == "up to date: dvc status"
    assert runs["prepare"].state.message == "up to date: DVC skipped it"
    assert "| grpo | skipped (up to date) |" in support.artifact(state.state_details.flow_run_id, "training-gate")
    assert result["message"].startswith("pipeline up to date: no new candidate (last decision: ")
    assert digest(root, *GUARDED) == before


def test_apply_overrides_keeps_comments_types_and_refuses_unknown_keys(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("grpo:   # the RL stage\n  beta: 0.0   # KL weight\n  loss_type: dapo\n", encoding="utf-8")
    changes = common.apply_overrides(
        path, {"grpo.beta": "0.04", "grpo.lora.enabled": "true", "grpo.learning_rate": "1e-5"}
    )
    assert changes == ["grpo.beta=0.04", "grpo.lora.enabled=true", "grpo.learning_rate=1e-5"]
    text = path.read_text()
    assert "# KL weight" in text and "# the RL stage" in text
    data = yaml.safe_load(text)  # as the stages read it (PyYAML)
    assert data["grpo"]["beta"] == 0.04 and data["grpo"]["lora"]["enabled"] is True
    assert data["grpo"]["learning_rate"] == 1e-5
    with pytest.raises(ParamsError, match="betta"):
        common.apply_overrides(path, {"grpo.betta": "1"})
    with pytest.raises(ParamsError, match="expected a number"):
        common.apply_overrides(path, {"grpo.beta": "high"})
    assert path.read_text() == text  # a refused override writes nothing


@pytest.mark.fault("a training flow failing at a late stage")
def test_a_retrain_that_dies_midway_leaves_champion_and_artifacts(trained):
    from flows.training_flow import training

    root, _ = trained
    client = support.mlflow_client(root)
    support.promote_by_hand(root, support.versions(root)[-1])
    champion = client.get_model_version_by_alias("fund-evaluator", "champion").version
    before, count = digest(root, *GUARDED), support.versions(root)
    params_text = (root / "params.yaml").read_text()
    try:
        # A config the GRPO trainer refuses: the train stage fails after the earlier stages.
        with pytest.raises(
            RuntimeError, match=r"stage 'grpo' failed[\s\S]*divisible by (num_generations|the number of generations)"
        ):
            training(root=str(root), overrides={"grpo.num_generations": "3"}, retries=0)
        # the override applied to that run only: the next scheduled run starts from the committed params
        assert (root / "params.yaml").read_text() == params_text
    finally:
        (root / "params.yaml").write_text(params_text)  # keep the shared repo usable whatever happened
    assert digest(root, *GUARDED) == before
    assert support.versions(root) == count
    assert client.get_model_version_by_alias("fund-evaluator", "champion").version == champion


@pytest.mark.fault("MLflow tracking server down")
def test_mlflow_down_fails_clearly_after_retries_with_nothing_registered(trained, monkeypatch):
    from flows.training_flow import training

    root, _ = trained
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    before, count = digest(root, *GUARDED), support.versions(root)
    state = training(root=str(root), retries=1, retry_delay_s=0.1, return_state=True)
    assert state.is_failed()
    with pytest.raises(common.MlflowUnavailable) as err:
        state.result()
    assert uri in str(err.value) and "unreachable" in str(err.value)
    checks = [r for r in support.task_runs(state.state_details.flow_run_id) if r.name.startswith("mlflow-check")]
    assert [r.run_count for r in checks] == [2]  # the first try and one retry, then the flow stops
    assert not any(r.name in STAGES for r in support.task_runs(state.state_details.flow_run_id))
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert digest(root, *GUARDED) == before and support.versions(root) == count


def test_tracking_uri_is_made_absolute_for_the_flow_process(monkeypatch, tmp_path):
    from fundgrpo.params import RegisterParams

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert (
        common.tracking_uri(RegisterParams(tracking_uri="sqlite:///mlflow.db"), tmp_path)
        == f"sqlite:///{tmp_path}/mlflow.db"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert common.tracking_uri(RegisterParams(), tmp_path) == "http://127.0.0.1:5000"
    with pytest.raises(common.MlflowUnavailable, match="does not exist"):
        common.check_tracking(f"sqlite:///{tmp_path}/missing/mlflow.db")


def test_a_quick_run_checks_the_wiring_and_changes_nothing(trained):
    """`quick=True` (a deployment's wiring check) trains for minutes on its own settings, registers
    nothing, moves no alias, and leaves every output as it was (it once registered a version, moved
    `challenger` and left its refused model in the workspace)."""
    from flows.training_flow import training

    root, _ = trained
    client = support.mlflow_client(root)
    aliases = dict(client.get_registered_model("fund-evaluator").aliases)
    before, count = digest(root, *GUARDED, "metrics", "plots"), support.versions(root)
    params_text = (root / "params.yaml").read_text()
    result = training(root=str(root), quick=True, retries=0)
    assert {"grpo", "backtest"} <= set(result["stages_run"]) and "register" not in result["stages"]
    assert result["message"].startswith("quick run: the wiring works") and result["decision"] is None
    assert support.versions(root) == count and dict(client.get_registered_model("fund-evaluator").aliases) == aliases
    assert (root / "params.yaml").read_text() == params_text
    assert digest(root, *GUARDED, "metrics", "plots") == before
