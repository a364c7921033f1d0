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
    server = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri", postgres_server["mlflow"],
                               "--artifacts-destination", str(artifacts), "--serve-artifacts", "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            pass
        assert server.poll() is None and time.monotonic() < deadline, (artifacts.parent / "mlflow-server.log").read_text()[-3000:]
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
    return subprocess.Popen([sys.executable, "-m", "stages.register"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


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
    decisions = {name: json.loads((ws / "metrics/register.json").read_text()) for name, ws in (("worse", worse), ("better", better))}

    client = MlflowClient(tracking_uri=mlflow_server)
    champion = client.get_model_version_by_alias("fund-evaluator", "champion")
    assert int(champion.version) == decisions["better"]["version"]  # whichever registered first, the better one is champion
    if decisions["worse"]["version"] > decisions["better"]["version"]:  # the worse came second: compared with the better
        assert not decisions["worse"]["promoted"] and "champion v" in decisions["worse"]["baseline_name"]
    else:  # the worse came first and was promoted over the rule scorer; the better then beat it
        assert decisions["worse"]["promoted"] and decisions["better"]["baseline_name"].startswith("champion v")
    assert not any(m.name.endswith(".promotion-lock") for m in client.search_registered_models())  # released

    # the served artifacts: the champion's model downloads and loads, as `evaluate` and the API do
    import mlflow

    from fundgrpo import modelling, registry

    mlflow.set_tracking_uri(mlflow_server)
    try:
        folder = registry.load_components(f"models:/fund-evaluator/{champion.version}", tmp_path / "download")
        model, tokenizer = modelling.load(folder)
        assert model.num_parameters() > 0
    finally:
        mlflow.set_tracking_uri(None)

    # the sweep comparison queries the server's runs (no experiments here: the baseline row only)
    compared = run([sys.executable, str(REPO / "tools/compare_runs.py")], better, env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert "| exp " in compared.stdout and "comparison.md" in compared.stdout


@pytest.mark.fault("a registration that died holding the promotion lock")
def test_a_lock_left_by_a_dead_holder_times_out_naming_the_fix(mlflow_server):
    from mlflow import MlflowClient

    from fundgrpo import registry

    client = MlflowClient(tracking_uri=mlflow_server)
    client.create_registered_model("stale.promotion-lock", tags={"holder": "gone:1", "since": str(time.time())})
    with pytest.raises(TimeoutError, match=r"gone:1 still holds .*delete_registered_model\('stale.promotion-lock'\)"):
        with registry.promotion_lock(client, "stale", timeout_s=1.0, poll_s=0.2):
            pass
    taken = []
    with registry.promotion_lock(client, "stale", stale_s=0.0, log=taken.append):  # old enough: taken over, saying so
        assert client.get_registered_model("stale.promotion-lock").tags["holder"] != "gone:1"
    assert taken and "gone:1" in taken[0]


def test_monitoring_grades_with_the_servers_champion_and_logs_drift_there(trained, mlflow_server, prefect_api, tmp_path):
    """Monitoring against the shared server: the champion it downloads grades the batch (prediction
    drift), and the drift figures land in the server's monitoring experiment."""
    from mlflow import MlflowClient

    from fundgrpo import profiles, synthetic
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
    done = run([sys.executable, "-m", "flows.monitoring"], ws,
               env={"MLFLOW_TRACKING_URI": mlflow_server, "PREFECT_API_URL": prefect_api, "PYTHONPATH": str(REPO)})
    assert "batch-calm" in done.stdout
    summary = json.loads(max((ws / "monitoring/reports").glob("*/batch-calm/summary.json")).read_text())
    assert summary["champion_version"] in (version, str(version)) and summary["prediction_drift"]["score"] is not None, summary
    [experiment] = [e for e in client.search_experiments() if e.name == "fund-grpo-monitoring"]
    [logged] = client.search_runs([experiment.experiment_id], filter_string="tags.batch = 'batch-calm'")
    assert "drift.share" in logged.data.metrics
