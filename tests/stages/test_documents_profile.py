"""The synthetic universe with documents, through DVC: `dvc repro baseline` on the tiny profile with
`documents` laid over it generates documents and the analysts' judgements, checks them at ingest, fits
the text baseline as the evidence, and prepares prompts that show the documents and references that
cite them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from fundgrpo.io import copy_project
from fundgrpo.methodology import citations, compiler
from fundgrpo.methodology.records import PromptRecord
from tests.support import REPO, run


def test_documents_profile_runs_to_the_baseline(tmp_path: Path) -> None:
    root = copy_project(REPO, tmp_path / "repo")
    run(["git", "init", "-q"], root)
    run([sys.executable, "-m", "fundgrpo.profiles", "apply", "tiny", "documents"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "documents"], root)
    done = run([sys.executable, "-m", "dvc", "repro", "baseline"], root, timeout=600)
    assert "documents -> data/raw/synthetic" in done.stdout

    docs = pd.read_parquet(root / "data/canonical/documents.parquet")
    judged = pd.read_parquet(root / "data/canonical/judgements.parquet")
    assert len(docs) > 60 and set(docs["language"]) == {"en", "ko"} and len(judged) > 10
    assert set(judged["document_id"]) <= set(docs["document_id"])
    checked = json.loads((root / "reports/validation/documents/summary.json").read_text(encoding="utf-8"))
    assert checked["success"] and checked["counts"]["rows"] == len(docs)  # the documents' GX suite ran and passed
    meta = json.loads((root / "data/evidence/meta.json").read_text(encoding="utf-8"))
    assert meta["inputs"] == "numbers and documents"

    m = compiler.load_methodology(root / "data/schema")
    ids = tuple(q.id for q in m.qualitative)
    rows = PromptRecord.read(root / "data/prepared/train.jsonl")
    assert all(r.documents is not None and r.pillars is not None for r in rows)
    shown = [r for r in rows if r.documents != "{}"]
    assert len(shown) == len(rows)  # every synthetic fund has at least a commentary
    assert all("Documents, newest first" in r.prompt[-1]["content"] for r in shown)
    for r in rows:  # every reference citation is verified against what its prompt showed
        answer = json.loads(r.reference)
        assert citations.reward(answer["pillars"], json.loads(r.documents), ids) == 1.0
    judged_rows = [r for r in rows if any(p["judgement"] != "not assessed" for p in json.loads(r.pillars).values())]
    assert len(judged_rows) > len(rows) / 3

    again = run([sys.executable, "-m", "dvc", "repro", "baseline"], root, timeout=600).stdout
    assert "didn't change, skipping" in again and "Running stage 'ingest'" not in again
