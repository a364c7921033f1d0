"""Queue a one-factor-at-a-time GRPO sweep as DVC experiments, run it, compare the results.

    python tools/sweep.py                               # the default factors below
    python tools/sweep.py --max-steps 20                # a quick sweep (plus a 20-step control)
    python tools/sweep.py --sweep grpo.loss_type=grpo,dr_grpo --sweep grpo.beta=0.04
    python tools/sweep.py --dry-run                     # print the dvc commands only

Default factors, each varied alone around params.yaml (a value equal to the current one is
dropped: the baseline commit is that row): grpo.loss_type grpo,dr_grpo,dapo,cispo;
grpo.num_generations 4,16 (must divide per_device_train_batch_size: checked before
queueing); grpo.beta 0.0,0.04; grpo.reward_weights.grade 1.0,4.0.

Each factor is one `dvc exp run --queue -S 'KEY=V1,V2'` (DVC's sweep syntax); then
`dvc queue start -j JOBS`, a wait on `dvc queue status` (starting the queue again when DVC's
worker stops with members still queued), and the comparison table of
tools/compare_runs.py (reports/sweeps/comparison.{md,csv}). Commit first: the experiments
start from the current commit plus any uncommitted changes.

Members are registered in MLflow as `challenger` only (`-S register.promote=false`; the
gate's verdict is still recorded): picking the best of a sweep on the test set is not a
fair gate, and the champion would come from an experiment that is not in git. To promote a
winner: `dvc exp apply NAME`, set `register.promote: true`, `dvc repro` (the gate decides),
commit. `--allow-promotion` leaves register.promote as it is.

MLflow: the stages of a queued experiment run in a copy under .dvc/tmp/exps; the register
stage anchors the relative `sqlite:///mlflow.db` and artifact location at DVC_ROOT (the
workspace), so every member logs into the workspace's store, tagged `dvc.exp_name`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from fundgrpo.params import ParamsError, load_params, read_yaml
from fundgrpo.registry import mlflow_registry, sweeps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sweep", action="append", metavar="KEY=V1,V2", help="a factor (repeatable); replaces the defaults"
    )
    ap.add_argument("--max-steps", type=int, help="grpo.max_steps for every member, for a quick sweep")
    ap.add_argument("--allow-promotion", action="store_true", help="let the gate promote a member to champion")
    ap.add_argument(
        "--jobs", "-j", type=int, default=1, help="queue workers (each trains a model: 1 on a small machine)"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the dvc commands, queue nothing")
    ap.add_argument("--no-wait", action="store_true", help="queue and start, then return (see `dvc queue status`)")
    ap.add_argument("--poll", type=float, default=10.0, help="seconds between `dvc queue status` checks")
    ap.add_argument("--timeout", type=float, help="give up waiting after this many seconds (the queue is left running)")
    ap.add_argument("--root", type=Path, default=Path("."))
    ap.add_argument("--out", type=Path, default=Path("reports/sweeps"))
    args = ap.parse_args()
    root = args.root.absolute()

    common: dict = {}
    if args.max_steps is not None:
        common["grpo.max_steps"] = args.max_steps
    if not args.allow_promotion:
        common["register.promote"] = False
    try:
        factors = dict(sweeps.parse_factor(s) for s in args.sweep) if args.sweep else sweeps.DEFAULT_FACTORS
        commands = sweeps.plan(read_yaml(root / "params.yaml"), factors, common)
    except (ValueError, ParamsError) as e:
        sys.exit(f"sweep: {e}")
    if not commands:
        sys.exit("nothing to sweep: every value equals params.yaml's")
    copy = [a for path in sweeps.uncached_untracked_outputs(root) for a in ("-C", path)]
    commands = [[*c, *copy] for c in commands]

    if args.dry_run:
        for c in commands:
            print("dvc " + " ".join(f"'{a}'" if "," in a else a for a in c))
        print(f"dvc queue start -j {args.jobs}")
        return

    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True
    ).stdout
    if changed.strip():
        print(f"note: uncommitted changes go into every member:\n{changed}", file=sys.stderr)

    register = load_params(root / "params.yaml").register
    print(
        f"MLflow: members log into {mlflow_registry.local_uri(mlflow_registry.tracking_uri(register), root)} "
        "(MLFLOW_TRACKING_URI wins over params.yaml)"
    )
    names: list[str] = []
    for c in commands:
        out = sweeps.dvc(c, root).stdout
        names += re.findall(r"Queued experiment '([^']+)'", out)
        print(out.strip())
    started = time.monotonic()
    if args.no_wait:
        print(sweeps.start_queue(root, args.jobs))
        print(
            f"queued {len(names)}: {' '.join(names)}; follow with `dvc queue status`, `dvc queue logs NAME`, then "
            f"`python tools/compare_runs.py --names {' '.join(names)}`"
        )
        return
    try:
        mine = sweeps.wait(root, names, args.jobs, args.poll, args.timeout)
    except TimeoutError as e:
        sys.exit(f"sweep: {e}")
    failed = [n for n, s in mine.items() if s != "Success"]
    print(f"sweep done in {time.monotonic() - started:.0f} s: {len(names) - len(failed)} of {len(names)} succeeded")
    for n in failed:
        print(f"  {n}: {mine[n]} (see `dvc queue logs {n}`)")

    table = sweeps.compare(root, names)
    print(sweeps.write(table, root / args.out))
    print(
        f"\nwritten: {args.out / 'comparison.md'}, comparison.csv; `dvc exp show --only-changed`; "
        "MLflow UI: select the runs, Compare"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
