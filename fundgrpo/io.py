"""Atomic file writes: a failed run never leaves a half-written or replaced output."""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

# No space left, a quota reached, a file-size limit: a write failed part-way through.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path`; move it into place only on success.

    Works for files and for directories (the caller creates what it needs).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    target = tmp / path.name
    try:
        try:
            yield target
        except OSError as e:  # name the output (pyarrow, torch and others often do not)
            if e.errno in DISK_FULL and not e.filename:
                raise OSError(e.errno, os.strerror(e.errno), str(path)) from e
            raise
        if not target.exists():
            raise FileNotFoundError(f"nothing was written to {target}")
        if path.is_dir() and not path.is_symlink():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            path.rename(old)
            target.rename(path)
            shutil.rmtree(old)
        else:
            os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def move_dir(src: str | Path, dst: str | Path) -> None:
    """Put folder `src` in the place of `dst` (replacing it; the old one is removed only after)."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
        dst.rename(old)
        src.rename(dst)
        shutil.rmtree(old)
    else:
        src.rename(dst)


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_json(obj: Any, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=_json_default) + "\n", encoding="utf-8")


def write_text(text: str, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_jsonl(objects: list[dict], path: str | Path) -> None:
    with atomic_path(path) as tmp:
        with tmp.open("w", encoding="utf-8") as f:
            for obj in objects:
                f.write(json.dumps(obj, ensure_ascii=False, default=_json_default) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def peak_rss_mb() -> int:
    """Peak resident memory of this process so far, in MB (what a stage reports of itself)."""

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    if isinstance(v, (set, tuple)):
        return list(v)
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


# Left out at the top of the repository (outputs and local state; `data` is also a package below it) ...
SKIP_TOP = {
    ".git",
    ".venv",
    "data",
    "models",
    "reports",
    "metrics",
    "plots",
    "mlartifacts",
    "mlruns",
    "mlflow.db",
    "tmp",
    "cache",
    "dvc_plots",
    "evaluations.db",  # the API's store and its keys: this workspace's decisions and clients, not the copy's
    ".api_keys.json",
    ".mypy_cache",
    ".ruff_cache",
    ".whl",
}
DVC_STATE = {"tmp"}  # ... in .dvc: the original's locks and experiment queue, its processes' and not the copy's
SKIP_ANYWHERE = {"__pycache__", ".pytest_cache"}  # ... and anywhere


def copy_project(src: Path, dest: Path) -> Path:
    """Copy the project at `src`: its code, params and configs (no data, models or runs) to `dest`."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        here = Path(folder)
        skip = SKIP_TOP if here == src else DVC_STATE if here == src / ".dvc" else set()
        return [n for n in names if n in skip or n in SKIP_ANYWHERE or n.endswith(".egg-info")]

    shutil.copytree(src, dest, ignore=ignore)
    return dest
