"""The registry on the engines a team shares: an MLflow tracking server on loopback, backed by
PostgreSQL (tools/postgres.py) and serving artifacts. `register` and its gate run against it, the
served model loads for scoring, the sweep comparison reads it, and two candidates registering at
the same moment are gated one after the other: the better ends `champion`, the other does not.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support import REPO, run


@pytest.fixture(scope="module")
def mlflow_server(postgres_server, tmp_path_factory):
    """`mlflow server` with its backend store on PostgreSQL and artifacts it serves itself."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    artifacts = tmp_path_factory.mktemp("served-artifacts")
    log = open(artifacts.parent / "mlflow-server.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "mlflow"),
            "server",
            "--backend-store-uri",
            postgres_server["mlflow"],
            "--artifacts-destination",
            str(artifacts),
            "--serve-artifacts",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            pass
        assert server.poll() is None and time.monotonic() < deadline, (
            artifacts.parent / "mlflow-server.log"
        ).read_text()[-3000:]
        time.sleep(1)
    yield url
    server.terminate()
    server.wait(timeout=30)
    log.close()


def workspace(trained_root: Path, dest: Path, grpo_qwk: float) -> Path:
    """A copy of the trained workspace whose candidate scored `grpo_qwk` on the backtest; the gate
    is set so that beating the rule scorer needs only valid answers (the tiny model writes none)."""
    shutil.copytree(trained_root, dest, symlinks=True, ignore=shutil.ignore_patterns("mlflow.db", "mlartifacts"))
    backtest = json.loads((dest / "metrics/backtest.json").read_text())
    backtest["models"]["grpo"].update(qwk=grpo_qwk, valid_json=1.0)
    backtest["models"]["rule"]["qwk"] = 0.5
    (dest / "metrics/backtest.json").write_text(json.dumps(backtest))
    params = yaml.safe_load((dest / "params.yaml").read_text())
    params["register"]["gate"] = {"metric": "qwk", "margin": 0.0, "min_valid_json": 0.9}
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return dest


def register(root: Path, uri: str) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "stages.register"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.fault("two candidates registering at once")
def test_two_candidates_at_once_are_gated_in_turn_on_a_postgres_backed_server(trained, mlflow_server, tmp_path):
    from mlflow import MlflowClient

    root, _ = trained
    worse = workspace(root, tmp_path / "worse", grpo_qwk=0.80)
    better = workspace(root, tmp_path / "better", grpo_qwk=0.90)
    procs = {"worse": register(worse, mlflow_server), "better": register(better, mlflow_server)}  # at the same moment
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}:\n{out[-3000:]}"
    decisions = {
        name: json.loads((ws / "metrics/register.json").read_text())
        for name, ws in (("worse", worse), ("better", better))
    }

    client = MlflowClient(tracking_uri=mlflow_server)
    champion = client.get_model_version_by_alias("fund-evaluator", "champion")
    assert (
        int(champion.version) == decisions["better"]["version"]
    )  # whichever registered first, the better one is champion
    if (
        decisions["worse"]["version"] > decisions["better"]["version"]
    ):  # the worse came second: compared with the better
        assert not decisions["worse"]["promoted"] and "champion v" in decisions["worse"]["baseline_name"]
    else:  # the worse came first and was promoted over the rule scorer; the better then beat it
        assert decisions["worse"]["promoted"] and decisions["better"]["baseline_name"].startswith("champion v")
    assert not any(m.name.endswith(".promotion-lock") for m in client.search_registered_models())  # released

    # the served artifacts: the champion's model downloads and loads, as `evaluate` and the API do
    import mlflow

    from fundgrpo.model import modelling
    from fundgrpo.registry import mlflow_registry

    mlflow.set_tracking_uri(mlflow_server)
    try:
        folder = mlflow_registry.load_components(f"models:/fund-evaluator/{champion.version}", tmp_path / "download")
        model, tokenizer = modelling.load(folder)
        assert model.num_parameters() > 0
    finally:
        mlflow.set_tracking_uri(None)

    # the sweep comparison queries the server's runs (no experiments here: the baseline row only)
    compared = run(
        [sys.executable, str(REPO / "tools/compare_runs.py")], better, env={"MLFLOW_TRACKING_URI": mlflow_server}
    )
    assert "| exp " in compared.stdout and "comparison.md" in compared.stdout


@pytest.mark.fault("a registration that died holding the promotion lock")
def test_a_lock_left_by_a_dead_holder_times_out_naming_the_fix(mlflow_server):
    from mlflow import MlflowClient

    from fundgrpo.registry import mlflow_registry

    client = MlflowClient(tracking_uri=mlflow_server)
    client.create_registered_model("stale.promotion-lock", tags={"holder": "gone:1", "since": str(time.time())})
    with pytest.raises(TimeoutError, match=r"gone:1 still holds .*delete_registered_model\('stale.promotion-lock'\)"):
        with mlflow_registry.promotion_lock(client, "stale", timeout_s=1.0, poll_s=0.2):
            pass
    taken = []
    with mlflow_registry.promotion_lock(
        client, "stale", stale_s=0.0, log=taken.append
    ):  # old enough: taken over, saying so
        assert client.get_registered_model("stale.promotion-lock").tags["holder"] != "gone:1"
    assert taken and "gone:1" in taken[0]


