"""Every runnable answers --help with what it does, and runs nothing (the monitoring flow once ran a
whole flow, the journal took --help for a folder, the faults tool started the whole suite)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import REPO

# What the help of the three that once did something else must say (checked in the same run as the rest).
SAYS = {
    "-m flows.monitoring_flow": "validation -> drift -> relearning",
    "-m flows.journal": "reconcile",
    "tools/faults.py": "run the tests marked",
}


# Every runnable of the project (a file with a `__main__` block): the stages have their own test
# (tests/stages/test_stage_help.py); the dashboard's pages are a Streamlit script (`python -m
# fundgrpo.serving.dashboard --help` is the runnable); `python -m fundgrpo.params` prints params.yaml.
FOLDERS = ("fundgrpo", "flows", "monitoring", "tools", "benchmarks")
NOT_HERE = {"fundgrpo/serving/dashboard/pages.py", "fundgrpo/params.py"}


def runnables() -> list[list[str]]:
    out = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel in NOT_HERE or '__name__ == "__main__"' not in path.read_text(encoding="utf-8"):
                if path.name != "__main__.py":
                    continue
            module = rel.removesuffix(".py").removesuffix("/__main__").replace("/", ".")
            out.append(["-m", module] if folder in ("fundgrpo", "flows", "monitoring") else [rel])
    return out


def test_every_runnable_helps_and_runs_nothing():
    """`--help` prints a usage line and exits 0 for every runnable, and nothing in the checkout changes
    (tools/robustness.py --help once ran the whole bad-input suite; benchmarks/time/mlflow_ui.py started MLflow)."""
    commands = runnables()
    assert len(commands) > 30 and ["tools/robustness.py"] in commands
    assert {" ".join(c) for c in commands} >= set(SAYS)
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "PYTHONPATH": str(REPO)}
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    failed = []
    for command in commands:
        done = subprocess.run(
            [sys.executable, *command, "--help"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0 or not done.stdout.lower().startswith("usage:"):
            failed.append(f"{' '.join(command)}: exit {done.returncode}: {(done.stdout or done.stderr)[:200]!r}")
        elif SAYS.get(" ".join(command), "") not in done.stdout:
            failed.append(f"{' '.join(command)}: its help does not say {SAYS[' '.join(command)]!r}")
    assert failed == []
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before, "a --help wrote to the checkout"
