"""A DVC remote shares a run: push from the workspace that trained, then a fresh `git clone` plus
`dvc pull` has the data, the models and the reports, and DVC finds nothing to rerun.

A local folder stands in for S3/SSH (README "Sharing a run"); the commands are the same.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from tests.support import run

SHARED = (
    "data/validated/funds.parquet",
    "data/prepared/test.jsonl",
    "models/policy",
    "models/sft",
    "reports/backtest",
    "reports/validation",
)


def digest(root: Path) -> dict[str, str]:
    out = {}
    for rel in SHARED:
        base = root / rel
        for f in sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]:
            out[str(f.relative_to(root))] = hashlib.md5(f.read_bytes()).hexdigest()
    return out


def test_a_fresh_clone_pulls_the_run_and_reruns_nothing(trained, tmp_path):
    root, _ = trained
    work = tmp_path / "work"
    shutil.copytree(root, work, symlinks=True)  # the shared session repo stays as it is
    # the run being shared is complete: only the decisions export, which reads a store outside DVC, is always due
    assert changed(run(["dvc", "status"], work).stdout) == ["decisions"]

    run(["dvc", "remote", "add", "-d", "shared", str(tmp_path / "remote")], work)
    run(["git", "add", "-A"], work)
    run(["git", "commit", "-qm", "a trained run"], work)
    pushed = run(["dvc", "push"], work).stdout
    assert "pushed" in pushed

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(work), str(clone)], tmp_path)
    assert not (clone / "models/policy").exists()
    run(["dvc", "pull"], clone)
    assert digest(clone) == digest(work)
    assert changed(run(["dvc", "status"], clone).stdout) == ["decisions"]
    dry = run(["dvc", "repro", "--dry"], clone).stdout
    assert ran(dry) == ["decisions"], dry  # nothing else would rerun


def changed(status: str) -> list[str]:
    """The stages `dvc status` names (each as a line "name:")."""
    return [line[:-1] for line in status.splitlines() if line.endswith(":") and not line.startswith((" ", "\t"))]


def ran(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")]
