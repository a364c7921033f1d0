"""research/pretrained.md is generated: regenerating it from the collected runs gives the
committed page, so no figure in it is hand-edited or stale."""

import runpy

import pytest

from tests.support import REPO

BENCH = REPO / "benchmarks" / "contest"


@pytest.mark.research
def test_the_committed_page_is_what_the_collected_runs_generate():
    report = runpy.run_path(str(BENCH / "pretrained_report.py"))["report"]
    page = report() + "\n"
    assert "## morningstar" in page and "## synthetic" in page and "## synthetic-ko" in page
    assert page == (REPO / "research" / "pretrained.md").read_text(encoding="utf-8"), (
        "run `python benchmarks/contest/pretrained_report.py report`"
    )
