"""Fault: the disk fills while a stage writes. The stage fails with one clear line, and every
output of the last good run is byte-identical afterwards (no half-written file, no temporary left).

The full disk is the process's file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so the write
returns EFBIG as it would return ENOSPC): the real stage runs as `python -m stages.X`, as DVC
runs it, and its first large write fails part-way through.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fundgrpo import profiles
from fundgrpo.data import synthetic
from fundgrpo.params import Params, from_dict, render
from tests.support import REPO

pytestmark = pytest.mark.fault("disk full while a stage writes")

SOURCE = "data/raw/funds.csv"
STAGES = ("ingest", "validate", "methodology", "decisions", "evidence", "prepare")
OUTPUTS = (
    "data/canonical",
    "data/validated",
    "data/schema",
    "data/decisions",
    "data/evidence",
    "data/prepared",
    "metrics",
    "reports",
)
# bytes: below a data output of each
LIMIT = {"ingest": 8192, "validate": 8192, "methodology": 1024, "decisions": 16, "evidence": 4096, "prepare": 16384}


def stage(root: Path, name: str, limit: int | None = None) -> subprocess.CompletedProcess:
    def full_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", f"stages.{name}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=full_disk if limit else None,
    )


def digest(root: Path) -> dict[str, str]:
    """Every file under the outputs, by content hash (temporaries included: none may be left)."""
    out = {}
    for rel in OUTPUTS:
        for path in sorted((root / rel).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("disk-full")
    shutil.copytree(REPO / "methodology", root / "methodology")
    params = profiles.load("tiny", REPO / "params.yaml", REPO / "profiles")
    data = yaml.safe_load(render(params))
    data["ingest"].update(source="table", path=SOURCE)
    (root / "params.yaml").write_text(render(from_dict(Params, data)), encoding="utf-8")
    (root / SOURCE).parent.mkdir(parents=True)
    synthetic.later_batch(params.synthetic, 1).drop(columns=["as_of"], errors="ignore").to_csv(
        root / SOURCE, index=False
    )
    for name in STAGES:
        done = stage(root, name)
        assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize("name", STAGES)
def test_a_full_disk_fails_the_stage_clearly_and_keeps_the_last_good_outputs(good_run, name):
    before = digest(good_run)
    done = stage(good_run, name, LIMIT[name])
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{name} failed: disk full while writing "), done.stderr[-2000:]
    assert "outputs of the last good run are unchanged" in last
    assert digest(good_run) == before
    # and the stage still works once there is room again
    assert stage(good_run, name).returncode == 0
