"""Shared by the tests that need a Prefect server or the trained tiny repo.

Both are expensive (a Prefect server starts in ~10 s, a tiny `training` flow run takes
~1.5 min on 2 cores): each is built once per test session, under a file lock, by the first
pytest-xdist worker that asks (the server in a process of its own), and each test module
gets its own copy of it (`workspace_copy`), so no test sees another's changes.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

from fundgrpo.io import copy_project

REPO = Path(__file__).resolve().parents[1]
# Laid over the tiny profile in the copy. return_5y: 48 months cannot give a 5-year return,
# and the default null budget (0.5) would fail validation. The prediction sample keeps the
# champion's grading to one generation batch while staying above monitor.min_rows.
TINY_OVERLAY = {"validate": {"null_budget": {"return_5y": 1.0}}, "monitor": {"prediction_sample": 32}}
GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def run(
    cmd: list[str], cwd: Path, env: dict | None = None, timeout: int = 900, check: bool = True
) -> subprocess.CompletedProcess:
    """`cmd` in `cwd` with this Python's tools on PATH; unless `check` is false, a failure is an AssertionError."""
    env = {**os.environ, **GIT_ID, **(env or {})}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def tiny_copy(dest: Path) -> Path:
    """A git-initialised copy of the repository (no data, models or runs) with the tiny profile applied."""
    from fundgrpo.params import deep_merge

    copy_project(REPO, dest)
    shutil.rmtree(dest / "monitoring" / "reports", ignore_errors=True)
    run(["git", "init", "-q"], dest)
    run([sys.executable, "-m", "fundgrpo.profiles", "apply", "tiny"], dest)
    params = deep_merge(yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8")), TINY_OVERLAY)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")
    run(["git", "add", "-A"], dest)
    run(["git", "commit", "-qm", "tiny"], dest)
    return dest


@contextmanager
def prefect_server(shared: Path | None = None) -> Iterator[str]:
    """A temporary Prefect server for this process's flow runs; yields its API URL.

    With `shared` (a folder every pytest-xdist worker of the session sees), one server for all of
    them: the first worker to ask starts `tests/prefect_server.py` (Prefect's test harness, in a
    process of its own that stops when the session's pytest process exits) under a file lock, and
    every worker points its Prefect settings at it. Without, the harness in this process.
    """
    import prefect.context
    import prefect.settings

    if shared is None:
        from prefect.testing.utilities import prefect_test_harness

        with prefect_test_harness(server_startup_timeout=120):
            yield prefect.settings.PREFECT_API_URL.value()
        return
    url = shared_prefect_url(shared)
    with prefect.settings.temporary_settings(updates={prefect.settings.PREFECT_API_URL: url}):
        # as the harness does: contexts copied before this point see the server too
        with prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
            try:
                yield url
            finally:
                from prefect.events.worker import EventsWorker
                from prefect.logging.handlers import APILogWorker
                from prefect.utilities.asyncutils import run_coro_as_sync

                async def drain() -> None:  # this worker's logs and events reach the server first (as the harness)
                    try:
                        result = APILogWorker.instance().drain()
                        if inspect.isawaitable(result):
                            await result
                    except RuntimeError:  # the log worker never started
                        pass
                    result = EventsWorker.drain_all()
                    if inspect.isawaitable(result):
                        await result

                run_coro_as_sync(drain())


def shared_prefect_url(shared: Path, timeout_s: float = 180.0) -> str:
    """The API URL of the session's one Prefect server, started here if no worker has yet."""
    from filelock import FileLock

    url_file, log = shared / "prefect-server.url", shared / "prefect-server.log"
    with FileLock(str(shared / "prefect-server.lock")):
        if not url_file.exists():
            with log.open("w") as out:
                server = subprocess.Popen(
                    [sys.executable, "-m", "tests.prefect_server", str(url_file), str(os.getppid())],
                    cwd=REPO,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # outlives this worker; watches the session's pytest process
                )
            deadline = time.monotonic() + timeout_s
            while not url_file.exists():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the session's Prefect server did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
    return url_file.read_text(encoding="utf-8").strip()


def trained_repo(shared: Path) -> tuple[Path, dict]:
    """(root, record) of one real `training` flow run on a tiny copy, built once per test session in
    `shared` (a folder every pytest-xdist worker sees): the first worker to ask builds it under a
    file lock, the others wait and read it. The record is what the run returned and what Prefect's
    API showed of it (task runs, the gate's artifact), read by the builder from its own server.
    Tests never use this folder directly: `workspace_copy` gives each test module its own copy.

    Needs the Prefect server to be up (the caller's fixture depends on it).
    """
    from filelock import FileLock

    root, done = shared / "repo", shared / "trained.json"
    with FileLock(str(shared / "trained.lock")):
        if not done.exists():
            os.environ.pop("MLFLOW_TRACKING_URI", None)  # the copy's own sqlite store
            from flows.training_flow import training

            shutil.rmtree(root, ignore_errors=True)  # a build that died half way
            tiny_copy(root)
            state = training(root=str(root), retries=0, return_state=True)
            flow_run_id = state.state_details.flow_run_id
            record = {
                "completed": state.is_completed(),
                "message": state.message,
                "result": state.result() if state.is_completed() else None,
                "task_runs": {
                    r.name: {"completed": r.state.is_completed(), "seconds": r.total_run_time.total_seconds()}
                    for r in task_runs(flow_run_id)
                },
                "artifact": artifact(flow_run_id, "training-gate") if state.is_completed() else "",
            }
            done.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    return root, json.loads(done.read_text(encoding="utf-8"))


