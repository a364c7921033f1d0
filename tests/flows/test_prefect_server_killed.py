"""Fault: the Prefect server is stopped while a training run is in progress, and restarted after
the run has ended. Its own server here (a `prefect server start` process on a sqlite file), so
the shared test server is not disturbed.

The client is told not to retry (PREFECT_CLIENT_MAX_RETRIES=0): the same as an outage longer
than its retries. Without reconciliation the server would show the run `Running` forever, a
task `Running` and the later logs gone (measured; flows/journal.py); after `python -m
flows.journal` the run's final state, every task's and the logs are what happened.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows import common, journal
from tests import support
from tests.flows.test_training_flow import GUARDED, digest

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`prefect server start` on loopback, its database a sqlite file that survives restarts."""

    def __init__(self, home: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.env = {
            **os.environ,
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": self.url,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home}/prefect.db",
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        import urllib.request

        prefect = Path(sys.executable).parent / "prefect"
        self.proc = subprocess.Popen(
            [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=2)
                return
            except OSError:
                assert self.proc.poll() is None, "the Prefect server exited at start"
                time.sleep(0.5)
        raise AssertionError("the Prefect server did not become healthy in 120 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # killed, not shut down: nothing is flushed
            self.proc.wait(timeout=30)


def server_record(url: str, flow_run_id: str) -> tuple[str, dict[str, str], list[str]]:
    """(the run's state, {task run id: state}, log messages) as the server has them."""
    code = (
        "import sys, json\nfrom prefect.client.orchestration import get_client\n"
        "from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, LogFilter, LogFilterFlowRunId\n"
        "with get_client(sync_client=True) as c:\n"
        "    run = c.read_flow_run(sys.argv[1])\n"
        "    tasks = c.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))\n"
        "    logs = c.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), limit=200)\n"
        # a task run the killed server created without its state (seen in CI) reads as NONE
        "    kind = lambda s: s.type.value if s else 'NONE'\n"
        "    states = {str(t.id): kind(t.state) for t in tasks}\n"
        "    print(json.dumps([kind(run.state), states, [l.message for l in logs]]))\n"
    )
    for attempt in range(5):  # a restarted server may answer /health before it serves reads
        out = subprocess.run(
            [sys.executable, "-c", code, flow_run_id],
            env={**os.environ, "PREFECT_API_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode == 0:
            break
        time.sleep(3)
    assert out.returncode == 0, f"reading run {flow_run_id} from the restarted server failed:\n{out.stderr[-3000:]}"
    state, tasks, logs = json.loads(out.stdout.strip().splitlines()[-1])
    return state, tasks, logs


@pytest.mark.fault("Prefect server stopped mid-run")
def test_a_run_the_server_lost_is_recorded_true_after_restart_and_reconcile(trained, tmp_path):
    """The server is killed while a training run waits for the workspace; the run finishes without it;
    after a restart and reconcile the run, its tasks and logs are true, and nothing is lost."""
    root, _ = trained
    server = Server(tmp_path / "prefect-home")
    server.start()
    before, count = digest(root, *GUARDED), support.versions(root)
    client = support.mlflow_client(root)
    champion = [a for v in client.search_model_versions("name='fund-evaluator'") for a in v.aliases]
    folder = journal.folder(root)
    known = set(folder.glob("*.jsonl")) if folder.exists() else set()
    env = {**server.env, "PREFECT_CLIENT_MAX_RETRIES": "0", "PYTHONPATH": str(support.REPO)}
    try:
        with common.workspace_lock(root, timeout_s=0):  # the run will wait here: the server dies meanwhile
            run = subprocess.Popen(
                [sys.executable, "-m", "flows.training_flow"],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            deadline = time.monotonic() + 180
            while (
                not (new := set(folder.glob("*.jsonl")) - known if folder.exists() else set())
                or "waiting" not in next(iter(new)).read_text()
            ):
                assert run.poll() is None and time.monotonic() < deadline, (
                    "the run did not start waiting for the workspace"
                )
                time.sleep(0.5)
            record = next(iter(new))
            server.stop()
        deadline = time.monotonic() + 600  # the stages run (DVC finds them up to date) with no server
        while not any(r["kind"] == "flow" for r in journal.read(record)):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0][-3000:]
            time.sleep(1)
        # The work is done. The process would now spend minutes retrying to send its buffered
        # events to the dead server (7 s an event), then exit: end it instead.
        run.kill()
        output, _ = run.communicate(timeout=60)
        rows = journal.read(record)
        assert [r["state"] for r in rows if r["kind"] == "flow"] == ["COMPLETED"], output[-3000:]

        server.start()  # same database: what the server recorded before it died
        state, tasks, logs = server_record(server.url, record.stem)
        assert state == "RUNNING"  # the fault as it shows without reconciliation
        done = subprocess.run(
            [sys.executable, "-m", "flows.journal", str(root)], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0 and "1 run(s) corrected" in done.stdout, done.stdout + done.stderr

        state, tasks, logs = server_record(server.url, record.stem)
        assert state == "COMPLETED"
        journaled = {r["task_run_id"]: r["state"] for r in rows if r["kind"] == "task"}
        assert all(tasks[t] == s for t, s in journaled.items() if t in tasks), (tasks, journaled)
        assert not {"RUNNING", "NONE"} & set(tasks.values()), tasks  # none left running or without a state
        final = [r["message"] for r in rows if r["kind"] == "flow"][0]
        assert any(final in line for line in logs)  # the run's last line, lost with the server, is back
        again = subprocess.run(
            [sys.executable, "-m", "flows.journal", str(root)], env=env, capture_output=True, text=True, timeout=300
        )
        assert "every finished run's record on the server is true" in again.stdout  # reconciled once
    finally:
        server.stop()
    assert digest(root, *GUARDED) == before and support.versions(root) == count
    assert [a for v in client.search_model_versions("name='fund-evaluator'") for a in v.aliases] == champion
