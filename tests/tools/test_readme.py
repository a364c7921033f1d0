"""The README is short and its figures are what metrics/ and benchmarks/results/ say."""

from tests.support import REPO
from tools import readme


def test_readme_results_are_generated_and_current():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.render(text) == text, "README.md is out of date: run `python tools/readme.py`"
    assert "| rule scorer |" in readme.block()  # the block is really filled from metrics/backtest.json


def test_readme_is_under_200_lines():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) < 200