def test_monitoring_grades_with_the_servers_champion_and_logs_drift_there(
    trained, mlflow_server, prefect_api, tmp_path
):
    """Monitoring against the shared server: the champion it downloads grades the batch (prediction
    drift), and the drift figures land in the server's monitoring experiment."""
    from mlflow import MlflowClient

    from fundgrpo import profiles
    from fundgrpo.data import synthetic
    from monitoring import simulate

    root, _ = trained
    ws = workspace(root, tmp_path / "monitored", grpo_qwk=0.95)  # beats any champion of the tests above
    proc = register(ws, mlflow_server)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    version = json.loads((ws / "metrics/register.json").read_text())["version"]
    client = MlflowClient(tracking_uri=mlflow_server)
    assert int(client.get_model_version_by_alias("fund-evaluator", "champion").version) == version

    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["monitor"]["retrain"] = False  # the figures are the point here, not a second training
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny = profiles.load("tiny", REPO / "params.yaml", REPO / "profiles").synthetic
    simulate.write(synthetic.later_batch(tiny, 6), ws / "data/incoming" / "batch-calm.csv")
    done = run(
        [sys.executable, "-m", "flows.monitoring_flow"],
        ws,
        env={"MLFLOW_TRACKING_URI": mlflow_server, "PREFECT_API_URL": prefect_api, "PYTHONPATH": str(REPO)},
    )
    assert "batch-calm" in done.stdout
    summary = json.loads(max((ws / "monitoring/reports").glob("*/batch-calm/summary.json")).read_text())
    assert (
        summary["champion_version"] in (version, str(version)) and summary["prediction_drift"]["score"] is not None
    ), summary
    [experiment] = [e for e in client.search_experiments() if e.name == "fund-grpo-monitoring"]
    [logged] = client.search_runs([experiment.experiment_id], filter_string="tags.batch = 'batch-calm'")
    assert "drift.share" in logged.data.metrics


# The MLflow client retries a request that found the server gone (MLFLOW_HTTP_REQUEST_MAX_RETRIES,
# 7 by default, about 4 min of backoff); shortened here to 2 retries over 2 s (urllib3 waits 0, then
# 2 s; the factor is an integer).
SHORT_RETRIES = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
}


def register_through(root: Path, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **SHORT_RETRIES, "MLFLOW_TRACKING_URI": url, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "stages.register"], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


def pending(client) -> list:
    return [
        v for v in client.search_model_versions("name = 'fund-evaluator'") if v.tags.get("registration") == "pending"
    ]


@pytest.mark.fault("MLflow server down during register")
def test_a_brief_outage_during_register_is_retried_and_registers_once(trained, mlflow_server, tmp_path):
    from mlflow import MlflowClient

    from tests.support import Outage

    root, _ = trained
    ws = workspace(root, tmp_path / "brief", grpo_qwk=0.99)
    client = MlflowClient(tracking_uri=mlflow_server)
    before = {v.version for v in client.search_model_versions("name = 'fund-evaluator'")}
    # down for 1 s: back before the client's retries (SHORT_RETRIES, over 2 s) run out
    outage = Outage(mlflow_server, b"POST /api/2.0/mlflow/model-versions/create", down_s=1.0)
    try:
        done = register_through(ws, outage.url)
    finally:
        outage.close()
    # the server did go down while the version was being created
    assert outage.fired.is_set(), done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    decision = json.loads((ws / "metrics/register.json").read_text())
    [new] = [
        v for v in client.search_model_versions("name = 'fund-evaluator'") if v.version not in before
    ]  # exactly one
    assert int(new.version) == decision["version"] and new.tags["registration"] == "complete"
    assert int(client.get_model_version_by_alias("fund-evaluator", "champion").version) == decision["version"]


@pytest.mark.fault("MLflow server down during register")
def test_a_server_lost_during_register_fails_clearly_and_the_next_run_finishes_cleanly(
    trained, mlflow_server, tmp_path
):
    from mlflow import MlflowClient

    from tests.support import Outage

    root, _ = trained
    ws = workspace(root, tmp_path / "lost", grpo_qwk=0.999)  # would be promoted
    client = MlflowClient(tracking_uri=mlflow_server)
    champion = client.get_model_version_by_alias("fund-evaluator", "champion").version
    decision_before = (ws / "metrics/register.json").read_bytes()
    outage = Outage(mlflow_server, b"POST /api/2.0/mlflow/registered-models/alias")  # down for good at the alias
    try:
        failed = register_through(ws, outage.url)
        assert outage.fired.is_set()
        assert failed.returncode == 1, failed.stdout[-2000:] + failed.stderr[-3000:]
        last = failed.stderr.strip().splitlines()[-1]
        assert last.startswith("register failed: MLflow tracking server") and outage.url in last, failed.stderr[-3000:]
        assert "stopped answering during registration" in last and "no alias moved" in last
        # nothing promoted, the stage's output untouched; the created version is marked unfinished
        assert client.get_model_version_by_alias("fund-evaluator", "champion").version == champion
        assert (ws / "metrics/register.json").read_bytes() == decision_before
        [left] = pending(client)
        assert not client.get_model_version("fund-evaluator", left.version).aliases

        outage.restore()  # the server is back: the next registration cleans up, then registers
        done = register_through(ws, outage.url)
    finally:
        outage.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"removing fund-evaluator v{left.version}: its registration did not finish" in done.stdout
    assert "taking over the promotion lock" in done.stdout  # its holder died; no waiting for it to go stale
    assert not pending(client) and left.version not in {
        v.version for v in client.search_model_versions("name = 'fund-evaluator'")
    }
    decision = json.loads((ws / "metrics/register.json").read_text())
    assert (
        decision["promoted"]
        and int(client.get_model_version_by_alias("fund-evaluator", "champion").version) == decision["version"]
    )
    assert not any(m.name.endswith(".promotion-lock") for m in client.search_registered_models())
