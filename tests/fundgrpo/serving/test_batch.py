"""Batch scoring (`python -m fundgrpo.serving.batch`) on the session's trained tiny repo: a CSV of new
funds scored by the registered model, a single fund placed among the reference peers, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from fundgrpo import profiles
from fundgrpo.data import synthetic
from tests.support import REPO


def evaluate(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "fundgrpo.serving.batch", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_csv_of_funds_scored_by_the_registered_model(trained, tmp_path):
    root, _ = trained
    alias = json.loads((root / "metrics/register.json").read_text())["alias"]
    batch = synthetic.later_batch(profiles.load("tiny", REPO / "params.yaml", REPO / "profiles").synthetic, 2).head(12)
    batch = batch.assign(
        share_class_id="N-" + batch["share_class_id"], fund_id="NF-" + batch["fund_id"]
    )  # funds never trained on
    batch.drop(columns=["as_of"]).to_csv(tmp_path / "funds.csv", index=False)  # an export with canonical column names

    done = evaluate(
        root,
        str(tmp_path / "funds.csv"),
        "--model",
        f"models:/fund-evaluator@{alias}",
        "--out",
        str(tmp_path / "out/evaluations.csv"),
    )
    assert done.returncode == 0, done.stderr
    out = pd.read_csv(tmp_path / "out/evaluations.csv")
    assert out["share_class_id"].tolist() == batch["share_class_id"].tolist()
    assert {
        "grade",
        "score",
        "reasoning",
        "valid",
        "rule_grade",
        "gbm_grade",
        "expert_grade",
        "seen_in_training",
        "model",
    } <= set(out.columns)
    assert not out["seen_in_training"].any()
    assert (
        out["grade"].between(1, 5).all()
        and out["rule_grade"].between(1, 5).all()
        and out["gbm_grade"].between(1, 5).all()
    )
    assert (
        out["model"].str.fullmatch(r"models:/fund-evaluator/\d+").all()
    )  # the alias resolved to the version that answered
    metrics = json.loads((tmp_path / "out/evaluations.csv.metrics.json").read_text())  # the file carries expert grades
    assert metrics["n"] == int(batch["expert_grade"].notna().sum()) and set(metrics) >= {"model", "rule", "gbm"}
    assert "vs " in done.stdout and "rule:" in done.stdout


def test_a_single_fund_is_placed_among_the_reference_peers(trained, tmp_path):
    root, _ = trained
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    one = reference.iloc[[0]].assign(share_class_id="NEW-1", fund_id="NEW")
    one.to_parquet(tmp_path / "one.parquet")
    done = evaluate(
        root,
        str(tmp_path / "one.parquet"),
        "--model",
        str(root / "models/policy"),
        "--out",
        str(tmp_path / "one.jsonl"),
    )
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in (tmp_path / "one.jsonl").read_text().splitlines()]
    # its rule grade is the one it gets among the reference's peers (alone, it would have none)
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.params import load_params
    from fundgrpo.serving.batch import with_reference
    from fundgrpo.serving.champion import prompt_records

    rubric, _ = load_compiled(root / "data/schema")
    records = prompt_records(with_reference(one, reference), rubric, load_params(root / "params.yaml").prepare)
    assert row["share_class_id"] == "NEW-1" and row["rule_grade"] == next(
        r["rule_grade"] for r in records if r["share_class_id"] == "NEW-1"
    )


def test_bad_model_and_output_are_named(trained, tmp_path):
    root, _ = trained
    (tmp_path / "f.csv").write_text("share_class_id,category\nA,x\n")
    missing = evaluate(
        root, str(tmp_path / "f.csv"), "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "e.csv")
    )
    assert missing.returncode == 1 and "no such folder" in missing.stderr
    wrong = evaluate(
        root, str(tmp_path / "f.csv"), "--model", str(root / "models/policy"), "--out", str(tmp_path / "e.txt")
    )
    assert wrong.returncode == 1 and "use .parquet, .csv or .jsonl" in wrong.stderr
    assert not (tmp_path / "e.csv").exists() and not (tmp_path / "e.txt").exists()
    # an alias no version carries (a fresh run has no champion until the gate promotes one): what to use instead
    unset = evaluate(
        root, str(tmp_path / "f.csv"), "--model", "models:/fund-evaluator@nobody", "--out", str(tmp_path / "e.csv")
    )
    assert (
        unset.returncode == 1
        and "no version carries the alias 'nobody'" in unset.stderr
        and "models:/fund-evaluator/1" in unset.stderr
    )
