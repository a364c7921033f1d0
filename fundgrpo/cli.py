"""The thin part of every stage's `main()`: offline switches, params, clean failure."""

from __future__ import annotations

import argparse
import atexit
import errno  # noqa: F401  (the doctest below)
import gc
import importlib
import os
import sys
from pathlib import Path
from typing import Callable

import yaml

from fundgrpo import threads
from fundgrpo.io import DISK_FULL

# No hub, no telemetry: nothing here may download or phone home (see README). The one home of the
# switches: the stages and tests set them from here, `python -m fundgrpo.cli env` prints them for a
# shell (docs/operations.md), and the Makefile and Dockerfile copies are checked against them
# (tests/test_layout.py). A Prefect server on a slow machine gets two minutes to start.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "GX_ANALYTICS_ENABLED": "false",
    "DVC_NO_ANALYTICS": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


def offline() -> None:
    """No hub, no telemetry; and the thread settings (fundgrpo/threads.py), which must also be
    in place before torch or scikit-learn load."""

    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    threads.configure()


def lean_exit() -> None:
    """At exit, one garbage collection, then the survivors frozen (`gc.freeze`), so that the interpreter's
    shutdown does not walk them again in each of its own collections. A process that has loaded torch and
    transformers spent about 1.3 s of CPU there (`python -c "from trl import GRPOTrainer"`: 6.7 s, 5.4 s
    with this), more than a tiny profile's stage spends working. Garbage is still collected and its
    finalizers run; what is alive at exit the OS frees. Exit handlers registered after this call (those
    of the libraries a stage then loads) run before it; the others after, unchanged."""
    atexit.register(_collect_and_freeze)


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


class StageError(Exception):
    """A stage cannot go on; the message is meant for the user as it is."""


def stage_help(name: str, argv: list[str] | None = None) -> None:
    """`python -m stages.<name> --help`: the stage's docstring and what it reads and writes
    (its entry in dvc.yaml, the one place that says so); exits 0 without running anything."""
    argv = sys.argv[1:] if argv is None else argv
    if not {"-h", "--help"} & set(argv):
        return

    print(f"python -m stages.{name}\n\n{(importlib.import_module(f'stages.{name}').__doc__ or '').strip()}\n")
    root = Path(".") if Path("dvc.yaml").exists() else Path(__file__).resolve().parents[1]
    entry: dict = {}
    for dvc_yaml in (root / "dvc.yaml", root / "synthetic" / "dvc.yaml"):  # generate lives in the second
        if dvc_yaml.exists():
            entry = entry or yaml.safe_load(dvc_yaml.read_text(encoding="utf-8")).get("stages", {}).get(name, {})
    for key, label in (
        ("params", "params.yaml sections"),
        ("deps", "reads"),
        ("outs", "writes"),
        ("metrics", "metrics"),
        ("plots", "plots"),
    ):
        items = [next(iter(i)) if isinstance(i, dict) else i for i in entry.get(key, [])]
        if items:
            print(f"{label}: {', '.join(map(str, items))}")
    print(
        "\nParameters come from params.yaml (apply a profile with `python -m fundgrpo.profiles apply NAME`); "
        "run the DAG with `dvc repro`."
    )
    sys.exit(0)


def run_stage(name: str, body: Callable[[], object]) -> None:
    """Run a stage body; expected failures print one clear message and exit 1."""
    stage_help(name)
    if sys.argv[1:]:
        # One way to choose parameters: params.yaml, as DVC sees it.
        print(
            f"{name}: unexpected argument(s) {sys.argv[1:]}: stages read params.yaml only; apply a profile "
            "with `python -m fundgrpo.profiles apply NAME` or set a value with `dvc exp run -S key=value`",
            file=sys.stderr,
        )
        sys.exit(2)
    offline()
    lean_exit()
    try:
        body()
    # ParamsError, MethodologyError, IngestError ... are ValueErrors: bad input named in the message
    except (StageError, ValueError, FileNotFoundError) as e:
        print(f"{name} failed: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        print(f"{name} failed: {disk_full_message(e)}", file=sys.stderr)
        sys.exit(1)


def disk_full_message(e: OSError) -> str:
    """What a full disk looks like to the user: which file, and that nothing good was replaced
    (every output is written to a temporary sibling and moved into place only when complete).

    >>> e = OSError(errno.ENOSPC, "No space left on device", "data/x.parquet")
    >>> print(disk_full_message(e))  # doctest: +NORMALIZE_WHITESPACE
    disk full while writing data/x.parquet (No space left on device); free space there and rerun:
    the outputs of the last good run are unchanged
    """
    where = f" while writing {e.filename}" if e.filename else ""
    return (
        f"disk full{where} ({e.strerror}); free space there and rerun: the outputs of the last good run are unchanged"
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m fundgrpo.cli env`: the offline switches as shell exports (`eval "$(...)"`)."""
    ap = argparse.ArgumentParser(prog="python -m fundgrpo.cli", description=main.__doc__)
    ap.add_argument("what", choices=["env"])
    ap.parse_args(argv)
    print("export " + " ".join(f"{k}={v}" for k, v in OFFLINE.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
