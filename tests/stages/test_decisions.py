"""Analysts' decisions become labels: the `decisions` stage exports the API store's latest decision per
share class into a DVC-tracked table; `evidence` and `prepare` take each as that share class's expert
grade with its provenance; the fund stays in its split; `dvc repro` reruns from the decisions only
when they change. Real SQLite store (the API's), real DVC in a temp git repo (tiny profile)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from fundgrpo.data import analyst_labels
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.serving.api.store import Store
from tests.support import REPO, run, workspace_copy


def ran(stdout: str) -> set[str]:
    return {line.split("'")[1] for line in stdout.splitlines() if line.startswith("Running stage")}


def records(root: Path, apart: bool = False) -> dict[str, tuple[str, PromptRecord]]:
    """The prepared records by share class, with their split; `apart`: the labelled funds the methodology
    does not rate (too little data: `not_rated.jsonl`), each with the split it would have."""
    out = {}
    for name in ("train", "validation", "test", *(["not_rated"] if apart else [])):
        for r in PromptRecord.read(root / f"data/prepared/{name}.jsonl"):
            assert name in (r.split, "not_rated")  # each split's file holds its funds
            out[r.share_class_id] = (r.split, r)
    return out


def test_decisions_become_labels_and_rerun_only_when_they_change(trained, tmp_path: Path) -> None:
    root = workspace_copy(trained[0], tmp_path / "repo")  # the trained tiny repo: no store, no decision yet
    dvc = [sys.executable, "-m", "dvc", "repro", "prepare"]
    first = run(dvc, root, timeout=600)
    assert ran(first.stdout) == {"decisions"}, first.stdout
    assert "decisions: 0 share class(es)" in first.stdout
    assert not (root / "evaluations.db").exists()  # reading no store made none
    before = records(root)
    evidence = {f.name: f.read_bytes() for f in sorted((root / "data/evidence").iterdir())}
    assert {r.label_source for _, r in before.values()} == {"export"}

    # an analyst regrades one test fund and one unlabelled fund through the API's store
    funds = pd.read_parquet(root / "data/validated/funds.parquet")
    test_id = next(i for i, (split, _) in before.items() if split == "test")
    unlabelled = funds.loc[funds["expert_grade"].isna(), "share_class_id"].astype(str)
    new_grade = 1 if before[test_id][1].expert_grade != 1 else 5
    store = Store(f"sqlite:///{root}/evaluations.db")
    for sid in [test_id, *unlabelled[:1]]:
        store.add([{"share_class_id": sid, "grade": 3}], "models:/fund-evaluator/1")
    first_decision = store.decide(store.latest(test_id), 3, "first look", "ana", None)
    store.decide(store.latest(test_id), new_grade, "the cost is the peers' worst", "ana", first_decision["id"])
    if len(unlabelled):
        store.decide(store.latest(unlabelled.iloc[0]), 4, "rated by hand", "ben", None)

    second = run(dvc, root, timeout=600)
    assert {"decisions", "evidence", "prepare"} <= ran(second.stdout) and "ingest" not in ran(second.stdout)
    table = analyst_labels.read(root / "data/decisions/decisions.csv")
    assert table.loc[table["share_class_id"] == test_id, "grade"].tolist() == [new_grade]  # the latest wins
    after = records(root)
    split, rec = after[test_id]
    assert split == "test" and rec.expert_grade == new_grade  # the fund keeps its split, its label changes
    assert rec.label_source == "analyst" and rec.label_decision_id == first_decision["id"] + 1
    assert {k: s for k, (s, _) in after.items() if k in before} == {k: s for k, (s, _) in before.items()}
    if len(unlabelled):  # a decision labels an unrated fund; with too little data it is counted apart
        assert records(root, apart=True)[unlabelled.iloc[0]][1].expert_grade == 4
    summary = json.loads((root / "metrics/prepare.json").read_text())
    assert summary["analyst_labels"] == 1 + int(len(unlabelled) > 0)

    third = run(dvc, root, timeout=600)  # nothing decided since: the table is the same, nothing reruns
    assert ran(third.stdout) == {"decisions"}, third.stdout

    # the decisions gone again: the labels, and the evidence byte for byte, are those of the first run
    # (a wall time in an output once made every later stage rerun after such a round trip)
    # the store gone: the stage refuses to drop the labels it exported (the table is kept) ...
    (root / "evaluations.db").unlink()
    table_file = root / "data/decisions/decisions.csv"
    kept = table_file.read_bytes()
    refused = run(dvc, root, timeout=600, check=False)
    assert refused.returncode != 0, refused.stdout
    said = refused.stdout + refused.stderr
    assert f"holds {len(table)} decision(s) the store at sqlite:///" in said and "remove the table" in said
    assert table_file.read_bytes() == kept
    # ... until the table is removed, by hand: starting over from the store as it is
    table_file.unlink()
    run(dvc, root, timeout=600)
    assert records(root) == before
    assert {f.name: f.read_bytes() for f in sorted((root / "data/evidence").iterdir())} == evidence


def test_a_decided_grade_outside_the_methodology_is_named(tmp_path: Path) -> None:
    funds = pd.DataFrame({"share_class_id": ["A", "B"], "expert_grade": [3, 2]})
    table = pd.DataFrame({"share_class_id": ["A", "B"], "grade": [2, 7], "decision_id": [1, 2]})
    with pytest.raises(Exception, match=r"decisions.csv: line 3, share class 'B': grade 7 is not a grade"):
        analyst_labels.apply(funds, table, [1, 2, 3, 4, 5], "data/decisions/decisions.csv")


def test_an_unreachable_store_is_named_without_its_password(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"store at postgresql\+psycopg://fund:\*\*\*@127.0.0.1:9/x is unreachable"):
        analyst_labels.export("postgresql+psycopg://fund:secret@127.0.0.1:9/x")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_store_set_only_in_params_is_the_one_the_api_writes_and_the_stage_reads(
    backend, trained, tmp_path, monkeypatch, request
):
    """`decisions.store_url` in params.yaml, no FUNDGRPO_DB_URL: the API records a decision there
    and the `decisions` stage exports it; pointed at another store, the stage refuses to wipe the
    exported labels (it once rewrote the table with its header only) and keeps the table."""
    import yaml
    from fastapi.testclient import TestClient

    from fundgrpo.serving.api.app import create_app
    from fundgrpo.serving.api.keys import add_key
    from fundgrpo.serving.api.settings import ApiSettings
    from tests.fundgrpo.serving.test_api import fund, workspace_view

    monkeypatch.delenv("FUNDGRPO_DB_URL", raising=False)
    root, _ = trained
    view = workspace_view(root, tmp_path / "ws", own=("params.yaml",))
    # SQLite by a path relative to the workspace, as a user writes it; PostgreSQL over TCP
    url = "sqlite:///analysts.db" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    params = yaml.safe_load((view / "params.yaml").read_text(encoding="utf-8"))
    params["decisions"]["store_url"] = url
    (view / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")
    keys = tmp_path / "keys.json"
    key = add_key(keys, "ana", ["read", "evaluate", "review"])
    settings = ApiSettings.from_env({"FUNDGRPO_API_KEYS": str(keys), "FUNDGRPO_API_MODEL": str(root / "models/policy")})
    assert settings.db_url == ""  # nothing in the environment: params.yaml decides
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    sid = f"PARAMS-{backend}"
    with TestClient(create_app(view, settings)) as app:
        h = {"X-API-Key": key}
        done = app.post("/v1/evaluations", json={"funds": [fund(reference, 0, share_class_id=sid)]}, headers=h)
        assert done.status_code == 200, done.text
        decided = app.post("/v1/decisions", json={"share_class_id": sid, "grade": 2, "reason": "fees"}, headers=h)
        assert decided.status_code == 201, decided.text
    store = analyst_labels.store_url(url, view)
    if backend == "sqlite":  # under the workspace, not the API's old default store
        assert (view / "analysts.db").exists()
        assert not (root / "evaluations.db").exists() or Store(f"sqlite:///{root}/evaluations.db").latest(sid) is None
    assert Store(store).latest_decision(sid)["id"] == decided.json()["id"]

    # the stage, in a workspace of its own with the same setting, exports that decision
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    params["decisions"]["store_url"] = store  # the same store (SQLite: its absolute path)
    (stage_dir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), "utf-8")
    env = {"PYTHONPATH": str(REPO)}
    out = run([sys.executable, "-m", "stages.decisions"], stage_dir, env=env)
    table_file = stage_dir / "data/decisions/decisions.csv"
    table = analyst_labels.read(table_file)
    assert table.loc[table["share_class_id"] == sid, "grade"].tolist() == [2] and "decided by" in out.stdout
    kept = table_file.read_bytes()

    # pointed at another (empty) store: refused, named, the table kept byte for byte
    params["decisions"]["store_url"] = f"sqlite:///{tmp_path}/other.db"
    (stage_dir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), "utf-8")
    refused = run([sys.executable, "-m", "stages.decisions"], stage_dir, env=env, check=False)
    assert refused.returncode == 1
    said = refused.stdout + refused.stderr
    assert f"holds {len(table)} decision(s) the store at sqlite:///{tmp_path}/other.db does not" in said
    assert "decisions.store_url" in said and table_file.read_bytes() == kept


def test_a_table_that_cannot_be_read_is_kept_and_named(tmp_path: Path) -> None:
    table = tmp_path / "decisions.csv"
    table.write_text("share_class_id,grade\nA,3\n")  # edited by hand: columns gone
    with pytest.raises(Exception, match=r"decisions.csv cannot be read as the decisions table .*it is kept"):
        analyst_labels.check_nothing_lost(table, f"sqlite:///{tmp_path}/none.db")
    assert table.read_text() == "share_class_id,grade\nA,3\n"
