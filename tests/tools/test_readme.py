"""The README is short and its figures are what metrics/ and research/results/ say."""

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.support import REPO
from tools import readme

# What the README's figures are generated from, beside the README itself.
FIGURE_SOURCES = ("README.md", "metrics", "research/results", "methodology")


def committed(repo: Path, dest: Path) -> Path:
    """The committed README and the files its figures come from, extracted from `repo`'s HEAD into `dest`;
    `repo` itself where git has no commit (a source archive). A user's own `make run` rewrites metrics/
    in the workspace: the committed README must agree with what is committed, not with that run."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD", "--", *FIGURE_SOURCES], cwd=repo, capture_output=True
    )
    if archive.returncode != 0:
        return repo
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def test_readme_results_are_generated_and_current(tmp_path):
    root = committed(REPO, tmp_path)
    text = (root / "README.md").read_text(encoding="utf-8")
    assert readme.render(text, root) == text, "README.md is out of date: run `python tools/readme.py` and commit it"
    assert "| rule scorer |" in readme.block(root)  # the block is really filled from metrics/backtest.json


def test_a_pretrained_run_on_documents_gets_its_sentence_with_what_one_run_measures(tmp_path):
    root = committed(REPO, tmp_path)
    results = root / "research" / "results"
    (results / "documents_contest-smollm2.json").unlink(missing_ok=True)
    assert "A pretrained model" not in "".join(readme.documents_line(root))  # not collected: nothing said
    one = json.loads((results / "documents_contest-confirm.json").read_text(encoding="utf-8"))
    one.update(
        runs=1,
        seeds=one["seeds"][:1],
        served=one["served"][:1],
        pillars=one["pillars"][:1],
        profiles=["documents", "smollm2"],
    )
    (results / "documents_contest-smollm2.json").write_text(json.dumps(one), encoding="utf-8")
    line = "".join(readme.documents_line(root))
    assert "A pretrained model (SmolLM2-135M-Instruct, `documents + smollm2`, 1 run on the same test funds" in line
    assert "held out of training +0.001 [-0.0086, 0.0149] (the interval counts the funds alone: one run);" in line
    assert "the policy's citations verified 1.00, pillars judged as the analysts did 0.71 (how far it reads" in line


def test_a_users_own_run_does_not_break_the_readme_check(tmp_path):
    """`make run` then `make test` on a fresh clone: the run's figures differ from the committed ones in the
    last digits (another machine's floating point); the check reads what is committed, so it still holds."""
    clone = tmp_path / "clone"
    if subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    backtest = clone / "metrics" / "backtest.json"
    backtest.write_text(backtest.read_text(encoding="utf-8").replace('"exact": 0.', '"exact": 0.9'), encoding="utf-8")
    text = (clone / "README.md").read_text(encoding="utf-8")
    assert readme.render(text, clone) != text  # the workspace's figures are this run's ...
    root = committed(clone, tmp_path / "head")
    assert readme.render(text, root) == text  # ... and the committed README is checked against the committed ones


def test_readme_is_under_200_lines():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) < 200


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading.

    >>> github_anchor("10. The review loop: analysts' decisions become labels")
    '10-the-review-loop-analysts-decisions-become-labels'
    """
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_in_the_docs_leads_somewhere():
    """Relative links in the README and docs/ name files that exist and headings those files have."""
    broken = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+\s+(.+)$", file.read_text(encoding="utf-8"), re.M)
                if anchor not in {github_anchor(h) for h in headings}:
                    broken.append(f"{doc.name}: {target} (no such heading)")
    assert broken == []


def test_the_stage_table_is_the_dvc_graph():
    """The README's stage table names every stage of the dvc.yaml files, in their order, and code that exists."""
    stages = [
        name
        for f in ("synthetic/dvc.yaml", "dvc.yaml")
        for name in yaml.safe_load((REPO / f).read_text(encoding="utf-8"))["stages"]
    ]
    text = (REPO / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", text.split("## Stages", 1)[1], re.M)
    assert [r[0] for r in rows] == [s for s in stages if s != "batches"]  # batches: the monitoring folder's listing
    for stage, code in rows:
        first = re.findall(r"`([^`]+)`", code)[0]
        assert (REPO / first).exists(), f"{stage}: {first} does not exist"


def test_every_benchmark_script_and_experiment_is_in_its_index():
    """benchmarks/README.md names every script there; research/experiments/README.md links every folder, each with its
    own README (the experiments index once listed one of eight)."""
    index = (REPO / "benchmarks/README.md").read_text(encoding="utf-8")
    bench = REPO / "benchmarks"
    scripts = sorted(p.relative_to(bench).as_posix() for p in bench.rglob("*") if p.suffix in (".py", ".sh"))
    assert scripts and [s for s in scripts if f"`{s}`" not in index] == []
    studies = REPO / "research" / "experiments"
    experiments = (studies / "README.md").read_text(encoding="utf-8")
    folders = sorted(p.name for p in studies.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert len(folders) > 1 and [f for f in folders if f"[{f}]({f}/)" not in experiments] == []
    assert [f for f in folders if not (studies / f / "README.md").exists()] == []
