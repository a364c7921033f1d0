"""fundgrpo.io.copy_project: what a copy of the project carries, read from DVC's own view of the stages."""

from __future__ import annotations

import os
from pathlib import Path

from dvc.repo import Repo

from fundgrpo.io import copy_project
from tests import support


def sources(root: Path) -> set[str]:
    """Every path a stage of `root`'s dvc.yaml reads that no stage writes (params resolved by DVC)."""
    stages = Repo(str(root)).index.stages
    outs = [o.fs_path for s in stages for o in s.outs]
    return {
        os.path.relpath(d.fs_path, root)
        for s in stages
        for d in s.deps
        if not any(d.fs_path == o or d.fs_path.startswith(o + os.sep) for o in outs)
    }


def test_a_copy_carries_every_file_a_stage_reads_and_none_of_the_originals_dvc_state(tmp_path):
    # DVC's state folder (its locks, its experiment queue), made as DVC's first command here would make it
    (support.REPO / ".dvc/tmp").mkdir(exist_ok=True)
    wanted = sources(support.REPO)
    assert {"params.yaml", "documents", "pretrained-models.txt", "methodology/default.yaml"} <= wanted

    copy = copy_project(support.REPO, tmp_path / "repo")

    assert sorted(p for p in wanted if not (copy / p).exists()) == []
    assert (copy / ".dvc/config").exists() and not (copy / ".dvc/tmp").exists()
    assert not any((copy / name).exists() for name in ("data", "models", "mlflow.db", ".venv", ".git"))


def test_a_copy_leaves_out_the_workspaces_api_store_keys_and_caches(tmp_path):
    """A served workspace holds the API's store (analysts' decisions) and its clients' hashed keys,
    both git-ignored: a copy starts without them (a stage reading the store must find none there)."""
    src = tmp_path / "src"
    for name in ("params.yaml", "evaluations.db", ".api_keys.json", ".mypy_cache/3.11/x.json", "stages/s.py"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("x")

    copy = copy_project(src, tmp_path / "copy")

    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == [
        "params.yaml",
        "stages/s.py",
    ]
