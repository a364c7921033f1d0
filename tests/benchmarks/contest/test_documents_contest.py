"""benchmarks/contest/documents_contest.py: kept runs are collected into per-fund tables, the page is
computed from what was collected (the runs may be gone), and served − text baseline's interval draws
funds whole, not share classes one by one."""

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks.contest import documents_contest as contest


def fake_run(root, seed: int, served_right: int) -> None:
    """A finished run's files the contest reads: 30 funds of two share classes with the same grades; the
    text baseline right on the first 20 funds (and on the two after them graded 3, its guess), the served
    model on the first `served_right`."""
    rows, facts = [], []
    for f in range(30):
        expert = 1 + f % 5
        facts.append({"fund_id": f"F{f:02}", "company": "C", "people": -1 if f < 10 else 0, "process": 0,
                      "parent": 0, "events": "", "manager_change_month": -1, "heldout": f % 3 == 0})  # fmt: skip
        for s in range(2):
            rows.append(
                {"share_class_id": f"F{f:02}-{s}", "fund_id": f"F{f:02}", "expert_grade": expert,
                 "category": "Korea Equity" if f < 6 else "Global Equity",
                 "grpo_grade": expert if f < served_right else 1 + (expert % 5),
                 "grpo_alone_grade": None, "sft_served_grade": expert, "gbm_rule_grade": expert if f < 20 else 3,
                 "rule_grade": 3}
            )  # fmt: skip
    (root / "reports/backtest").mkdir(parents=True)
    (root / "data/raw/synthetic").mkdir(parents=True)
    (root / "metrics").mkdir()
    (root / "reports/backtest/predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pd.DataFrame(facts).to_csv(root / "data/raw/synthetic/qualitative.csv", index=False)
    pillars = {"verified": 1.0, "pertinent": 0.5, "covered": 1.0, "agree": 0.7, "by_criterion": {}}
    backtest = {"test_fingerprint": "abc", "models": {"grpo": {"served": {"chosen": "gbm/score/expected"},
                "pillars": pillars}, "sft": {"pillars": pillars}}}  # fmt: skip
    (root / "metrics/backtest.json").write_text(json.dumps(backtest))
    (root / "bench.json").write_text(json.dumps({"seed": seed, "profiles": ["documents"], "total_seconds": 60}))


def test_collected_runs_give_the_page_without_the_runs_and_draw_funds_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(contest, "RESULTS", tmp_path / "results")
    runs = [tmp_path / f"run{seed}" for seed in (1, 2)]
    for seed, run in zip((1, 2), runs):
        fake_run(run, seed, served_right=24 + seed)
        contest.collect(run, "documents")
        # the collected table keeps what the page needs, the flags read from the hidden facts
        kept = pd.read_csv(contest.RESULTS / "documents" / f"seed-{seed}" / "per_fund.csv")
        assert len(kept) == 60 and kept["touched"].sum() == 20 and kept["heldout_phrasing"].sum() == 20
    for run in runs:  # the runs are gone: the page comes from what was collected
        for f in run.rglob("*"):
            if f.is_file():
                f.unlink()
    result = contest.report("documents", draws=100)
    assert result["seeds"] == [1, 2] and result["served"] == ["gbm/score/expected"] * 2
    every = result["subsets"]["all"]
    assert (every["n"], every["funds"], every["runs"]) == (60, 30, 2)
    assert every["text_baseline"]["exact"]["mean"] == pytest.approx(22 / 30, abs=1e-3)
    assert every["served"]["exact"]["range"] == [pytest.approx(25 / 30, abs=1e-3), pytest.approx(26 / 30, abs=1e-3)]
    assert result["subsets"]["korean"]["n"] == 12
    gap = every["served_minus_text_qwk"]
    assert gap["interval"][0] <= gap["mean"] <= gap["interval"][1]
    page = contest.page(result)
    assert "## all test funds (60 share classes of 30 funds)" in page
    assert "funds with their share classes together" in page and "from the seeds" in page


def test_drawing_funds_whole_widens_the_interval_when_share_classes_agree():
    """The same 60 share classes, each fund's two identical: drawn as 60 independent rows, the
    interval is narrower by about √2 than drawn as the 30 funds they are."""
    right = np.repeat(np.arange(30) < 20, 2).astype(float)

    def share(rows, runs):
        return float(right[rows].mean())

    by_fund = contest.interval(share, np.repeat(np.arange(30), 2), 1, np.random.default_rng(0))
    by_row = contest.interval(share, np.arange(60), 1, np.random.default_rng(0))
    width = {k: d["interval"][1] - d["interval"][0] for k, d in (("fund", by_fund), ("row", by_row))}
    assert by_fund["mean"] == by_row["mean"] == pytest.approx(2 / 3, abs=1e-4)
    assert 1.2 < width["fund"] / width["row"] < 1.7


def test_scarce_references_are_collected_and_their_page_drawn_without_the_runs(tmp_path, monkeypatch):
    """scarce_references.py: two runs of 12 funds (two share classes each) collected, the runs removed, the
    page drawn from the per-fund tables: GRPO writes the expert's grade and judges the people pillar as the
    analysts did on every fund, citing their sentence; SFT writes a grade one off and judges it the other way."""
    from benchmarks.contest import scarce_references as scarce
    from fundgrpo.methodology.records import PromptRecord, write

    monkeypatch.setattr(scarce, "DATASET", tmp_path / "results")
    documents = json.dumps({"D1": "Calm. The lead manager resigned."})
    pillars = json.dumps({"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]}})
    records, lines = [], []
    for i in range(24):
        sid, fund, expert = f"S{i:02}", f"F{i // 2:02}", 1 + (i // 2) % 5
        records.append(PromptRecord.example(share_class_id=sid, fund_id=fund, documents=documents, pillars=pillars))
        analysts, other = [{"document": 1, "sentence": 2}], [{"document": 1, "sentence": 1}]
        said = {"grade": expert, "pillars": {"people": {"judgement": -1, "evidence": analysts}}}
        wrong = {"grade": 1 + expert % 5, "pillars": {"people": {"judgement": 1, "evidence": other}}}
        lines.append({"share_class_id": sid, "fund_id": fund, "expert_grade": expert, "grpo_text": json.dumps(said),
                      "sft_text": json.dumps(wrong), "grpo_grade": 3, "sft_served_grade": 3})  # fmt: skip
    runs = [tmp_path / f"run{seed}" for seed in (1, 2)]
    for seed, run in zip((1, 2), runs):
        for folder in ("reports/backtest", "data/prepared", "metrics", "models"):
            (run / folder).mkdir(parents=True)
        (run / "reports/backtest/predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        write(records, run / "data/prepared/test.jsonl")
        kept = {"kept": "step 10", "steps": 20, "start_value": 0.2, "best_value": 0.4}
        (run / "metrics/grpo.json").write_text(json.dumps(kept))
        fit = {"chosen": "gbm/score/likeliest", "sft": {"chosen": "gbm/score/likeliest"}}
        (run / "models/calibration.json").write_text(json.dumps(fit))
        (run / "bench.json").write_text(json.dumps({"seed": seed}))
        scarce.collect(run)
    for run in runs:
        for f in run.rglob("*"):
            if f.is_file():
                f.unlink()
    result = scarce.report()
    assert (result["runs"], result["funds"], result["seeds"]) == (2, 24, [1, 2])
    agree = result["figures"]["agree"]
    assert agree["grpo"] == [1.0, 1.0] and agree["sft"] == [0.0, 0.0]
    assert agree["grpo_minus_sft"] == {"mean": 1.0, "interval": [1.0, 1.0]}
    written = result["figures"]["written"]
    assert written["grpo"] == [1.0, 1.0] and written["grpo_minus_sft"]["interval"][0] > 0
    page = scarce.page(result)
    assert "| pillars judged as the analysts did | 1.0 / 1.0 | 0.0 / 0.0 | +1.0000 [+1.0000, +1.0000] |" in page
    assert "- seed 2: step 10 of 20 (0.2 → 0.4); calibrate served gbm/score/likeliest" in page


@pytest.mark.research
@pytest.mark.parametrize("label", ["", "ko", "confirm", "smollm2"])
def test_the_committed_documents_pages_are_what_the_collected_runs_generate(label):
    page = contest.PAGE.with_name(f"documents-{label}.md") if label else contest.PAGE
    drawn = contest.page(contest.report(f"documents-{label}" if label else "documents"))
    assert drawn == page.read_text(encoding="utf-8"), f"run `benchmarks/contest/documents_contest.py --label {label}`"


@pytest.mark.research
def test_the_committed_scarce_references_page_is_what_the_collected_runs_generate():
    from benchmarks.contest import scarce_references as scarce

    assert scarce.page(scarce.report()) == scarce.PAGE.read_text(encoding="utf-8"), (
        "run `python benchmarks/contest/scarce_references.py`"
    )
