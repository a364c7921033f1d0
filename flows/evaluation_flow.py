"""The monthly evaluation run: the configured universe scored by the `champion`, kept by month.

    python -m flows.evaluation_flow [--model models:/fund-evaluator@champion] [--funds data/canonical/funds.parquet]

A Prefect flow around `python -m fundgrpo.serving.batch` (one subprocess, its log streamed to the
flow's log): the funds are `ingest.out` (the canonical table of the configured source) unless
named, the output `reports/evaluations/<YYYY-MM>/evaluations.parquet`. Deployed monthly by
prefect.yaml and flows/serve.py.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows import common
from fundgrpo.cli import lean_exit
from fundgrpo.params import load_params


@task(name="evaluate", cache_policy=NO_CACHE)
def run_evaluate(root: str, funds: str, out: str, model: str | None) -> str:
    logger = get_run_logger()
    cmd = [sys.executable, "-m", "fundgrpo.serving.batch", funds, "--out", out] + (["--model", model] if model else [])
    proc = subprocess.Popen(
        cmd, cwd=root, env=common.stage_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    tail: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.rstrip()
        if line:
            logger.info(line)
            tail = (tail + [line])[-20:]
    if proc.wait() != 0:
        raise RuntimeError("evaluation failed:\n" + "\n".join(tail))
    return out


@flow(name="evaluation")
def evaluation(root: str = ".", funds: str | None = None, model: str | None = None, month: str | None = None) -> str:
    """Score `funds` (default: `ingest.out`) with `model` (default: the champion); returns the output path."""

    workspace = Path(root).resolve()
    params = load_params(workspace / "params.yaml")
    month = month or datetime.now(timezone.utc).strftime("%Y-%m")
    out = str(Path(params.evaluate.out_dir) / month / "evaluations.parquet")
    return run_evaluate(str(workspace), funds or params.ingest.out, out, model)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--funds", default=None)
    args = ap.parse_args(argv)
    lean_exit()
    print(evaluation(funds=args.funds, model=args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
