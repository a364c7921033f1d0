"""benchmarks/time/make_run.py: the committed page is what its recorded runs generate, and a kept
`benchmarks/time/pipeline.py` run is recorded from its own files."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "time"))
import make_run  # noqa: E402


def test_the_committed_page_is_what_the_recorded_runs_generate():
    if not make_run.RESULTS.exists():
        pytest.skip("no recorded runs")
    assert make_run.report() == make_run.PAGE.read_text(encoding="utf-8"), (
        "run `python benchmarks/time/make_run.py report`"
    )


def test_a_kept_pipeline_run_is_recorded_with_its_stage_seconds(tmp_path, monkeypatch):
    monkeypatch.setattr(make_run, "RESULTS", tmp_path / "results")
    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    (run / "metrics/grpo.json").write_text(json.dumps({"steps": 40}))
    bench = {"stage_seconds": {"sft": 273.0, "grpo": 94.2}, "total_seconds": 540.0, "nproc": 2, "cpu": {"model": "x"}}
    (run / "bench.json").write_text(json.dumps(bench))
    found = json.loads(make_run.add(run, "a run", "abc1234").read_text())
    assert (found["repro_seconds"], found["grpo_steps"], found["setup_seconds"]) == (540.0, 40, None)
    row = next(line for line in make_run.report().splitlines() if line.startswith("| a run |"))
    assert "| abc1234 |  | 540 |  |" in row and "| 273 | 94 |" in row
