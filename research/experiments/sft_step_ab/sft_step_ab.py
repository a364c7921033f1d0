"""What does `lora.top_layers` (or bfloat16) save? Seconds a step, every layer against the top N, as A/B pairs.

Run in a checkout with a pretrained profile applied and `prepare` and `model` done (e.g. a run kept by
`benchmarks/time/pipeline.py --keep`); it writes nothing there:

    python research/experiments/sft_step_ab/sft_step_ab.py --top-layers 15 --steps 8 --pairs 2
    python research/experiments/sft_step_ab/sft_step_ab.py --stage grpo --top-layers 15 --steps 3 --pairs 2   # from models/sft
    python research/experiments/sft_step_ab/sft_step_ab.py --bf16 --steps 6 --pairs 2   # float32 against bfloat16 autocast

Each `sft` run trains a fresh LoRA on the first `steps x batch_size` training prompts with the
params.yaml settings; each `grpo` run takes `steps` GRPO steps from the SFT model (no evaluations, no checkpoints,
no resume). Only `lora.top_layers` changes (0 = every layer), or with `--bf16` only `bf16` (at the
params' `top_layers`); the runs alternate A B A B so a
machine that drifts in speed shows in both arms. Prints one JSON line a run and the median ratio.
CPU minutes: not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", choices=["sft", "grpo"], default="sft")
    ap.add_argument("--top-layers", type=int, default=15)
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps a run")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument(
        "--bf16", action="store_true", help="compare float32 with bfloat16 autocast instead of layer counts"
    )
    args = ap.parse_args()

    from fundgrpo import io
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.params import load_params
    from fundgrpo.training import grpo_trainer, sft_trainer

    p = load_params()
    rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
    # arm name -> (top_layers, bf16)
    own_top = (p.sft if args.stage == "sft" else p.grpo).lora.top_layers
    arms = (
        {"float32": (own_top, False), "bfloat16": (own_top, True)}
        if args.bf16
        else {"every layer": (0, False), f"top {args.top_layers}": (args.top_layers, False)}
    )
    per_step: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.pairs):
        for name, (top, bf16) in arms.items():
            with tempfile.TemporaryDirectory() as tmp:
                if args.stage == "sft":
                    s = dataclasses.replace(p.sft, bf16=bf16, lora=dataclasses.replace(p.sft.lora, top_layers=top))
                    info = sft_trainer.run(
                        s, p.model, Path(p.model.out_dir), rows[: args.steps * s.batch_size], Path(tmp)
                    )
                else:
                    g = dataclasses.replace(
                        p.grpo,
                        bf16=bf16,
                        lora=dataclasses.replace(p.grpo.lora, top_layers=top),
                        max_steps=args.steps,
                        resume=False,
                        eval_steps=0,
                        save_steps=0,
                    )
                    rubric, schema = load_compiled(Path(p.methodology.out_dir))
                    info = grpo_trainer.run(
                        g,
                        p.model,
                        Path(p.sft.out_dir),
                        rows,
                        rubric,
                        schema,
                        Path(tmp) / "out",
                        None,
                        Path(tmp) / "checkpoints",
                    )
            per_step[name].append(info["seconds"] / info["steps"])
            print(
                json.dumps(
                    {"arm": name, "top_layers": top, "bf16": bf16, "steps": info["steps"], "seconds": info["seconds"]}
                ),
                flush=True,
            )
    (a, a_s), (b, b_s) = ((name, statistics.median(v)) for name, v in per_step.items())
    print(f"s a step, median of {args.pairs}: {a} {a_s:.2f}, {b} {b_s:.2f}; ratio {b_s / a_s:.2f}")


if __name__ == "__main__":
    main()