def workspace_copy(source: Path, dest: Path) -> Path:
    """A copy of a workspace that a test may change freely: every file, with the absolute paths MLflow
    stores (the sqlite registry's artifact locations, each logged model's MLmodel) moved to the copy,
    so the copy's registry reads and writes its own artifacts only."""
    shutil.copytree(source, dest, symlinks=True)
    old, new = str(source), str(dest)
    db = dest / "mlflow.db"
    if db.exists():
        import sqlite3

        with sqlite3.connect(db) as con:
            tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for table in tables:
                for col in con.execute(f'PRAGMA table_info("{table}")').fetchall():
                    name, kind = col[1], col[2].upper()
                    if kind == "TEXT" or kind.startswith("VARCHAR"):
                        sql = f'UPDATE "{table}" SET "{name}" = replace("{name}", ?, ?) WHERE instr("{name}", ?) > 0'
                        con.execute(sql, (old, new, old))
        con.close()
    for mlmodel in (dest / "mlartifacts").rglob("MLmodel"):
        mlmodel.write_text(mlmodel.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return dest


def mlflow_client(root: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")


def promote_by_hand(root: Path, version: int, name: str = "fund-evaluator") -> None:
    """Make `version` the champion as if the gate had promoted it: its run's gate record rewritten,
    then the alias. For tests whose subject is not the gate (the tiny model never beats the rule
    scorer); serving follows `champion` only to a version whose record says the gate promoted it."""
    from fundgrpo.registry import mlflow_registry

    client = mlflow_client(root)
    run_id = client.get_model_version(name, str(version)).run_id
    record = mlflow_registry.GateRecord(str(version), promoted=True, reason="promoted by hand in a test", passed=True)
    client.log_dict(run_id, record.as_dict(), mlflow_registry.GATE_RECORD)
    client.set_registered_model_alias(name, mlflow_registry.CHAMPION, str(version))


def versions(root: Path, name: str = "fund-evaluator") -> list[int]:
    return sorted(int(v.version) for v in mlflow_client(root).search_model_versions(f"name='{name}'"))


def task_runs(flow_run_id, wait_s: float = 60.0) -> list:
    """The task runs of a flow run, from the Prefect API (what the UI shows), once the server has
    recorded them: a flow run's task states reach the server as events, after the flow returns, and on
    a loaded machine later (read at once they can still be missing or not yet final)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    deadline, seen = time.monotonic() + wait_s, -1
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            settled = runs and all(r.state is not None and r.state.is_final() for r in runs) and len(runs) == seen
            if settled or time.monotonic() > deadline:
                return runs
            seen = len(runs)
            time.sleep(0.5)


def artifact(flow_run_id, key: str) -> str:
    """The markdown of the artifact `key` a flow run created (what the UI's Artifacts tab shows)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[key]), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
            )
        )
    assert found, f"flow run {flow_run_id} has no artifact {key!r}"
    return found[-1].data


class Outage:
    """A TCP forwarder in front of a server that goes down when a request containing `trigger`
    arrives: that request is dropped unanswered, every open connection is cut and new ones are
    refused, for `down_s` seconds or, when None, until `restore()`. To a client this is the
    server process dying at that moment (and, after `down_s`, coming back)."""

    def __init__(self, upstream: str, trigger: bytes, down_s: float | None = None):
        host, port = upstream.split("://", 1)[1].rstrip("/").rsplit(":", 1)
        self.upstream, self.trigger, self.down_s = (host, int(port)), trigger, down_s
        self.fired = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.restore()

    def restore(self) -> None:
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", self.port))
        self._server.listen(16)
        self._server.settimeout(0.2)
        threading.Thread(target=self._accept, args=(self._server,), daemon=True).start()

    def close(self) -> None:
        self._server.close()
        self._cut()

    def _accept(self, server: socket.socket) -> None:
        while server.fileno() != -1:
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed: the server is down
            client.settimeout(None)
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._conns |= {client, upstream}
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if requests and self.trigger in data and not self.fired.is_set():
                self.fired.set()
                self._server.close()
                self._cut()
                if self.down_s is not None:
                    threading.Timer(self.down_s, self.restore).start()
                return
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            _shut(s)

    def _cut(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, set()
        for s in conns:
            _shut(s)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


# -- a real browser and servers for the pages' tests (Chromium and its driver from the OS packages)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


# CI installs Chromium (.ci/run sets FUNDGRPO_NEED_BROWSER=1): there a missing browser fails the
# browser tests instead of skipping them; elsewhere they skip with this reason.
NO_BROWSER = "no Chromium: `make browser` (apt-get install chromium chromium-driver fonts-nanum)"


def has_browser() -> bool:
    found = CHROMIUM is not None and DRIVER is not None
    if not found and os.environ.get("FUNDGRPO_NEED_BROWSER") == "1":
        raise RuntimeError(f"FUNDGRPO_NEED_BROWSER=1 but {NO_BROWSER}")
    return found


def serve(app):
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(600):
        if server.started:
            break
        time.sleep(0.1)
    return server, f"http://127.0.0.1:{port}"


def call(base: str, path: str, key: str, body: dict | None = None) -> dict:
    import urllib.request

    req = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"X-API-Key": key, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def browser(size: str = "1400,900"):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={size}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def canonical(row) -> dict:
    """A validated row as the API's fund body: canonical fields only, no expert grade, no NaN."""
    import pandas as pd

    from fundgrpo.data.canonical import COLUMNS

    out = {}
    for c in COLUMNS:
        if c.name not in row.index or c.name == "expert_grade" or pd.isna(row[c.name]):
            continue
        v = row[c.name]
        out[c.name] = v if c.kind in ("id", "text") else float(v)
    return out
