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
from fundgrpo.serving.api.store import Store
from tests.support import run, tiny_copy


def ran(stdout: str) -> set[str]:
    return {line.split("'")[1] for line in stdout.splitlines() if line.startswith("Running stage")}


def records(root: Path) -> dict[str, tuple[str, dict]]:
    out = {}
    for split in ("train", "validation", "test"):
        for line in (root / f"data/prepared/{split}.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            out[r["share_class_id"]] = (split, r)
    return out


def test_decisions_become_labels_and_rerun_only_when_they_change(tmp_path: Path) -> None:
    root = tiny_copy(tmp_path / "repo")
    dvc = [sys.executable, "-m", "dvc", "repro", "prepare"]
    first = run(dvc, root, timeout=600)
    assert {"decisions", "evidence", "prepare"} <= ran(first.stdout)
    assert "decisions: 0 share class(es)" in first.stdout
    assert not (root / "evaluations.db").exists()  # reading no store made none
    before = records(root)
    evidence = {f.name: f.read_bytes() for f in sorted((root / "data/evidence").iterdir())}
    assert {r["label_source"] for _, r in before.values()} == {"export"}

    # an analyst regrades one test fund and one unlabelled fund through the API's store
    funds = pd.read_parquet(root / "data/validated/funds.parquet")
    test_id = next(i for i, (split, _) in before.items() if split == "test")
    unlabelled = funds.loc[funds["expert_grade"].isna(), "share_class_id"].astype(str)
    new_grade = 1 if before[test_id][1]["expert_grade"] != 1 else 5
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
    assert split == "test" and rec["expert_grade"] == new_grade  # the fund keeps its split, its label changes
    assert rec["label_source"] == "analyst" and rec["label_decision_id"] == first_decision["id"] + 1
    assert {k: s for k, (s, _) in after.items() if k in before} == {k: s for k, (s, _) in before.items()}
    if len(unlabelled):
        assert after[unlabelled.iloc[0]][1]["expert_grade"] == 4  # a decision labels an unrated fund
    summary = json.loads((root / "metrics/prepare.json").read_text())
    assert summary["analyst_labels"] == 1 + int(len(unlabelled) > 0)

    third = run(dvc, root, timeout=600)  # nothing decided since: the table is the same, nothing reruns
    assert ran(third.stdout) == {"decisions"}, third.stdout

    # the decisions gone again: the labels, and the evidence byte for byte, are those of the first run
    # (a wall time in an output once made every later stage rerun after such a round trip)
    (root / "evaluations.db").unlink()
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
