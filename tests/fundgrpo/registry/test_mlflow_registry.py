"""fundgrpo/registry/mlflow_registry.py on a real MLflow store (SQLite in a temp dir): what a registration cut off
half-way leaves, and how the next one finishes it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from fundgrpo.registry import mlflow_registry


@pytest.fixture
def client(tmp_path):
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", registry_uri=f"sqlite:///{tmp_path}/mlflow.db")
    c.create_registered_model("m")
    return c


def version(client, tmp_path, registration: str) -> str:
    return client.create_model_version(
        "m", source=str(tmp_path), tags={mlflow_registry.REGISTRATION: registration}
    ).version


def test_finish_pending_removes_unaliased_versions_and_completes_aliased_ones(client, tmp_path):
    done = version(client, tmp_path, "complete")
    cut_before_alias = version(client, tmp_path, "pending")
    cut_after_alias = version(client, tmp_path, "pending")
    client.set_registered_model_alias("m", mlflow_registry.CHAMPION, cut_after_alias)
    said = []
    mlflow_registry.finish_pending(client, "m", log=said.append)
    left = {v.version: v.tags[mlflow_registry.REGISTRATION] for v in client.search_model_versions("name = 'm'")}
    assert left == {done: "complete", cut_after_alias: "complete"}  # the champion is never deleted
    assert said == [f"removing m v{cut_before_alias}: its registration did not finish (run None)"]


def test_discard_pending_never_deletes_a_version_holding_an_alias(client, tmp_path):
    aliased, bare = version(client, tmp_path, "pending"), version(client, tmp_path, "pending")
    client.set_registered_model_alias("m", mlflow_registry.CHALLENGER, aliased)
    mlflow_registry.discard_pending(client, "m", aliased, log=lambda _: None)
    mlflow_registry.discard_pending(client, "m", bare, log=lambda _: None)
    assert [v.version for v in client.search_model_versions("name = 'm'")] == [aliased]


def test_a_lock_whose_holder_process_is_gone_is_taken_over_at_once(client):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    client.create_registered_model(
        "m.promotion-lock", tags={"holder": f"{socket.gethostname()}:{dead.pid}", "since": str(time.time())}
    )
    said = []
    with mlflow_registry.promotion_lock(
        client, "m", timeout_s=5.0, log=said.append
    ):  # not stale by age: by its dead holder
        pass
    assert said and "its holder is gone" in said[0]
    assert not [m for m in client.search_registered_models() if m.name.endswith(".promotion-lock")]
