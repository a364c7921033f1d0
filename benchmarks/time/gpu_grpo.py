"""SFT and GRPO steps on whatever device torch finds (a GPU when there is one), as the stages run them:
what the `gpu-qwen3` profile's 300 GRPO steps cost on one GPU, timed on a randomly initialised model of
Qwen3-0.6B's shape (the shape decides the cost: no pretrained weights travel to a borrowed machine), the
same for SmolLM2-135M at the documents profile's lengths, and the embedded model's SFT and GRPO in bf16
(the GPU path end to end).

    python benchmarks/time/gpu_grpo.py time --shape qwen3-0.6b --steps 4 [--profile gpu-qwen3]
        [--set grpo.KEY=VALUE ...]
    python benchmarks/time/gpu_grpo.py time --shape embedded --steps 6 --sft-steps all --funds 1500
    python benchmarks/time/gpu_grpo.py time --shape smollm2-135m --profile smollm2 --set prepare.prompt_style=full \
        --set sft.max_length=1024 --set grpo.max_completion_length=256   # research/profiles/documents-smollm2.yaml
    python benchmarks/time/gpu_grpo.py time --shape qwen3-0.6b --dry-run   # the model's size, nothing run
    python benchmarks/time/gpu_grpo.py report   # benchmarks/gpu.md from research/results/gpu/

The prompts are the default methodology's, on funds drawn at random (`funds`), graded by its rule: the
cost of a step depends on the prompts' and completions' lengths, not on the grades. The profile's settings
are used as they are (batch, generations, completion length, LoRA, bf16, learning rate) except vLLM, which
is off unless `--set grpo.use_vllm=true` and vLLM is installed. A random model rarely writes its end token,
so every completion runs to `max_completion_length`: the time is the profile's worst case. Its answers
never parse, so every reward is equal and its GRPO steps have no gradient: the time is real, the learning is
not checked. The embedded model after its whole SFT (`--sft-steps all`) writes answers whose rewards differ,
so its GRPO steps learn: each run keeps the steps' logged grad norms and rewards.

Each run writes one JSON (settings, device, seconds of each step, peak GPU memory) to `--out`
(research/results/gpu/); a run that fails writes its traceback there instead: what broke is a result too.
On a borrowed GPU machine with no trl or datasets, `benchmarks/gpu_run.sh` installs them from carried wheels
and runs the checks in one command.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE.parents[1] / "research" / "results" / "gpu"
PAGE = HERE / "gpu.md"

# The configs of Qwen/Qwen3-0.6B (its config.json) and SmolLM2-135M-Instruct (the GGUF's metadata that
# `pretrained-models.txt` installs): the shape, not the weights, decides a step's cost.
SHAPES = {
    "qwen3-0.6b": (
        "Qwen3",
        {
            "vocab_size": 151936,
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 40960,
            "rope_theta": 1000000.0,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": True,
        },
    ),
    "smollm2-135m": (
        "Llama",
        {
            "vocab_size": 49152,
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_hidden_layers": 30,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "head_dim": 64,
            "max_position_embeddings": 8192,
            "rope_theta": 100000.0,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": True,
        },
    ),
}


def funds(n: int, seed: int = 0):
    """`n` share classes (two a fund) with the default methodology's criteria drawn at random."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "share_class_id": [f"S{i:04d}" for i in range(n)],
            "fund_id": [f"F{i // 2:04d}" for i in range(n)],
            "name": [f"Fund {i}" for i in range(n)],
            "category": rng.choice(["Global Equity", "Korea Equity", "Balanced"], n),
            "sharpe_3y": rng.normal(0.5, 0.3, n),
            "return_3y": rng.normal(6, 3, n),
            "ongoing_cost": rng.uniform(0.2, 2, n),
            "max_drawdown_3y": -rng.uniform(5, 30, n),
            "information_ratio_3y": rng.normal(0, 0.5, n),
            "manager_tenure": rng.uniform(0.5, 15, n),
        }
    )


def _classes(shape: str):
    import transformers

    family, config = SHAPES[shape]
    return getattr(transformers, f"{family}Config"), getattr(transformers, f"{family}ForCausalLM"), config


