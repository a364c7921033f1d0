"""Time the main job (`dvc repro` on the embedded default) stage by stage, in a fresh copy.

    python benchmarks/time/pipeline.py [--profile NAME ...] [--seed N] [--keep]   # e.g. --profile morningstar smollm2

`--seed N` trains with `sft.seed` and `grpo.seed` N (the data split and the base model stay fixed):
benchmarks/contest/seeds.py repeats a profile over seeds with it.

Copies the repo (without data, models, MLflow store) to a temp dir, runs `dvc repro`
there (its output goes to `repro.log` beside the copy as it comes: `tail -f` follows a long
run), and prints a Markdown table: seconds per stage and in all, peak RSS of the whole run
(from /usr/bin/time when present), GRPO seconds per step, and the backtest.
A second `dvc repro` is timed too (it should run nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fundgrpo.io import copy_project

REPO = Path(__file__).resolve().parents[2]


def cpu() -> dict:
    """The CPU's name and vector extensions: machines of one kind differ here, in speed (1.5x seen) and in
    float results where AVX-512 or bf16 paths are taken, so a run's figures say which CPU gave them."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "unknown")
    flags = set(next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), []))
    return {"model": name, "avx512f": "avx512f" in flags, "avx512_bf16": "avx512_bf16" in flags}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", nargs="*", default=[], help="profiles applied in order")
    ap.add_argument("--seed", type=int, default=None, help="sft.seed and grpo.seed (default: params.yaml's)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fundgrpo-bench-")) / "repo"
    print(f"running in {root}", flush=True)
    copy_project(REPO, root)
    if (REPO.parent / "shared").is_dir():  # the morningstar profile reads ../shared/data beside the repo
        (root.parent / "shared").symlink_to(REPO.parent / "shared")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.update(
        {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    )
    env.pop("MLFLOW_TRACKING_URI", None)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
    profiles = list(args.profile)
    for name in profiles:  # a trial's profile from the research record, copied into the run's own
        trial = REPO / "research" / "profiles" / f"{name}.yaml"
        if not (root / "profiles" / f"{name}.yaml").exists() and trial.exists():
            shutil.copy(trial, root / "profiles" / trial.name)
    if args.seed is not None:  # a profile of the copy's own, applied last
        (root / "profiles" / f"seed-{args.seed}.yaml").write_text(
            f"sft:\n  seed: {args.seed}\ngrpo:\n  seed: {args.seed}\n", encoding="utf-8"
        )
        profiles.append(f"seed-{args.seed}")
    if profiles:
        subprocess.run([sys.executable, "-m", "fundgrpo.profiles", "apply", *profiles], cwd=root, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "bench"], cwd=root, check=True, env=env)

    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started, stage_times, current, t0 = time.perf_counter(), {}, None, None
    proc = subprocess.Popen(
        timer + ["dvc", "repro"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log = []
    live = (root.parent / "repro.log").open("w", encoding="utf-8")
    for line in proc.stdout:
        log.append(line)
        live.write(line)
        live.flush()
        m = re.match(r"Running stage '([^']+)'", line)
        if m:
            now = time.perf_counter()
            if current:
                stage_times[current] = now - t0
            current, t0 = m.group(1), now
    proc.wait()
    live.close()
    total = time.perf_counter() - started
    if current:
        stage_times[current] = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit("".join(log[-60:]))
    rss = next((int(l.split(":")[1]) for l in log if "Maximum resident set size" in l), None)
    t1 = time.perf_counter()
    subprocess.run(["dvc", "repro"], cwd=root, env=env, check=True, capture_output=True)
    noop = time.perf_counter() - t1

    # kept beside the run for benchmarks/contest/pretrained_report.py (which collects a kept run's figures)
    (root / "bench.json").write_text(
        json.dumps(
            {
                "profiles": args.profile,
                "seed": args.seed,
                "stage_seconds": {k: round(v, 1) for k, v in stage_times.items()},
                "total_seconds": round(total, 1),
                "noop_seconds": round(noop, 1),
                "peak_rss_mb": round(rss / 1024) if rss else None,
                "nproc": os.cpu_count(),
                "cpu": cpu(),
            },
            indent=2,
        )
        + "\n"
    )
    train = json.loads((root / "metrics/grpo.json").read_text())
    backtest = json.loads((root / "metrics/backtest.json").read_text())
    print("| stage | seconds |\n|---|---|")
    for name, secs in stage_times.items():
        print(f"| {name} | {secs:.0f} |")
    print(f"| **total `dvc repro`** | **{total:.0f}** |\n| second `dvc repro` (no-op) | {noop:.1f} |")
    if rss:
        print(f"\npeak RSS of one process: {rss / 1024:.0f} MB")
    print(f"GRPO: {train['steps']} steps, {train['seconds_per_step']} s/step")
    print(
        "\n| evaluator | valid JSON | exact | within one | QWK | Spearman | score MAE | cites evidence |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for name, m in backtest["models"].items():
        cites = f"{m['evidence']:.3f}" if m.get("evidence") is not None else "-"
        scores = " | ".join(f"{m[k]:.3f}" for k in ("valid_json", "exact", "within_one", "qwk", "spearman"))
        mae = "-" if m.get("score_mae") is None else f"{m['score_mae']:.1f}"  # no valid answer: no score
        print(f"| {name} | {scores} | {mae} | {cites} |")
    print(f"\n({backtest['n_funds']} test share classes; nproc={os.cpu_count()}; cpu {cpu()})")
    if not args.keep:
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
