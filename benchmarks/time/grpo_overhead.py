"""The `grpo` stage's overhead over a bare TRL script (benchmarks/time/bare_grpo.py): same model,
data, rewards and GRPO settings, timed as whole processes, alternately, in one run.

    python benchmarks/time/grpo_overhead.py RUN_DIR --steps 5 --pairs 2
    # RUN_DIR: a kept benchmarks/time/pipeline.py copy

Both train `--steps` GRPO steps from RUN_DIR/models/sft with the params in RUN_DIR/params.yaml
(evaluation and checkpoints off in both, as the bare script has none) and save the merged policy,
in a scratch copy of RUN_DIR (its outputs stay as they are). Prints each pair's seconds and the
median ratio stage/bare; writes RUN_DIR/overhead.json.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def timed(cmd: list[str], cwd: Path) -> tuple[float, int | None]:
    """Wall seconds and peak RSS in MB (from /usr/bin/time where present) of one process."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    rss_file = cwd / "rss.txt"
    timer = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] if Path("/usr/bin/time").exists() else []
    started = time.perf_counter()
    subprocess.run(timer + cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    rss = int(rss_file.read_text().split()[-1]) // 1024 if timer else None
    return seconds, rss


def scratch_copy(run: Path, start: str = "sft", **grpo) -> Path:
    """A copy of a kept run's folder whose models/sft is RUN/models/<start> (linked, not copied)
    and whose params.yaml has `grpo` updated; the run's own outputs stay as they are."""
    scratch = Path(tempfile.mkdtemp(prefix="grpo-scratch-")) / "repo"
    shutil.copytree(
        run,
        scratch,
        symlinks=True,
        ignore=shutil.ignore_patterns("models", "mlartifacts", "mlflow.db", "cache", "tmp", ".dvc", ".git"),
    )
    (scratch / "models").mkdir()
    (scratch / "models" / "sft").symlink_to((run / "models" / start).absolute())
    params = yaml.safe_load((scratch / "params.yaml").read_text(encoding="utf-8"))
    params["grpo"].update(grpo)
    (scratch / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return scratch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    scratch = scratch_copy(args.run, max_steps=args.steps, eval_steps=0, save_steps=0, logging_steps=1)
    pairs = []
    for _ in range(args.pairs):
        stage, stage_rss = timed([sys.executable, "-m", "stages.grpo"], scratch)
        bare, bare_rss = timed([sys.executable, str(HERE / "bare_grpo.py"), str(scratch / "bare_policy")], scratch)
        pairs.append(
            {
                "stage_s": round(stage, 1),
                "bare_s": round(bare, 1),
                "ratio": round(stage / bare, 3),
                "stage_peak_rss_mb": stage_rss,
                "bare_peak_rss_mb": bare_rss,
            }
        )
        print(pairs[-1], flush=True)
    shutil.rmtree(scratch.parent, ignore_errors=True)
    result = {
        "steps": args.steps,
        "pairs": pairs,
        "median_ratio": round(statistics.median(p["ratio"] for p in pairs), 3),
    }
    (args.run / "overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
