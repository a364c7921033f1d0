"""Stage `train`: GRPO with TRL's `GRPOTrainer`, starting from the SFT model.

Rewards: JSON-schema validity, grade agreement (ordinal), score closeness,
reasoning that cites the evidence, and length, weighted by `grpo.reward_weights`.
Every GRPO setting lives in params.yaml (`grpo:`); see TRL's GRPOConfig for each.
"""

from __future__ import annotations

import time
from pathlib import Path

from fundgrpo import io, modelling
from fundgrpo.cli import run_stage
from fundgrpo.methodology import load_compiled
from fundgrpo.params import GrpoParams, ModelParams, load_params
from fundgrpo.rewards import make_rewards
from fundgrpo.training import curves, lora_config, model_init_kwargs, save_model, use_cpu

REWARD_ORDER = ("json", "grade", "score", "evidence", "length")


def reward_names(params: GrpoParams) -> list[str]:
    """The rewards in use, in order: the five rule rewards, plus the judge when enabled."""
    return list(REWARD_ORDER) + (["judge"] if params.judge.enabled else [])


def grpo_config(params: GrpoParams, model_params: ModelParams, out_dir: Path):
    from trl import GRPOConfig

    weights = params.reward_weights
    return GRPOConfig(
        output_dir=str(out_dir / "checkpoints"),
        max_steps=params.max_steps,
        learning_rate=params.learning_rate,
        warmup_steps=params.warmup_steps,
        lr_scheduler_type=params.lr_scheduler_type,
        per_device_train_batch_size=params.per_device_train_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        num_generations=params.num_generations,
        max_completion_length=params.max_completion_length,
        temperature=params.temperature,
        beta=params.beta,
        loss_type=params.loss_type,
        epsilon=params.epsilon,
        epsilon_high=params.epsilon_high,
        scale_rewards=params.scale_rewards,
        reward_weights=[getattr(weights, name) for name in reward_names(params)],
        logging_steps=params.logging_steps,
        save_strategy="no",
        report_to="none",
        seed=params.seed,
        bf16=params.bf16,
        use_cpu=use_cpu(),
        gradient_checkpointing=False,
        use_vllm=params.use_vllm,
        vllm_mode=params.vllm_mode,
        model_init_kwargs=model_init_kwargs(model_params),
    )


def run(
    params: GrpoParams,
    model_params: ModelParams,
    start_dir: Path,
    train_rows: list[dict],
    rubric: dict,
    schema: dict,
    out_dir: Path,
) -> dict:
    """Train the policy from `start_dir`; save it into `out_dir`; return a summary with curves."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    out_dir.mkdir(parents=True, exist_ok=True)
    source = modelling.resolve(start_dir)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    rewards = make_rewards(rubric, schema, params.score_tolerance, tuple(params.reasoning_chars), params.grade_step_penalty)
    if params.judge.enabled:
        from fundgrpo.judge import make_judge_reward

        rewards["judge"] = make_judge_reward(params.judge)
    columns = ("prompt", "expert_grade", "expert_score", "evidence")
    dataset = Dataset.from_list([{k: r[k] for k in columns} for r in train_rows])
    trainer = GRPOTrainer(
        model=source,
        reward_funcs=[rewards[name] for name in reward_names(params)],
        args=grpo_config(params, model_params, out_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(params.lora),
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    save_model(trainer, tokenizer, out_dir, merge_lora=not model_params.load_in_4bit)
    keys = ["reward", "reward_std", "loss", "kl", "completions/mean_length"] + [f"rewards/{n}_reward/mean" for n in reward_names(params)]
    rows = curves(trainer.state.log_history, keys)
    first, last = rows[0] if rows else {}, rows[-1] if rows else {}
    return {
        "steps": trainer.state.global_step,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(1, trainer.state.global_step), 3),
        # Compute spent, for scaling fits: device-seconds of the training loop.
        "compute_device_seconds": round(seconds, 1),
        "reward_first": first.get("reward"),
        "reward_last": last.get("reward"),
        "grade_reward_first": first.get("rewards/grade_reward/mean"),
        "grade_reward_last": last.get("rewards/grade_reward/mean"),
        "curves": rows,
    }


def plot_curves(rows: list[dict], path: Path) -> None:
    """Reward curves as a PNG (total and each reward's mean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r["step"] for r in rows]
    reward_keys = sorted({k for r in rows for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    for key in ["reward"] + reward_keys:
        ys = [r.get(key) for r in rows]
        if any(y is not None for y in ys):
            ax.plot(steps, ys, label=key.replace("rewards/", "").replace("/mean", ""), lw=2 if key == "reward" else 1)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
        schema_dir = Path(p.methodology.out_dir)
        rubric, schema = load_compiled(schema_dir)
        with io.atomic_path(p.grpo.out_dir) as tmp:
            summary = run(p.grpo, p.model, Path(p.sft.out_dir), rows, rubric, schema, tmp)
            import shutil

            shutil.rmtree(tmp / "checkpoints", ignore_errors=True)
        curve_rows = summary.pop("curves")
        flat = [{k.replace("rewards/", "").replace("/mean", ""): v for k, v in r.items()} for r in curve_rows]
        io.write_json(flat, "plots/train_rewards.json")
        plot_curves(curve_rows, Path("reports/train/rewards.png"))
        io.write_json(summary, "metrics/train.json")
        print(f"train: {summary}")

    run_stage("train", body)


if __name__ == "__main__":
    main()
