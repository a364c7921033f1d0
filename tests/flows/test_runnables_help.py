"""Every runnable answers --help with what it does, and runs nothing (the monitoring flow once ran a
whole flow, the journal took --help for a folder, the faults tool started the whole suite)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import REPO


@pytest.mark.parametrize(
    "command, says",
    [
        (["-m", "flows.monitoring_flow"], "validation -> drift -> relearning"),
        (["-m", "flows.journal"], "reconcile"),
        (["tools/faults.py"], "run the tests marked"),
    ],
)
def test_help_says_what_it_does_and_runs_nothing(command, says, tmp_path):
    # no Prefect server answers here: a command that ran instead of helping would fail or hang
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, *command, "--help"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:") and says in done.stdout
