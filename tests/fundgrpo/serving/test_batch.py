"""Batch scoring (`python -m fundgrpo.serving.batch`) on the session's trained tiny repo: a CSV of new
funds scored by the registered model, a single fund placed among the reference peers, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fundgrpo import profiles
from fundgrpo.data import synthetic
from fundgrpo.io import write_json
from fundgrpo.methodology import compiler
from fundgrpo.methodology.citations import NO_DOCUMENTS
from tests import support
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
        "reason",
        "confidence",
        "expected_grade",
        "needs_analyst",
        "review",
        "flags",
        "rule_grade",
        "gbm_grade",
        "gbm_confidence",
        "expert_grade",
        "seen_in_training",
        "model",
        "grade_note",
        "serves",
        "lm_weight",
        "written_grade",
        "as_of",
        "evaluated_at",
        *(f"p_{g}" for g in range(1, 6)),
    } <= set(out.columns)
    raw = pd.read_csv(tmp_path / "out/evaluations.csv", dtype=str)  # as a reader of the CSV sees it
    for column in ("grade", "rule_grade", "gbm_grade"):
        assert not raw[column].dropna().str.contains(".", regex=False).any(), raw[column]  # 3, never 3.0
    assert out["evaluated_at"].nunique() == 1 and pd.Timestamp(out["evaluated_at"].iloc[0]).tzinfo is not None
    assert not out["seen_in_training"].any()
    # what each grade is: calibrate's choice, the same on every row, and the grade the model wrote
    assert out["serves"].nunique() == 1 and out["serves"].iloc[0] in ("lm", "gbm", "stack")
    assert out["lm_weight"].between(0, 1).all()
    assert (out.loc[out["valid"].astype(bool), "written_grade"].between(1, 5)).all()
    valid = out["valid"].astype(bool)
    # an invalid answer carries no grade, no probabilities, and says why; it always needs an analyst
    assert out.loc[valid, "grade"].between(1, 5).all() and out.loc[~valid, "grade"].isna().all()
    assert out.loc[~valid, "reason"].notna().all() and out.loc[~valid, "needs_analyst"].all()
    assert out.loc[~valid, "flags"].str.contains("invalid answer").all()
    probs = out.loc[valid, [f"p_{g}" for g in range(1, 6)]]
    assert ((probs.sum(axis=1) - 1).abs() < 1e-3).all()
    assert (out.loc[valid, "confidence"] <= probs.max(axis=1) + 1e-9).all()
    # the review queue's rule: every one of these share classes is new to the universe; the unsure say so too
    assert out["needs_analyst"].all() and out["review"].str.contains("new to the universe").all()
    unsure = valid & (out["confidence"] < 0.5)
    assert out.loc[unsure, "review"].str.contains("below 0.50").all()
    assert not out.loc[valid & ~unsure, "review"].str.contains("below 0.50").any()
    assert out["rule_grade"].between(1, 5).all() and out["gbm_grade"].between(1, 5).all()
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

    methodology, _ = load_compiled(root / "data/schema")
    records = prompt_records(with_reference(one, reference), methodology, load_params(root / "params.yaml").prepare)
    assert row["share_class_id"] == "NEW-1" and row["rule_grade"] == next(
        r.rule_grade for r in records if r.share_class_id == "NEW-1"
    )


def test_funds_are_evaluated_in_the_precision_generation_dtype_names(trained):
    """`generation.dtype` is the precision of the weights wherever funds are evaluated: in bfloat16 the
    policy answers every fund, its grade probabilities read from the same generation; a precision the
    loader does not know is refused at load, naming the field."""
    import torch

    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.model import modelling
    from fundgrpo.params import GenerationParams, ParamsError, load_params
    from fundgrpo.serving.champion import calibration_of, grade, prompt_records

    root, _ = trained
    p = load_params(root / "params.yaml")
    methodology, schema = load_compiled(root / "data/schema")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    records = prompt_records(reference, methodology, p.prepare, only=reference["share_class_id"].head(6).tolist())
    fit = calibration_of(root / "models/policy", p, root)
    wide = grade(root / "models/policy", records, methodology, schema, p.generation, "float32", fit)
    half = GenerationParams(max_new_tokens=p.generation.max_new_tokens, batch_size=4, dtype="bfloat16")
    narrow = grade(root / "models/policy", records, methodology, schema, half, "bfloat16", fit)
    assert len(narrow) == len(wide) == 6
    for a in narrow:
        assert a.valid is False or len(a.probs) == len(methodology.grades)
    model, _ = modelling.load(root / "models/policy", half.dtype)
    assert {q.dtype for q in model.parameters()} == {torch.bfloat16}
    with pytest.raises(ParamsError, match="generation.dtype"):
        GenerationParams(dtype="int8")


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


# ---------------------------------------------- the fund file itself (no model needed)


def morningstar_params():
    return profiles.load("morningstar", REPO / "params.yaml", REPO / "profiles")


def export_without_10y(path: Path) -> Path:
    """A Morningstar-style export of three unrated share classes that lacks GBRReturnM120 (10-year returns)."""
    ingest = morningstar_params().ingest
    columns = [c for c in ingest.column_map.values() if c != "GBRReturnM120"]
    text = {"SecId": "N{i}", "Name": "New Fund {i}", "CategoryName": "UK Equity", "StarRatingM255": ""}
    lines = [
        ",".join(text.get(c, f"{1 + i * 0.5 + k * 0.1:.2f}").format(i=i) for k, c in enumerate(columns))
        for i in range(3)
    ]
    path.write_text(",".join(columns) + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_mapped_metric_the_file_lacks_is_scored_as_missing(tmp_path):
    """An export without 10-year returns is evaluated: return_10y (and mrar_10y, derived from it)
    are missing for every fund, as for a young fund in training, and named in a warning and per fund."""
    from fundgrpo.methodology import compiler
    from fundgrpo.serving.batch import absent_warning, missing_criteria, read_funds

    funds, report = read_funds(export_without_10y(tmp_path / "new.csv"), morningstar_params())
    assert funds["share_class_id"].tolist() == ["N0", "N1", "N2"]
    assert funds["return_10y"].isna().all() and funds["mrar_10y"].isna().all()
    assert funds["mrar_3y"].notna().all() and funds["mrar_5y"].notna().all()
    assert report.absent == {"return_10y": "GBRReturnM120"}

    methodology = compiler.load(REPO / "methodology/morningstar.yaml")
    warning = absent_warning(funds, report, methodology)
    assert "new.csv has no column 'GBRReturnM120' (ingest.column_map.return_10y)" in warning
    assert "criteria mrar_10y are scored as missing" in warning
    assert missing_criteria(funds, methodology) == ["mrar_10y"] * 3
    # scored as missing: the same scores as without the criterion's column (weights renormalised)
    scored = compiler.rule_score(methodology, funds)
    assert scored.equals(compiler.rule_score(methodology, funds.drop(columns=["mrar_10y"])))


def test_repeated_share_class_ids_in_the_fund_file_name_rows_and_the_fix(tmp_path):
    from dataclasses import replace

    from fundgrpo.serving.batch import EvaluateError, evaluate, read_funds

    path = export_without_10y(tmp_path / "twice.csv")
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, lines[2]]) + "\n", encoding="utf-8")  # N1 again, as data row 4
    params = morningstar_params()
    funds, report = read_funds(path, params)
    with pytest.raises(EvaluateError) as err:  # refused before any model or reference is touched
        evaluate(funds, pd.DataFrame(), tmp_path / "no-model", {}, {}, params, "none", report)
    message = str(err.value)
    assert "twice.csv: share_class_id repeats: 'N1' (data rows 2, 4; counted from 1 after the header)" in message
    assert (
        "data row(s) 4 repeat an earlier row in every column" in message
        and "ingest.drop_duplicate_rows: true" in message
    )
    dropped, report = read_funds(path, replace(params, ingest=replace(params.ingest, drop_duplicate_rows=True)))
    assert dropped["share_class_id"].tolist() == ["N0", "N1", "N2"] and report.duplicates_dropped["rows"] == 1


def test_a_setting_out_of_range_is_one_line_not_a_traceback(tmp_path):
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["evaluate"]["review_below"] = 50  # a percentage where a confidence belongs
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (tmp_path / "funds.csv").write_text("share_class_id,category\nA,X\n", encoding="utf-8")
    done = evaluate(tmp_path, "funds.csv")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "evaluate failed: evaluate.review_below is a confidence, between 0 and 1; got 50" in done.stderr


def test_documents_given_with_a_fund_file_are_checked_and_read(trained, tmp_path):
    """`--documents` under a methodology with pillars: each row's `pillars` holds every criterion, judged from
    the fund's documents or not assessed and why; a fund without documents is never judged; a document naming
    a fund the file lacks fails the run, naming file, row and field, and writes nothing."""
    root = support.workspace_copy(trained[0], tmp_path / "repo")
    for name, obj in compiler.compile_file(REPO / "methodology/documents.yaml").items():
        write_json(obj, root / "data/schema" / f"{name}.json")
    batch = synthetic.later_batch(profiles.load("tiny", REPO / "params.yaml", REPO / "profiles").synthetic, 2).head(2)
    batch = batch.assign(share_class_id="N-" + batch["share_class_id"], fund_id="NF-" + batch["fund_id"])
    batch.drop(columns=["as_of"]).to_csv(tmp_path / "funds.csv", index=False)
    read, bare = batch["share_class_id"].tolist()
    note = "The lead manager resigned in May; her deputy took over the fund."
    docs = pd.DataFrame([{"document_id": "N1", "share_class_id": read, "date": "2022-05-02", "kind": "news",
                          "language": "", "text": note}])  # fmt: skip
    docs.to_csv(tmp_path / "docs.csv", index=False)
    args = [str(tmp_path / "funds.csv"), "--model", "models/policy", "--documents", str(tmp_path / "docs.csv")]

    done = evaluate(root, *args, "--out", str(tmp_path / "out.jsonl"))
    assert done.returncode == 0, done.stderr
    rows = {r["share_class_id"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    pillars = {sid: json.loads(rows[sid]["pillars"]) for sid in (read, bare)}
    assert [p["criterion"] for p in pillars[read]] == ["people", "process", "parent"]
    assert all(p["reason"] != NO_DOCUMENTS for p in pillars[read])
    assert [(p["judgement"], p["reason"]) for p in pillars[bare]] == [("not assessed", NO_DOCUMENTS)] * 3

    docs.assign(share_class_id="NOT-A-FUND").to_csv(tmp_path / "docs.csv", index=False)
    done = evaluate(root, *args, "--out", str(tmp_path / "again.jsonl"))
    assert done.returncode == 1
    assert "docs.csv row 1: field share_class_id: 'NOT-A-FUND' is not in the fund table" in done.stderr
    assert not (tmp_path / "again.jsonl").exists()
