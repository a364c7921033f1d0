"""What does `lora.top_layers` save? Seconds a step, every layer against the top N, as A/B pairs.

Run in a checkout with a pretrained profile applied and `prepare` and `model` done (e.g. a run kept by
`benchmarks/pipeline.py --keep`); it writes nothing there:

    python benchmarks/sft_step_ab.py --top-layers 15 --steps 8 --pairs 2
    python benchmarks/sft_step_ab.py --stage grpo --top-layers 15 --steps 3 --pairs 2   # from models/sft

Each `sft` run trains a fresh LoRA on the first `steps x batch_size` training prompts with the
params.yaml settings; each `grpo` run takes `steps` GRPO steps from the SFT model (no evaluations, no checkpoints,
no resume). Only `lora.top_layers` changes (0 = every layer); the runs alternate A B A B so a
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
    args = ap.parse_args()

    from fundgrpo import grpo, io, sft
    from fundgrpo.methodology import load_compiled
    from fundgrpo.params import load_params

    p = load_params()
    rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
    per_step: dict[int, list[float]] = {0: [], args.top_layers: []}
    for _ in range(args.pairs):
        for top in (0, args.top_layers):
            with tempfile.TemporaryDirectory() as tmp:
                if args.stage == "sft":
                    s = dataclasses.replace(p.sft, lora=dataclasses.replace(p.sft.lora, top_layers=top))
                    info = sft.run(s, p.model, Path(p.model.out_dir), rows[: args.steps * s.batch_size], Path(tmp))
                else:
                    g = dataclasses.replace(p.grpo, lora=dataclasses.replace(p.grpo.lora, top_layers=top), max_steps=args.steps, resume=False, eval_steps=0, save_steps=0)
                    rubric, schema = load_compiled(Path(p.methodology.out_dir))
                    info = grpo.run(g, p.model, Path(p.sft.out_dir), rows, rubric, schema, Path(tmp) / "out", None, Path(tmp) / "checkpoints")
            per_step[top].append(info["seconds"] / info["steps"])
            print(json.dumps({"top_layers": top, "steps": info["steps"], "seconds": info["seconds"]}), flush=True)
    every, top = statistics.median(per_step[0]), statistics.median(per_step[args.top_layers])
    print(f"s a step, median of {args.pairs}: every layer {every:.2f}, top {args.top_layers} {top:.2f}; ratio {top / every:.2f}")


if __name__ == "__main__":
    main()
