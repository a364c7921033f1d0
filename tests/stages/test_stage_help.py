"""Every stage answers `--help` with what it reads and writes, and runs nothing."""

import os
import subprocess
import sys

import pytest
import yaml

from tests.support import REPO


def stage_modules() -> list[str]:
    """Every stage whose command is `python -m stages.<name>`, read from the DVC files (not listed by hand)."""
    out = []
    for dvc_yaml in (REPO / "dvc.yaml", REPO / "synthetic" / "dvc.yaml"):
        for entry in yaml.safe_load(dvc_yaml.read_text(encoding="utf-8"))["stages"].values():
            cmd = entry.get("cmd", "")
            if cmd.startswith("python -m stages."):
                out.append(cmd.split("stages.", 1)[1].split()[0])
    return out


STAGES = stage_modules()


def test_every_stage_is_listed():
    assert len(STAGES) == 14 and {"decisions", "evidence", "calibrate", "generate"} <= set(STAGES)


@pytest.mark.parametrize("name", STAGES)
def test_help_prints_reads_and_writes_and_runs_nothing(name, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", f"stages.{name}", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"python -m stages.{name}")
    assert "reads: " in done.stdout and ("writes: " in done.stdout or "metrics: " in done.stdout)
    assert list(tmp_path.iterdir()) == []  # nothing ran: no params read, no output written


@pytest.mark.parametrize("name", ["ingest", "validate", "methodology", "prepare"])
def test_a_params_file_argument_is_refused(name, tmp_path):
    """One way to choose parameters: params.yaml. A profile path on the command line used to be
    read by some stages and silently ignored by others."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", f"stages.{name}", "profiles/morningstar.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "stages read params.yaml only" in done.stderr and "fundgrpo.profiles apply" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_module_outside_stages_imports_stages():
    """Stages are thin; what flows, monitoring, benchmarks and tools need lives in fundgrpo/."""
    import re

    offenders = []
    for folder in (
        "fundgrpo",
        "flows",
        "monitoring",
        "benchmarks",
        "tools",
        "tests/fundgrpo",
        "tests/monitoring",
        "tests/flows",
        "tests/tools",
    ):
        for path in sorted((REPO / folder).rglob("*.py")):
            if re.search(r"^\s*(from stages\b|import stages\b)", path.read_text(encoding="utf-8"), re.M):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_the_batches_stage_answers_help_and_creates_nothing(tmp_path):
    """The one stage outside stages/ (`python -m monitoring.batches`) answers --help too, without running."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "monitoring.batches", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "ingest.batches_dir" in done.stdout
    assert list(tmp_path.iterdir()) == []  # no folder made, no params read
