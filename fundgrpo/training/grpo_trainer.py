"""GRPO (stage `grpo`): TRL's `GRPOTrainer`, starting from the SFT model.

Rewards (`fundgrpo.training.rewards`, in the order of `RULE_REWARDS`): JSON-schema validity, grade agreement
(ordinal), score closeness, reasoning that states the evidence rightly, length, stated confidence, departure
from the suggested grade, and with documents the citations and the qualitative judgements; weighted by
`grpo.reward_weights`.
Every GRPO setting lives in params.yaml (`grpo:`); see TRL's GRPOConfig for each.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from fundgrpo import io
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import modelling
from fundgrpo.params import GRPO_BEST_METRICS, RULE_REWARDS, GrpoParams, ModelParams
from fundgrpo.training import confidence_credit, prompt_sharing
from fundgrpo.training import rewards as rule_rewards
from fundgrpo.training.judge import make_judge_reward
from fundgrpo.training.shared import (
    COLLAPSED,
    GREEDY_METRICS,
    QUALITY,
    curves,
    greedy_validation_callback,
    inputs_digest,
    lora_config,
    model_init_kwargs,
    prepare_checkpoints,
    save_model,
    use_cpu,
)


def best_metric_key(params: GrpoParams) -> str:
    """The evaluation key that picks the kept model (see `GrpoParams.best_metric`)."""
    if params.best_metric not in GRPO_BEST_METRICS:
        raise ValueError(f"grpo.best_metric must be one of {GRPO_BEST_METRICS}, got {params.best_metric!r}")
    return "eval_reward" if params.best_metric == "reward" else f"eval_greedy_{params.best_metric}"


def reward_names(params: GrpoParams) -> list[str]:
    """The rewards in use, in order: the rule rewards (`RULE_REWARDS`), plus the judge when enabled."""
    return list(RULE_REWARDS) + (["judge"] if params.judge.enabled else [])


def grpo_config(params: GrpoParams, model_params: ModelParams, checkpoint_dir: Path, resuming: bool = False):
    from trl import GRPOConfig

    weights = params.reward_weights
    evaluate = params.eval_steps > 0
    return GRPOConfig(
        output_dir=str(checkpoint_dir),
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
        multi_objective_aggregation=params.multi_objective_aggregation,
        reward_weights=[getattr(weights, name) for name in reward_names(params)],
        logging_steps=params.logging_steps,
        save_strategy="steps" if params.save_steps else "no",
        save_steps=params.save_steps or 500,
        save_total_limit=2,  # the last and (when evaluating) the best
        eval_strategy="steps" if evaluate else "no",
        eval_steps=params.eval_steps or None,
        # The start's validation reward: R0 of the scaling fit, and what GRPO must improve on.
        # Not again on resume (it would draw from the generator and change the resumed curve).
        eval_on_start=evaluate and not resuming,
        per_device_eval_batch_size=params.per_device_train_batch_size,
        # Keep the best model by mean reward on validation prompts, not by the noisy training batch.
        load_best_model_at_end=evaluate and params.save_steps > 0,
        metric_for_best_model=best_metric_key(params) if evaluate else None,
        greater_is_better=True if evaluate else None,
        report_to="none",
        seed=params.seed,
        bf16=params.bf16,
        use_cpu=use_cpu(),
        activation_checkpointing=False,  # TRL turns it on by default; `gradient_checkpointing`, its old name, warns
        use_vllm=params.use_vllm,
        vllm_mode=params.vllm_mode,
        model_init_kwargs=model_init_kwargs(model_params),
    )


def run(
    params: GrpoParams,
    model_params: ModelParams,
    start_dir: Path,
    train_rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    out_dir: Path,
    eval_rows: list[PromptRecord] | None = None,
    checkpoint_dir: Path | None = None,
    callbacks: list | None = None,
) -> dict:
    """Train the policy from `start_dir`; save it into `out_dir`; return a summary with curves.

    Checkpoints go to `checkpoint_dir` (outside the atomic output, so they survive a crash);
    with `params.resume` a rerun with the same params continues from the last one.
    """
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    out_dir.mkdir(parents=True, exist_ok=True)
    source = modelling.resolve(start_dir)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    rewards = rule_rewards.bind(methodology, schema, params, train_rows)
    if params.judge.enabled:
        rewards["judge"] = make_judge_reward(params.judge)
    dataset, eval_dataset = datasets_of(params, train_rows, eval_rows)
    key = best_metric_key(params)
    callbacks = list(callbacks or [])
    if eval_dataset is not None and eval_rows:
        callbacks += validation_callbacks(params, eval_rows, methodology, schema, key)
    checkpoint_dir = checkpoint_dir or out_dir / "checkpoints"
    resume = prepare_checkpoints(checkpoint_dir, params, start_dir, inputs_digest([*train_rows, *(eval_rows or [])]))
    trainer_class = prompt_sharing.sharing_prompts(GRPOTrainer) if params.share_prompts else GRPOTrainer
    if params.confidence_advantage == "own":
        trainer_class = confidence_credit.owning_confidence(trainer_class, reward_names(params).index("calibration"))
    trainer = validating_apart(trainer_class, sampled=params.eval_prompts > 0)(
        model=source,
        reward_funcs=[rewards[name] for name in reward_names(params)],
        args=grpo_config(params, model_params, checkpoint_dir, resuming=resume is not None),
        train_dataset=dataset,
        eval_dataset=eval_dataset,
        callbacks=callbacks,
        processing_class=tokenizer,
        peft_config=lora_config(params.lora, source),
    )
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    greedy_keys = [
        f"eval_greedy_{m}"
        for m in ("valid_json", *GREEDY_METRICS, "top_grade", "top_share", "collapsed", "refused", *QUALITY)
    ]
    eval_curve = merged_by_step(curves(trainer.state.log_history, ["eval_reward", *greedy_keys]))
    start_value = next((r[key] for r in eval_curve if r["step"] == 0 and key in r), None)
    if any(r["step"] == 0 and r.get("eval_greedy_collapsed") for r in eval_curve):
        start_value = COLLAPSED
    keep_start = keeps_start(start_value, trainer.state.best_metric)
    say_selection(params, trainer.state.global_step, key, eval_curve, keep_start)
    if keep_start:
        from transformers import AutoModelForCausalLM

        kwargs = {k: v for k, v in model_init_kwargs(model_params).items() if k != "quantization_config"}
        AutoModelForCausalLM.from_pretrained(source, **kwargs).save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    else:
        save_model(trainer, tokenizer, out_dir, merge_lora=not model_params.load_in_4bit)
    return summary_of(
        params, trainer.state, seconds, eval_curve, start_value=start_value, keep_start=keep_start, resume=resume
    )


def datasets_of(params: GrpoParams, train_rows: list[PromptRecord], eval_rows: list[PromptRecord] | None):
    """(the training dataset, the sampled validation dataset or None), with the columns the rewards read."""
    from datasets import Dataset

    # what the rewards read; shown_grade None where the prompt suggests no grade
    columns: tuple[str, ...] = ("prompt", "expert_grade", "expert_score", "evidence", "shown_grade", "rule_grade")
    # with documents: what the citation and pillar rewards check against (`fundgrpo.methodology.citations`)
    columns += tuple(c for c in ("documents", "pillars") if any(getattr(r, c) is not None for r in train_rows))
    dataset = Dataset.from_list([{k: getattr(r, k) for k in columns} for r in train_rows])
    if not (params.eval_steps and eval_rows):
        return dataset, None
    # with eval_prompts 0 the Trainer still wants an evaluation set to schedule evaluations; it is never read
    shown = eval_rows[: params.eval_prompts or 1]
    return dataset, Dataset.from_list([{k: getattr(r, k) for k in columns} for r in shown])


def validation_callbacks(
    params: GrpoParams, eval_rows: list[PromptRecord], methodology: Methodology, schema: dict, key: str
) -> list:
    """The greedy answers to every validation prompt at each evaluation (their time: `greedy_eval_seconds`
    in the summary; a checkpoint whose answers collapse onto one grade scores COLLAPSED on the selection
    metric), then early stopping on it where configured."""
    from transformers import EarlyStoppingCallback

    out = [
        greedy_validation_callback(
            eval_rows,
            methodology,
            schema,
            params.max_completion_length,
            selection_key=key,
            collapse_share=params.collapse_share,
            qwk_tolerance=params.qwk_tolerance if params.best_metric == "evaluation" else None,
        )
    ]
    if params.early_stopping_patience and params.save_steps:
        # after the greedy validation, which puts the selection metric in the evaluation's metrics
        out.append(EarlyStoppingCallback(early_stopping_patience=params.early_stopping_patience))
    return out


def say_selection(params: GrpoParams, steps: int, key: str, eval_curve: list[dict], keep_start: bool) -> None:
    """Print why training stopped early and which evaluations were refused (collapsed, or losing QWK)."""
    if steps < params.max_steps:
        print(
            f"grpo: stopped at step {steps} of {params.max_steps}: "
            f"{params.early_stopping_patience} evaluations without a better {key} (grpo.early_stopping_patience)"
        )
    collapsed_steps = [r["step"] for r in eval_curve if r.get("eval_greedy_collapsed")]
    refused_steps = [r["step"] for r in eval_curve if r.get("eval_greedy_refused")]
    if refused_steps:
        print(
            f"grpo: greedy validation QWK fell more than grpo.qwk_tolerance={params.qwk_tolerance:g} below the "
            f"start's at step(s) {refused_steps}: those checkpoints were refused"
        )
    if collapsed_steps:
        print(
            f"grpo: greedy validation answers collapsed onto one grade (over {params.collapse_share:g} of funds) "
            f"at step(s) {collapsed_steps}: "
            + (
                "the SFT start itself is collapsed and is kept as no checkpoint did better; review SFT"
                if keep_start and 0 in collapsed_steps
                else "those checkpoints were refused"
            )
        )


def summary_of(
    params: GrpoParams, state, seconds: float, eval_curve: list[dict], start_value, keep_start: bool, resume
) -> dict:
    """The grpo stage's summary: time, memory, rewards first and last, what was selected and why, curves."""
    keys = ["reward", "reward_std", "loss", "kl", "completions/mean_length"] + [
        f"rewards/{n}_reward/mean" for n in reward_names(params)
    ]
    rows = curves(state.log_history, keys)
    first, last = rows[0] if rows else {}, rows[-1] if rows else {}
    return {
        "steps": state.global_step,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(1, state.global_step), 3),
        # of `seconds`, the evaluations: TRL's sampled one (`eval_runtime`) and the greedy answers
        # to every validation prompt
        "sampled_eval_seconds": round(sum(r.get("eval_runtime", 0.0) for r in state.log_history), 1),
        "greedy_eval_seconds": round(sum(r.get("greedy_eval_seconds", 0.0) for r in state.log_history), 1),
        # Compute spent, for scaling fits: device-seconds of the training loop.
        "compute_device_seconds": round(seconds, 1),
        "peak_rss_mb": io.peak_rss_mb(),
        "reward_first": first.get("reward"),
        "reward_last": last.get("reward"),
        "grade_reward_first": first.get("rewards/grade_reward/mean"),
        "grade_reward_last": last.get("rewards/grade_reward/mean"),
        "resumed_from": resume,
        "best_metric": params.best_metric,
        "start_value": start_value,
        "best_value": state.best_metric,
        # "start" when no trained step beat the start on validation, else the kept step
        "kept": "start" if keep_start else _step_of(state.best_model_checkpoint, state.global_step),
        # evaluations whose greedy answers collapsed onto one grade (never kept; see grpo.collapse_share)
        "collapsed_steps": [r["step"] for r in eval_curve if r.get("eval_greedy_collapsed")],
        # evaluations refused for losing greedy QWK (best_metric evaluation; grpo.qwk_tolerance)
        "refused_steps": [r["step"] for r in eval_curve if r.get("eval_greedy_refused")],
        "best_checkpoint": state.best_model_checkpoint,
        "best_eval_reward": max(
            (r["eval_reward"] for r in eval_curve if r["step"] > 0 and "eval_reward" in r), default=None
        ),
        "eval_curve": eval_curve,
        "curves": rows,
    }


