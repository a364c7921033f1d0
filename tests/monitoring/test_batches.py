"""Batches: the ingest stage lays accepted ones over the source; files are moved, never deleted;
DVC copes with the batches folder absent or empty."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from fundgrpo.data import ingestion as ingest
from fundgrpo.params import IngestParams, MonitorParams
from monitoring import batches
from tests.support import run

SOURCE = "share_class_id,fund_id,category,return_1y,expert_grade\nA,F1,Bonds,1.0,3\nB,F2,Bonds,2.0,4\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_ingest_lays_batches_over_the_source_newest_wins(tmp_path):
    write(tmp_path / "src.csv", SOURCE)
    params = IngestParams(source="table", path="src.csv", batches_dir="data/batches")
    assert ingest.run(params, tmp_path)[0]["return_1y"].tolist() == [1.0, 2.0]  # no folder: the source alone
    (tmp_path / "data/batches").mkdir(parents=True)
    assert ingest.run(params, tmp_path)[0]["return_1y"].tolist() == [1.0, 2.0]  # empty folder: the same
    old = pd.DataFrame(
        {
            "share_class_id": ["B", "C"],
            "fund_id": ["F2", "F3"],
            "category": ["Bonds"] * 2,
            "return_1y": [5.0, 6.0],
            "as_of": "2025-01",
        }
    )
    new = pd.DataFrame(
        {"share_class_id": ["B"], "fund_id": ["F2"], "category": ["Bonds"], "return_1y": [7.0], "as_of": "2025-02"}
    )
    batches.accept(old, "batch-2025-01", tmp_path / "data/batches")
    batches.accept(new, "batch-2025-02", tmp_path / "data/batches")
    table, report = ingest.run(params, tmp_path)
    table = table.set_index("share_class_id")
    assert table["return_1y"].to_dict() == {"A": 1.0, "B": 7.0, "C": 6.0}
    assert table.loc["B", "as_of"] == "2025-02" and pd.isna(table.loc["A", "as_of"])
    assert report.batches == 2 and "(source + 2 accepted batch(es))" in ingest.summary(table.reset_index(), report)
    assert list(table.columns)[:4] == [
        "fund_id",
        "category",
        "return_1y",
        "expert_grade",
    ]  # canonical order, extras last
    assert ingest.run(IngestParams(source="table", path="src.csv", batches_dir=""), tmp_path)[0].shape[0] == 2


def test_load_keeps_as_of_and_applies_the_column_map(tmp_path):
    path = write(tmp_path / "in" / "batch-2025-06.csv", "Code,Peer,Ret1Y,as_of\nX1,Bonds,1.5,2025-06\n")
    params = IngestParams(column_map={"share_class_id": "Code", "category": "Peer", "return_1y": "Ret1Y"})
    table, _ = batches.load(path, params)
    assert table.to_dict("records") == [
        {"share_class_id": "X1", "fund_id": "X1", "category": "Bonds", "return_1y": 1.5, "as_of": "2025-06"}
    ]
    with pytest.raises(ingest.IngestError, match="file is empty"):
        batches.load(write(tmp_path / "in" / "empty.csv", ""), params)


def test_load_drops_exact_duplicates_before_carrying_as_of(tmp_path):
    text = "Code,Peer,Ret1Y,as_of\nX1,Bonds,1.5,2025-06\nX1,Bonds,1.5,2025-06\nX2,Bonds,2.0,2025-07\n"
    path = write(tmp_path / "in" / "batch-2025-07.csv", text)
    mapping = {"share_class_id": "Code", "category": "Peer", "return_1y": "Ret1Y"}
    table, report = batches.load(path, IngestParams(column_map=mapping, drop_duplicate_rows=True))
    assert report.duplicates_dropped == {"rows": 1, "first": [2]}
    assert table[["share_class_id", "as_of"]].to_dict("records") == [
        {"share_class_id": "X1", "as_of": "2025-06"},
        {"share_class_id": "X2", "as_of": "2025-07"},
    ]


def test_incoming_quarantine_and_archive_move_never_delete(tmp_path):
    monitor = MonitorParams()
    a = write(tmp_path / monitor.incoming_dir / "batch-2025-06.csv", "x\n1\n")
    b = write(tmp_path / monitor.incoming_dir / "batch-2025-07.parquet", "x")
    write(tmp_path / monitor.incoming_dir / ".gitignore", "*\n")
    write(tmp_path / monitor.incoming_dir / "notes.txt", "not a batch")
    assert batches.incoming(monitor, tmp_path) == [a, b]
    report = write(tmp_path / "reports" / "validation" / "summary.json", "{}").parent
    dest = batches.quarantine(a, report, "failed validation: x", monitor, tmp_path, "2025-07-01")
    assert dest == tmp_path / monitor.quarantine_dir / "2025-07-01" / "batch-2025-06"
    assert (dest / "batch-2025-06.csv").read_text() == "x\n1\n" and (dest / "validation" / "summary.json").exists()
    assert (dest / "reason.txt").read_text() == "failed validation: x\n"
    first = batches.archive(b, monitor, tmp_path, "2025-07-01")
    again = batches.archive(write(b, "y"), monitor, tmp_path, "2025-07-01")  # the same name twice in a day
    assert first.read_text() == "x" and again.read_text() == "y" and first != again
    assert batches.incoming(monitor, tmp_path) == []


def test_dvc_accepts_the_batches_folder_empty_or_absent(trained):
    root, _ = trained  # its first repro started with no data/ folder at all
    dvc = [sys.executable, "-m", "dvc"]
    # no batch yet: the folder holds only its listing (an empty folder made DVC warn at every run)
    assert [p.name for p in (root / "data/batches").iterdir()] == [batches.LISTING]
    assert "up to date" in run([*dvc, "status", "batches", "ingest"], root).stdout
    shutil.rmtree(root / "data/batches")
    done = run([*dvc, "repro", "--single-item", "batches"], root)
    assert "0 accepted batch(es)" in done.stdout and (root / "data/batches").is_dir()
    assert "is empty" not in done.stdout + done.stderr
    assert "up to date" in run([*dvc, "status", "ingest"], root).stdout  # same (empty) content: nothing downstream


def test_a_batch_numbered_by_row_is_refused_not_laid_over_other_funds(tmp_path):
    """`ingest.share_class_id_generate` numbers a file's rows: a batch's "row-1" is not the universe's, and
    accepted it would replace that other fund's row. It cannot be read, naming the settings that give stable ids."""
    from fundgrpo.data.reading import IngestError

    path = write(tmp_path / "batch-2025-06.csv", "Name,category,return_1y\nAlpha,Bonds,1.0\nBeta,Bonds,2.0\n")
    numbered = IngestParams(source="table", path="src.csv", share_class_id_generate=True)
    with pytest.raises(IngestError, match="ingest.share_class_id_generate numbers share classes by data row"):
        batches.load(path, numbered)
    named = IngestParams(source="table", path="src.csv", share_class_id_from=("Name",))
    assert batches.load(path, named)[0]["share_class_id"].tolist() == ["Alpha", "Beta"]
