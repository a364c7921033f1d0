"""Where the time goes: a GRPO step (generation, rewards, the loss's forward and backward, validation)
and an evaluation as the API and batch scoring make it (prompt records, generation, the claims check,
the belief read, the served record).

    python benchmarks/time/hotspots.py grpo ROOT --label NAME [--steps 20] [--set grpo.KEY=VALUE ...]
    python benchmarks/time/hotspots.py evaluate ROOT --label NAME [--funds 1 8 32] [--repeats 5] [--set KEY=VALUE ...]
    python benchmarks/time/hotspots.py report   # research/hotspots.md from research/results/hotspots/

ROOT is a workspace where `dvc repro` has run. `grpo` trains GRPO as the `grpo` stage does
(`grpo_trainer.run`, ROOT's params and SFT model) for `--steps` steps into a scratch folder. `evaluate`
answers requests of each `--funds` size through the API's own `Evaluator.evaluate` (its micro-batcher
included, no HTTP) with ROOT's policy, `--repeats` times each after one unmeasured warm-up.

Both wrap the project's and TRL's methods in timers: each phase counts its own time, its callees' apart
(a stack of timers), filed under the context it ran in (a training step or a validation; a request).
What no timer covers is "other". Run it on an idle machine: the figures are wall seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESEARCH = HERE.parents[1] / "research"
RESULTS = RESEARCH / "results" / "hotspots"
PAGE = RESEARCH / "hotspots.md"

# (module, class or None, function) -> phase, in the order the tables list them
GRPO_PHASES = {
    ("trl", "GRPOTrainer", "_tokenize_prompts"): "tokenising prompts",
    ("trl", "GRPOTrainer", "_generate_single_turn"): "generation (sampling)",
    ("trl", "GRPOTrainer", "_calculate_rewards"): "rewards",
    ("trl", "GRPOTrainer", "_get_per_token_logps_and_entropies"): "forward (log-probabilities)",
    ("fundgrpo.training.prompt_sharing", None, "completion_logps"): "forward (log-probabilities)",  # share_prompts
    ("trl", "GRPOTrainer", "training_step"): "backward (and the loss's arithmetic)",
    ("torch.optim", "AdamW", "step"): "optimizer",
    ("trl", "GRPOTrainer", "_generate_and_score_completions"): "TRL bookkeeping (advantages, masks, logs)",
    ("fundgrpo.model.modelling", None, "generate"): "greedy answers",  # only the greedy validation calls it
    ("fundgrpo.methodology.answers", None, "predictions_from_texts"): "parsing answers",
    ("fundgrpo.methodology.claims", None, "summary"): "claims check",
    ("trl", "GRPOTrainer", "evaluate"): "TRL's evaluation loop",
    ("transformers.trainer_callback", "CallbackHandler", "on_evaluate"): "validation callbacks",
    ("trl", "GRPOTrainer", "_save_checkpoint"): "checkpoints",
}
EVALUATE_PHASES = {
    ("fundgrpo.serving.api.evaluator", "Evaluator", "records"): "prompt records (peers, percentiles)",
    ("fundgrpo.evaluation.statistical", "Estimator", "estimate"): "statistical estimate",
    ("fundgrpo.serving.champion", None, "build_records"): "prompt building",  # imported by name there
    ("fundgrpo.model.modelling", None, "generate"): "generation (greedy)",
    ("fundgrpo.methodology.answers", None, "predictions_from_texts"): "parsing answers",
    ("fundgrpo.methodology.answers", None, "annotated"): "claims check",
    ("fundgrpo.model.belief", None, "beliefs"): "belief read",
    ("fundgrpo.model.belief", None, "from_cache"): "belief read",  # from the generation's cache
    ("fundgrpo.evaluation.calibration", None, "decide"): "decision rule",
    ("fundgrpo.serving.evaluation", None, "build"): "served record (flags, review)",
    ("fundgrpo.serving.evaluation", None, "as_json"): "JSON",
    ("fundgrpo.serving.api.evaluator", "Evaluator", "label"): "expert label",
}
VALIDATION = ("TRL's evaluation loop", "validation callbacks", "greedy answers")


class Timers:
    """Exclusive seconds per (context, phase): a phase's callees are counted apart, under their own
    phase. The context is `contexts(stack)`: e.g. "validation" inside an evaluation, else "training"."""

    def __init__(self, context=lambda stack: "") -> None:
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.calls: dict[tuple[str, str], int] = defaultdict(int)
        self.stack: list[list] = []  # [phase, started, children's seconds]
        self.context = context

    def wrap(self, phase: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            self.stack.append([phase, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                _, started, children = self.stack.pop()
                total = time.perf_counter() - started
                key = (self.context([p for p, *_ in self.stack] + [phase]), phase)
                self.seconds[key] += total - children
                self.calls[key] += 1
                if self.stack:
                    self.stack[-1][2] += total

        return timed

    @contextlib.contextmanager
    def patched(self, phases: dict):
        """Each (module, class, function) wrapped in place while the block runs (callers that look it up
        at call time see the timer), the originals put back after."""
        saved = []
        for (module, owner, name), phase in phases.items():
            target = importlib.import_module(module)
            if owner:
                target = getattr(target, owner)
            saved.append((target, name, target.__dict__[name] if name in vars(target) else None))
            setattr(target, name, self.wrap(phase, getattr(target, name)))
        try:
            yield self
        finally:
            for target, name, original in reversed(saved):
                if original is None:
                    delattr(target, name)  # it was inherited: the class's own wrapper goes
                else:
                    setattr(target, name, original)


def _workspace(root: Path, overrides: list[str]):
    """ROOT's params with `overrides` applied (SECTION.KEY=VALUE), loaded strictly; the working directory ROOT."""
    import yaml

    from fundgrpo import threads
    from fundgrpo.params import load_params

    os.chdir(root)  # params.yaml's paths are relative to the workspace
    threads.configure()
    raw = yaml.safe_load((root / "params.yaml").read_text())
    for item in overrides:
        key, _, value = item.partition("=")
        section, _, field = key.partition(".")
        raw[section][field] = yaml.safe_load(value)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "params.yaml").write_text(yaml.safe_dump(raw))
        return load_params(Path(tmp) / "params.yaml"), raw