def random_model(shape: str, tokenizer, dtype):
    """A randomly initialised model of `shape`, with the embedded tokenizer's special tokens (ids the random
    model samples beyond the tokenizer's vocabulary decode to nothing)."""
    config_class, model_class, config = _classes(shape)
    ids = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id, "bos_token_id": None}
    model = model_class(config_class(**config, **ids)).to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def parameters_of(shape: str) -> int:
    """The model's size without building it (the meta device).

    >>> round(parameters_of("qwen3-0.6b") / 1e6), round(parameters_of("smollm2-135m") / 1e6)
    (596, 135)
    """
    import torch

    config_class, model_class, config = _classes(shape)
    with torch.device("meta"):
        model = model_class(config_class(**config))
    return sum(p.numel() for p in model.parameters())


class StepClock:
    """A transformers callback: the wall time of each optimizer step and the logged values of `LOGGED` (a GRPO
    step whose rewards are all equal has no advantage, so no gradient: a step that learns shows a grad norm
    above zero); stops training after `stop` steps."""

    LOGGED = ("grad_norm", "reward", "reward_std", "frac_reward_zero_std", "loss")

    def __init__(self, stop: int | None = None):
        from transformers import TrainerCallback

        clock = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                clock.started = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                clock.seconds.append(time.perf_counter() - clock.started)
                if stop is not None and len(clock.seconds) >= stop:
                    control.should_training_stop = True

            def on_log(self, args, state, control, logs=None, **kwargs):
                for key in clock.LOGGED:
                    if logs and logs.get(key) is not None:
                        clock.logged.setdefault(key, []).append(round(float(logs[key]), 4))

        self.seconds: list[float] = []
        self.logged: dict[str, list[float]] = {}
        self.started = 0.0
        self.callback = Callback()


def _device() -> dict:
    import torch

    if torch.cuda.is_available():
        return {"device": torch.cuda.get_device_name(0), "cuda": torch.version.cuda}
    return {"device": f"CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads"}


def _peak_gb() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def _summary(seconds: list[float], warmup: int) -> dict:
    timed = seconds[warmup:] or seconds
    return {
        "seconds": [round(s, 3) for s in seconds],
        "median_s": round(statistics.median(timed), 3) if timed else None,
    }


def settings(profile: str, overrides: list[str]):
    """params.yaml with `profile` laid over it (none: params.yaml alone) and SECTION.KEY=VALUE overrides
    (VALUE read as YAML; KEY may go deeper: grpo.lora.r=8), checked as the stages check them."""
    import yaml

    from fundgrpo import profiles
    from fundgrpo.params import Params, from_dict, read_yaml

    data = (
        profiles.merged(profile, REPO / "params.yaml", REPO / "profiles")
        if profile
        else read_yaml(REPO / "params.yaml")
    )
    for item in overrides:
        key, _, value = item.partition("=")
        *path, field = key.split(".")
        node = data
        for part in path:
            node = node.setdefault(part, {})
        node[field] = yaml.safe_load(value)
    return from_dict(Params, data)


