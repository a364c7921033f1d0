"""prefect.yaml deploys the three flows with their crons (to a real Prefect server); serve() builds the same."""

from __future__ import annotations

import os
import sys

import pytest
import yaml

from flows import serve
from tests.support import REPO, run

EXPECTED = {
    "monitoring/monitoring-daily": serve.MONITORING_CRON,
    "training/training-weekly": serve.TRAINING_CRON,
    "evaluation/evaluation-monthly": serve.EVALUATION_CRON,
}


def test_prefect_yaml_deploys_both_flows_on_their_schedules(prefect_api):
    from prefect.client.orchestration import get_client

    env = {"PREFECT_API_URL": prefect_api, "PREFECT_CLI_PROMPT": "false"}
    prefect = [sys.executable, "-m", "prefect"]
    run([*prefect, "work-pool", "create", "fund-grpo", "--type", "process", "--overwrite"], REPO, env)
    run([*prefect, "--no-prompt", "deploy", "--all"], REPO, env, timeout=300)
    with get_client(sync_client=True) as client:
        deployments = {f"{client.read_flow(d.flow_id).name}/{d.name}": d for d in client.read_deployments()}
        try:
            assert set(EXPECTED) <= set(deployments)
            for name, cron in EXPECTED.items():
                d = deployments[name]
                assert [s.schedule.cron for s in d.schedules] == [cron]
                assert d.work_pool_name == "fund-grpo"
                assert d.parameters["root"] == "."
            assert deployments["training/training-weekly"].global_concurrency_limit.limit == 1
            assert deployments["training/training-weekly"].parameters["quick"] is False  # a quick run is one flag away
        finally:  # no worker here: scheduled runs would only pile up as Late
            for d in deployments.values():
                client.delete_deployment(d.id)


def test_serve_builds_the_same_deployments_as_prefect_yaml():
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    in_yaml = {d["name"]: d["schedules"][0]["cron"] for d in spec["deployments"]}
    built = {d.name: d.schedules[0].schedule.cron for d in serve.deployments()}
    assert (
        built
        == in_yaml
        == {
            "monitoring-daily": serve.MONITORING_CRON,
            "training-weekly": serve.TRAINING_CRON,
            "evaluation-monthly": serve.EVALUATION_CRON,
        }
    )
    assert os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED") == "false"  # telemetry off (tests/conftest.py)


def test_container_deployments_match_and_register_on_docker_and_kubernetes_pools(prefect_api):
    """prefect-containers.yaml: the same flows, schedules and parameters as prefect.yaml, on Docker
    and Kubernetes pools (registered here; running them needs a Docker daemon or a cluster)."""
    from prefect.client.orchestration import get_client

    plain = {d["entrypoint"]: d for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]}
    containers = yaml.safe_load((REPO / "prefect-containers.yaml").read_text())["deployments"]
    assert {d["entrypoint"] for d in containers} == set(plain)
    for d in containers:
        assert (
            d["schedules"] == plain[d["entrypoint"]]["schedules"]
            and d["parameters"] == plain[d["entrypoint"]]["parameters"]
        )

    env = {"PREFECT_API_URL": prefect_api, "PREFECT_CLI_PROMPT": "false"}
    prefect = [sys.executable, "-m", "prefect"]
    run([*prefect, "work-pool", "create", "fund-grpo-docker", "--type", "docker", "--overwrite"], REPO, env)
    run([*prefect, "work-pool", "create", "fund-grpo-k8s", "--type", "kubernetes", "--overwrite"], REPO, env)
    run(
        [*prefect, "--no-prompt", "deploy", "--prefect-file", "prefect-containers.yaml", "--all"],
        REPO,
        env,
        timeout=300,
    )
    with get_client(sync_client=True) as client:
        deployed = {d.name: d for d in client.read_deployments() if d.name in {c["name"] for c in containers}}
        try:
            assert set(deployed) == {c["name"] for c in containers}
            assert deployed["training-weekly-k8s"].work_pool_name == "fund-grpo-k8s"
            assert deployed["training-weekly-k8s"].job_variables["image"] == "fund-grpo:latest"
            assert client.read_work_pool("fund-grpo-k8s").type == "kubernetes"
            assert client.read_work_pool("fund-grpo-docker").type == "docker"
        finally:
            for d in deployed.values():
                client.delete_deployment(d.id)


@pytest.mark.fault("a worker stopped by SIGTERM")
def test_the_worker_stops_on_sigterm_even_started_in_the_background(prefect_api):
    """A worker started as a shell's background job inherits SIGINT ignored; `prefect worker start`
    relays SIGTERM as SIGINT, so without flows/worker.py it would never stop."""
    import signal
    import subprocess
    import time

    def background_job() -> None:  # what `cmd &` in a non-interactive shell does
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    worker = subprocess.Popen(
        [sys.executable, "-m", "flows.worker", "--pool", "sigterm-test", "--type", "process"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=background_job,
    )
    try:
        deadline = time.monotonic() + 120
        lines = []
        while not any("started" in line for line in lines):
            assert worker.poll() is None and time.monotonic() < deadline, "".join(lines)
            lines.append(worker.stdout.readline())
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=60)
        assert worker.returncode is not None and "stopped" in out, out
    finally:
        if worker.poll() is None:
            worker.kill()
