"""The committed dvc.lock matches the code: every file a stage depends on that git tracks (code,
methodology, dvc.yaml's commands) and every parameter it reads hash and read as the lock records.

This is `dvc status` restricted to what a clean clone has (it has no data or models), so CI can
check it without running the pipeline. When it fails, rerun the default (`dvc repro`) and commit
dvc.lock with the outputs' metrics.
"""

from __future__ import annotations

import hashlib
import subprocess

import pytest
import yaml

from tests.support import REPO

LOCKS = [REPO / "dvc.lock", REPO / "synthetic" / "dvc.lock"]


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return set(out.stdout.split())


def lookup(data: dict, dotted: str):
    for part in dotted.split("."):
        data = data[part]
    return data


def test_dvc_lock_matches_the_code_and_params():
    files = tracked()
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    if (REPO / "params.yaml").read_text(encoding="utf-8").startswith("# params.yaml with profile(s)"):
        pytest.skip("a profile is applied to params.yaml here; the lock records the default")
    stale = []
    for lock_file in LOCKS:
        base = lock_file.parent
        dvc_yaml = yaml.safe_load((base / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
        lock = yaml.safe_load(lock_file.read_text(encoding="utf-8"))["stages"]
        for stage, entry in lock.items():
            if stage not in dvc_yaml:
                stale.append(f"{stage}: in {lock_file.relative_to(REPO)} but not in its dvc.yaml")
                continue
            if dvc_yaml[stage].get("cmd") != entry["cmd"]:
                stale.append(f"{stage}: command changed in dvc.yaml")
            for dep in entry.get("deps", []):
                path = (base / dep["path"]).resolve()
                rel = str(path.relative_to(REPO))
                if rel not in files:  # data and models: not in a clean clone, checked by `dvc status` after a run
                    continue
                if hashlib.md5(path.read_bytes()).hexdigest() != dep["md5"]:
                    stale.append(f"{stage}: {rel} changed")
            for key, value in entry.get("params", {}).get("params.yaml", {}).items():
                if lookup(params, key) != value:
                    stale.append(f"{stage}: params {key} changed")
    assert not stale, "dvc.lock is stale (rerun `dvc repro` and commit dvc.lock): " + "; ".join(stale)