def validating_apart(trainer_class, sampled: bool = True):
    """`trainer_class` whose evaluations draw from a copy of the random state, so training takes the
    same draws whatever an evaluation samples: with `sampled` False (`grpo.eval_prompts: 0`) TRL's own
    evaluation (it samples, rewards and scores a loss on validation prompts, which nothing reads unless
    `best_metric` is `reward`) is skipped and the greedy validation callback alone scores each
    checkpoint, and the training and the kept checkpoint are those the sampled validation gives."""
    import torch

    class ValidatingApart(trainer_class):
        def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
            python_state, numpy_state = random.getstate(), np.random.get_state()
            try:
                with torch.random.fork_rng():  # the CPU and every CUDA device
                    if sampled:
                        return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
                    metrics: dict[str, float] = {}
                    self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)  # type: ignore[has-type]
                    return metrics
            finally:
                random.setstate(python_state)
                np.random.set_state(numpy_state)

    return ValidatingApart


def keeps_start(start_value: float | None, best_value: float | None) -> bool:
    """The start competes too: GRPO's output is never worse on validation than its start,
    and a tie keeps the start (the steps added nothing measurable).

    >>> keeps_start(0.80, 0.82), keeps_start(0.80, 0.80), keeps_start(None, 0.5), keeps_start(0.8, None)
    (False, True, False, True)
    """
    return start_value is not None and (best_value is None or best_value <= start_value)


def merged_by_step(log: list[dict]) -> list[dict]:
    """One row per step: evaluations log their sampled reward and greedy metrics separately.

    >>> merged_by_step([{"step": 0, "a": 1}, {"step": 0, "b": 2}, {"step": 5, "a": 3}])
    [{'step': 0, 'a': 1, 'b': 2}, {'step': 5, 'a': 3}]
    """
    by_step: dict[int, dict] = {}
    for row in log:
        by_step.setdefault(row["step"], {}).update(row)
    return [by_step[k] for k in sorted(by_step)]


def _step_of(checkpoint: str | None, last_step: int) -> str:
    return f"step {checkpoint.rsplit('-', 1)[1]}" if checkpoint else f"step {last_step}"


def plot_curves(curve: list[dict], path: Path) -> None:
    """Reward curves as a PNG (total and each reward's mean; `curve`: one dict per logged step)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r["step"] for r in curve]
    reward_keys = sorted({k for r in curve for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    for key in ["reward"] + reward_keys:
        ys = [r.get(key) for r in curve]
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
