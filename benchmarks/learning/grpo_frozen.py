"""Does GRPO raise its own reward? The `grpo` stage's trainer (ROOT's params and SFT start) run twice
from the same seed: at the learning rate given and at one so small the policy stays its start (frozen).
Both draw the same prompts in the same order, so the difference of their logged rewards, log by log,
is what training changed; a single run's first-to-last change is mostly which prompts came up.

    python benchmarks/learning/grpo_frozen.py ROOT [--steps 100] [--learning-rate 1e-4]
        [--set per_device_train_batch_size=256]

ROOT is a workspace where `dvc repro` has run; nothing in it is written (both runs train into a
temporary folder). Prints each log's mean reward for both runs, and the mean difference with its
standard error over logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FROZEN_LR = 1e-12  # an optimizer step of ~1e-12 leaves every weight as it was in float32


def rewards(root: Path, steps: int, learning_rate: float, settings: dict) -> list[dict]:
    """The logged rewards (total and the grade's) of `steps` GRPO steps from ROOT's SFT start, with
    `settings` (grpo params by name) over ROOT's."""
    from transformers import TrainerCallback

    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.methodology.records import PromptRecord
    from fundgrpo.params import load_params
    from fundgrpo.training import grpo_trainer

    p = load_params(root / "params.yaml")
    params = dataclasses.replace(
        p.grpo, max_steps=steps, learning_rate=learning_rate, eval_steps=0, save_steps=0,
        early_stopping_patience=0, resume=False, **settings,
    )  # fmt: skip
    kept: list[dict] = []

    class Keep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                kept.append({"step": state.global_step, "reward": logs["reward"],
                             "grade": logs.get("rewards/grade_reward/mean")})  # fmt: skip

    rows = PromptRecord.read(root / p.prepare.out_dir / "train.jsonl")
    methodology, schema = load_compiled(root / p.methodology.out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        grpo_trainer.run(
            params, p.model, root / p.sft.out_dir, rows, methodology, schema, Path(tmp) / "policy",
            checkpoint_dir=Path(tmp) / "checkpoints", callbacks=[Keep()],
        )  # fmt: skip
    return kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--learning-rate", type=float, default=1e-4)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="grpo params over ROOT's (YAML values)")
    args = ap.parse_args()
    import yaml

    settings = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    sys.path.insert(0, str(HERE.parents[1]))
    from fundgrpo.threads import configure

    configure()
    root = args.root.resolve()
    trained = rewards(root, args.steps, args.learning_rate, settings)
    frozen = rewards(root, args.steps, FROZEN_LR, settings)
    lr = f"{args.learning_rate:g}"
    print(f"| step | reward, frozen | reward, lr {lr} | difference | grade reward, frozen | grade reward, lr {lr} |")
    print("|---|---|---|---|---|---|")
    for f, t in zip(frozen, trained):
        print(f"| {t['step']} | {f['reward']:.3f} | {t['reward']:.3f} | {t['reward'] - f['reward']:+.3f} | "
              f"{f['grade']:.3f} | {t['grade']:.3f} |")  # fmt: skip
    for key in ("reward", "grade"):
        d = [t[key] - f[key] for f, t in zip(frozen, trained)]
        se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
        print(f"{key}: frozen {statistics.mean(f[key] for f in frozen):.3f}, trained "
              f"{statistics.mean(t[key] for t in trained):.3f}, difference {statistics.mean(d):+.3f} "
              f"(standard error over {len(d)} logs {se:.3f}); first to last log: frozen "
              f"{frozen[0][key]:.3f} -> {frozen[-1][key]:.3f}, "
              f"trained {trained[0][key]:.3f} -> {trained[-1][key]:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