def time_steps(args) -> dict:
    """Build the prompts and the model, then time SFT (`--sft-steps`) and GRPO (`--steps`) steps."""
    sys.path.insert(0, str(REPO))
    import torch
    from transformers import AutoTokenizer

    from fundgrpo.methodology import compiler, preparation
    from fundgrpo.model import modelling
    from fundgrpo.params import ModelParams
    from fundgrpo.training import grpo_trainer, sft_trainer

    overrides = ["grpo.use_vllm=false", "grpo.eval_steps=0", "grpo.save_steps=0", "grpo.logging_steps=1",
                 "grpo.early_stopping_patience=0", "grpo.resume=false", *args.set]  # fmt: skip
    p = settings(args.profile, [*overrides, f"grpo.max_steps={args.steps}"])
    profile_steps = settings(args.profile, []).grpo.max_steps
    methodology = compiler.load(REPO / p.methodology.path)
    schema = compiler.output_schema(methodology)
    table = funds(args.funds)
    rule = compiler.rule_score(methodology, table)
    table["expert_grade"], table["expert_score"] = rule["rule_grade"].astype("Int64"), rule["rule_score"]
    data, _ = preparation.run(table, methodology, p.prepare)
    train = data["train"]

    record: dict = {
        "shape": args.shape,
        "profile": args.profile,
        "overrides": overrides,
        "funds": args.funds,
        "train_rows": len(train),
        **_device(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "grpo": {
            k: getattr(p.grpo, k)
            for k in ("per_device_train_batch_size", "num_generations", "max_completion_length", "bf16", "use_vllm")
        }
        | {"lora_r": p.grpo.lora.r if p.grpo.lora.enabled else None, "profile_steps": profile_steps},
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # the embedded tokenizer (and model), trained on these prompts as the `model` stage does
        embedded = ModelParams()
        modelling.build_base(embedded, train, root / "base")
        if args.shape in SHAPES:
            tokenizer = AutoTokenizer.from_pretrained(root / "base")
            dtype = torch.bfloat16 if p.grpo.bf16 else torch.float32
            model = random_model(args.shape, tokenizer, dtype)
            model.save_pretrained(root / "base")
            record["parameters"] = sum(x.numel() for x in model.parameters())
            del model
            model_params = ModelParams(dtype=p.model.dtype)
        else:
            model_params = embedded
            record["parameters"] = sum(
                x.numel() for x in modelling.load(root / "base")[0].parameters()
            )  # fmt: skip
        start = root / "base"
        if args.sft_steps:
            clock = StepClock(stop=None if args.sft_steps == "all" else args.sft_steps)
            began = time.perf_counter()
            sft_trainer.run(p.sft, model_params, root / "base", train, root / "sft", callbacks=[clock.callback])
            record["sft"] = {
                **_summary(clock.seconds, 1),
                "steps": len(clock.seconds),
                "logged": clock.logged,
                "batch_size": p.sft.batch_size,
                "bf16": p.sft.bf16,
                "whole_s": round(time.perf_counter() - began, 1),
                "peak_gb": _peak_gb(),
            }
            start = root / "sft"
            print(f"sft: {len(clock.seconds)} steps, median {record['sft']['median_s']} s", flush=True)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        clock = StepClock()
        began = time.perf_counter()
        grpo_trainer.run(p.grpo, model_params, start, train, methodology, schema, root / "policy",
                         callbacks=[clock.callback])  # fmt: skip
        record["grpo"] |= {**_summary(clock.seconds, 1), "whole_s": round(time.perf_counter() - began, 1),
                           "peak_gb": _peak_gb(), "logged": clock.logged}  # fmt: skip
        if record["grpo"]["median_s"] is not None:
            record["grpo"]["profile_minutes"] = round(record["grpo"]["median_s"] * profile_steps / 60, 1)
        print(f"grpo: {len(clock.seconds)} steps, median {record['grpo']['median_s']} s", flush=True)
        if args.generate_batches:
            record["generate"] = time_generation(p, root / "policy", train, args.generate_batches)
            print(f"generate: {record['generate']['batch_s']} s a batch", flush=True)
    return record


def _median(steps: dict, key: str) -> str:
    """The median of a logged value over a run's steps ('' where the run logged none: older results).

    >>> _median({"logged": {"grad_norm": [0.0, 0.9, 2.6]}}, "grad_norm"), _median({}, "reward")
    ('0.9', '')
    """
    values = steps.get("logged", {}).get(key)
    return f"{statistics.median(values):.3g}" if values else ""


def time_generation(p, policy: Path, train: list, batches: int) -> dict:
    """Greedy answers as calibrate and backtest write them (`modelling.generate`, at `generation`'s batch size,
    answer length and dtype) for `batches` batches of prompts: seconds a batch, the first (warm-up) apart."""
    from fundgrpo.model import modelling

    model, tokenizer = modelling.load(policy, p.generation.dtype)
    size, tokens = p.generation.batch_size, p.generation.max_new_tokens
    prompts = [r.prompt for r in train][: size * batches]
    seconds = []
    for start in range(0, len(prompts), size):
        began = time.perf_counter()
        modelling.generate(model, tokenizer, prompts[start : start + size], tokens, size, desc="generate")
        seconds.append(round(time.perf_counter() - began, 2))
    return {"batch_size": size, "max_new_tokens": tokens, "dtype": p.generation.dtype, "seconds": seconds,
            "batch_s": _summary(seconds, 1)["median_s"], "peak_gb": _peak_gb()}  # fmt: skip


def report(results: Path = RESULTS) -> str:
    lines = [
        "# SFT and GRPO steps on a GPU",
        "",
        "Generated by `python benchmarks/time/gpu_grpo.py report` from `research/results/gpu/` (runs of",
        "`python benchmarks/time/gpu_grpo.py time`, most on a borrowed GPU through `benchmarks/gpu_run.sh`). Seconds",
        "a step are medians after the first step; the profile's minutes are that median times its GRPO steps.",
        "Greedy seconds a batch: answers as calibrate and backtest write them, after a first batch of warm-up.",
        "Reward and grad norm are medians over the GRPO steps: a grad norm of 0 means every reward was equal",
        "(a random model's answers never parse), so the step's time was measured but nothing was learnt.",
        "",
        "| run | device | shape | parameters | GRPO batch × generations | completion tokens | vLLM | GRPO s/step "
        "| GRPO peak GB | profile's steps (min) | SFT s/step | greedy s/batch (batch × tokens) | GRPO reward "
        "| GRPO grad norm | outcome |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(results.glob("*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        g, s, gen = r.get("grpo", {}), r.get("sft", {}), r.get("generate")
        greedy = f"{gen['batch_s']} ({gen['batch_size']} × {gen['max_new_tokens']})" if gen else ""
        outcome = "ok" if "error" not in r else f"failed: {r['error'].strip().splitlines()[-1][:120]}"
        lines.append(
            f"| {path.stem} | {r.get('device', '')} | {r.get('shape', '')} | {r.get('parameters', 0) / 1e6:.1f} M "
            f"| {g.get('per_device_train_batch_size', '')} × {g.get('num_generations', '')} "
            f"| {g.get('max_completion_length', '')} | {g.get('use_vllm', '')} | {g.get('median_s', '')} "
            f"| {g.get('peak_gb') or ''} | {g.get('profile_minutes', '')} | {s.get('median_s', '')} | {greedy} "
            f"| {_median(g, 'reward')} | {_median(g, 'grad_norm')} | {outcome} |"
        )
    return "\n".join(lines) + "\n"


def _sft_steps(value: str) -> int | str:
    """`--sft-steps`: a number of steps, or `all`.

    >>> _sft_steps("30"), _sft_steps("all")
    (30, 'all')
    """
    return value if value == "all" else int(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time", help="time SFT and GRPO steps on this machine's device")
    t.add_argument("--shape", choices=[*SHAPES, "embedded"], default="qwen3-0.6b")
    t.add_argument("--profile", default="gpu-qwen3", help="the profile whose settings are timed ('' for params.yaml)")
    t.add_argument("--steps", type=int, default=4, help="GRPO steps (the first is not counted in the median)")
    t.add_argument(
        "--sft-steps", type=_sft_steps, default=0, help="SFT steps before GRPO (0: none; all: the SFT's whole schedule)"
    )
    t.add_argument("--funds", type=int, default=256)
    t.add_argument("--generate-batches", type=int, default=0, help="then time greedy generation over this many batches")
    t.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    t.add_argument("--label", default=None, help="the result's name (default: shape and date)")
    t.add_argument("--out", type=Path, default=RESULTS)
    t.add_argument("--dry-run", action="store_true", help="print the model's size and the settings; run nothing")
    sub.add_parser("report", help=f"write {PAGE.relative_to(REPO)} from the results")
    args = ap.parse_args()
    if args.cmd == "report":
        PAGE.write_text(report(), encoding="utf-8")
        print(PAGE)
        return
    if args.dry_run:
        print(json.dumps({"shape": args.shape, "parameters": parameters_of(args.shape) if args.shape != "embedded"
                          else None, "profile": args.profile}))  # fmt: skip
        return
    label = args.label or f"{args.shape}-{time.strftime('%Y%m%d-%H%M%S')}"
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        record = time_steps(args)
    except Exception:
        record = {"shape": args.shape, "profile": args.profile, **_device(), "error": traceback.format_exc()}
        print(record["error"], file=sys.stderr)
    record["label"], record["date"] = label, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = args.out / f"{label}.json"
    out.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    print(out)
    if "error" in record:
        sys.exit(1)


if __name__ == "__main__":
    main()