def _header(label: str, command: str) -> dict:
    from fundgrpo import threads

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return {
        "label": label,
        "commit": commit.stdout.strip(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "threads": threads.count(),
        "command": command,
    }


def _save(result: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{result['kind']}-{result['label'].replace(' ', '-').replace('/', '-')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    return out


def profile_grpo(root: Path, label: str, steps: int, overrides: list[str]) -> Path:
    """Train `steps` GRPO steps from ROOT's SFT model; the phases' seconds into RESULTS."""
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.methodology.records import PromptRecord

    p, raw = _workspace(root, [*overrides, f"grpo.max_steps={steps}", "grpo.resume=false"])
    timers = Timers(lambda stack: "validation" if any(s in VALIDATION for s in stack) else "training")
    from fundgrpo.training import grpo_trainer

    rows = PromptRecord.read(Path(p.prepare.out_dir) / "train.jsonl")
    eval_rows = PromptRecord.read(Path(p.prepare.out_dir) / "validation.jsonl")
    m, schema = load_compiled(Path(p.methodology.out_dir))
    with tempfile.TemporaryDirectory() as tmp, timers.patched(GRPO_PHASES):
        summary = grpo_trainer.run(
            p.grpo, p.model, Path(p.sft.out_dir), rows, m, schema, Path(tmp) / "out", eval_rows, Path(tmp) / "ckpt"
        )
    seconds = {f"{c}|{phase}": round(s, 2) for (c, phase), s in timers.seconds.items()}
    seconds["training|other"] = round(summary["seconds"] - sum(timers.seconds.values()), 2)
    curve = summary["curves"]
    command = f"python benchmarks/time/hotspots.py grpo ROOT --label '{label}' --steps {steps}"
    return _save({
        **_header(label, command + "".join(f" --set {o}" for o in overrides)),
        "kind": "grpo",
        "steps": summary["steps"],
        "evaluations": len(summary["eval_curve"]),
        "train_seconds": summary["seconds"],
        "seconds": seconds,
        "calls": {f"{c}|{phase}": n for (c, phase), n in timers.calls.items()},
        "completion_length": round(sum(r.get("completions/mean_length", 0) for r in curve) / max(1, len(curve)), 1),
        "settings": {k: raw["grpo"][k] for k in ("per_device_train_batch_size", "num_generations",
                                                 "max_completion_length", "eval_steps", "eval_prompts", "best_metric")},
    })  # fmt: skip


def profile_evaluate(root: Path, label: str, sizes: list[int], repeats: int, overrides: list[str]) -> Path:
    """Requests of each size through `Evaluator.evaluate` (ROOT's params with `overrides`, e.g.
    generation.batch_size=64); the phases' seconds per request into RESULTS."""
    import asyncio

    import pandas as pd

    sys.path.insert(0, str(HERE))
    from api_load import funds_like

    p, _ = _workspace(root, overrides)
    timers = Timers(lambda stack: "")
    from fundgrpo.serving.api.evaluator import Evaluator
    from fundgrpo.serving.api.settings import ApiSettings

    evaluator = Evaluator(root, ApiSettings(model=str(root / p.grpo.out_dir)))
    evaluator.params = p  # with the overrides
    reference = pd.read_parquet(root / p.validate.out)
    found: dict[str, dict] = {}

    async def requests() -> None:
        evaluator.queue = asyncio.Queue()
        worker = asyncio.create_task(evaluator.batcher())
        await asyncio.get_running_loop().run_in_executor(None, evaluator.serving)
        offset = 0
        for size in sizes:
            await evaluator.evaluate(funds_like(reference, size, offset))  # warm-up, not counted
            timers.seconds.clear()
            walls = []
            for _ in range(repeats):
                offset += size
                started = time.perf_counter()
                await evaluator.evaluate(funds_like(reference, size, offset))
                walls.append(time.perf_counter() - started)
            seconds = {phase: round(s / repeats, 4) for (_, phase), s in timers.seconds.items()}
            seconds["other"] = round(sum(walls) / repeats - sum(seconds.values()), 4)
            found[str(size)] = {"seconds": seconds, "median_s": round(sorted(walls)[len(walls) // 2], 4)}
        worker.cancel()

    with timers.patched(EVALUATE_PHASES):
        asyncio.run(requests())
    command = f"python benchmarks/time/hotspots.py evaluate ROOT --label '{label}' --funds {' '.join(map(str, sizes))} "
    command += f"--repeats {repeats}" + "".join(f" --set {o}" for o in overrides)
    return _save({**_header(label, command), "kind": "evaluate", "requests": found})


def _row(phase: str, values: list[float], totals: list[float]) -> str:
    cells = [f"{v:.3f} ({v / t:.0%})" if v else "" for v, t in zip(values, totals)]
    return f"| {phase} | " + " | ".join(cells) + " |"


def render_grpo(r: dict) -> list[str]:
    steps, evals, s, g = r["steps"], max(1, r["evaluations"]), r["seconds"], r["settings"]
    train = {k.split("|", 1)[1]: v / steps for k, v in s.items() if k.startswith("training|")}
    val = {k.split("|", 1)[1]: v / evals for k, v in s.items() if k.startswith("validation|")}
    per_step, per_eval = sum(train.values()), sum(val.values())
    lines = [
        f"### GRPO: {r['label']}",
        "",
        f"`{r['command']}` at {r['commit']} ({r['date']}, {r['cores']} cores, {r['threads']} threads): "
        f"{steps} steps and {r['evaluations']} validations in {r['train_seconds']:.0f} s. Batches of "
        f"{g['per_device_train_batch_size']} completions ({g['num_generations']} per prompt, at most "
        f"{g['max_completion_length']} tokens, {r['completion_length']} on average); a validation every "
        f"{g['eval_steps']} steps ({g['eval_prompts']} prompts sampled; best_metric {g['best_metric']}).",
        "",
        "| phase | a training step, s (share) | a validation, s (share) |",
        "|---|---|---|",
    ]
    for phase in [*dict.fromkeys(GRPO_PHASES.values()), "other"]:
        if train.get(phase) or val.get(phase):
            lines.append(_row(phase, [train.get(phase, 0.0), val.get(phase, 0.0)], [per_step, per_eval]))
    lines.append(f"| **all** | **{per_step:.2f}** | **{per_eval:.2f}** |")
    if g["eval_steps"]:
        n = 100 // g["eval_steps"] + 1
        lines += ["", f"At these rates 100 steps and their {n} validations cost {100 * per_step + n * per_eval:.0f} s."]
    return lines + [""]


def render_evaluate(r: dict) -> list[str]:
    sizes = list(r["requests"])
    totals = [sum(r["requests"][n]["seconds"].values()) for n in sizes]
    lines = [
        f"### Evaluation: {r['label']}",
        "",
        f"`{r['command']}` at {r['commit']} ({r['date']}, {r['cores']} cores, {r['threads']} threads): mean seconds "
        "per request by phase (share), one request at a time.",
        "",
        "| phase | " + " | ".join(f"{n} fund{'s' if n != '1' else ''}" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for phase in [*dict.fromkeys(EVALUATE_PHASES.values()), "other"]:
        values = [r["requests"][n]["seconds"].get(phase, 0.0) for n in sizes]
        if any(values):
            lines.append(_row(phase, values, totals))
    lines.append("| **all (mean)** | " + " | ".join(f"**{t:.3f}**" for t in totals) + " |")
    lines.append("| median | " + " | ".join(f"{r['requests'][n]['median_s']:.3f}" for n in sizes) + " |")
    lines.append("| funds/s | " + " | ".join(f"{int(n) / t:.1f}" for n, t in zip(sizes, totals)) + " |")
    return lines + [""]


def report() -> str:
    results = [json.loads(f.read_text()) for f in RESULTS.glob("*.json")]
    results.sort(key=lambda r: r["date"])
    lines = [
        "# Where the time goes",
        "",
        "Generated by `python benchmarks/time/hotspots.py report` from `research/results/hotspots/`; each section is",
        "one run (the script's docstring says how: each phase's own time, its callees' apart). The embedded",
        "default on a 2-core machine, oldest first.",
        "",
    ]
    for r in results:
        lines += render_grpo(r) if r["kind"] == "grpo" else render_evaluate(r)
    notes = RESEARCH / "notes" / "hotspots_notes.md"
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grpo", help="profile GRPO steps on a workspace where dvc repro has run")
    g.add_argument("root", type=Path)
    g.add_argument("--label", required=True)
    g.add_argument("--steps", type=int, default=20)
    g.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    e = sub.add_parser("evaluate", help="profile API evaluations on a workspace where dvc repro has run")
    e.add_argument("root", type=Path)
    e.add_argument("--label", required=True)
    e.add_argument("--funds", type=int, nargs="+", default=[1, 8, 32])
    e.add_argument("--repeats", type=int, default=5)
    e.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    sub.add_parser("report", help="write research/hotspots.md from the results")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    if args.command == "grpo":
        print(profile_grpo(args.root.resolve(), args.label, args.steps, args.set))
    elif args.command == "evaluate":
        print(profile_evaluate(args.root.resolve(), args.label, args.funds, args.repeats, args.set))
    PAGE.write_text(report())
    print(PAGE)


if __name__ == "__main__":
    main()
