"""SFT (stage `sft`): supervised cold start on the reference answers (TRL `SFTTrainer`).

It teaches the answer format and a first grading policy; GRPO then sharpens what
this policy can already sample. With `sft.enabled: false` the stage writes a
pointer to the base model and GRPO starts from it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from fundgrpo import io
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import modelling
from fundgrpo.params import ModelParams, SftParams
from fundgrpo.training.shared import (
    inputs_digest,
    lora_config,
    model_init_kwargs,
    prepare_checkpoints,
    save_model,
    use_cpu,
)


def to_sft_rows(rows: list[PromptRecord]) -> list[dict]:
    """Prompt-completion conversations: the loss falls on the answer only."""
    return [{"prompt": r.prompt, "completion": [{"role": "assistant", "content": r.reference}]} for r in rows]


def sft_config(params: SftParams, model_params: ModelParams, output_dir: Path):
    """TRL's SFTConfig from params: the CPU and GPU profiles differ only in what params say."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=params.epochs,
        learning_rate=params.learning_rate,
        lr_scheduler_type=params.lr_scheduler_type,
        warmup_steps=params.warmup_steps,
        per_device_train_batch_size=params.batch_size,
        max_length=params.max_length,
        logging_steps=params.logging_steps,
        save_strategy="steps" if params.save_steps else "no",
        save_steps=params.save_steps or 500,
        save_total_limit=2,  # resuming reads the last whole one: the one before stands in for one cut mid-write
        report_to="none",
        seed=params.seed,
        bf16=params.bf16,
        use_cpu=use_cpu(),
        model_init_kwargs=model_init_kwargs(model_params),
        activation_offloading=False,
        activation_checkpointing=False,  # TRL turns it on by default; `gradient_checkpointing`, its old name, warns
    )


def run(
    params: SftParams,
    model_params: ModelParams,
    base_dir: Path,
    train_rows: list[PromptRecord],
    out_dir: Path,
    callbacks: list | None = None,
    checkpoint_dir: Path | None = None,
) -> dict:
    """Fine-tune the base model on `train_rows`; save model and tokenizer into `out_dir`.

    With `sft.lora.enabled` only LoRA adapters train; they are merged into the base weights
    before saving, so every later stage (and the MLflow model) loads one plain folder.
    `callbacks` (transformers `TrainerCallback`s) watch the run, e.g. a per-epoch evaluation.
    With `params.save_steps` checkpoints go to `checkpoint_dir` (outside the atomic output, so they
    survive a crash), and with `params.resume` a rerun with the same params, rows and start continues
    from the last one (`shared.prepare_checkpoints`).
    """
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    source = modelling.resolve(base_dir)
    if not params.enabled:
        (out_dir / modelling.POINTER).write_text(json.dumps({"name_or_path": source}) + "\n")
        return {"skipped": True}

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(source)
    checkpoint_dir = checkpoint_dir or out_dir / "checkpoints"
    resume = prepare_checkpoints(checkpoint_dir, params, base_dir, inputs_digest(train_rows))
    trainer = SFTTrainer(
        model=source,
        args=sft_config(params, model_params, checkpoint_dir),
        train_dataset=Dataset.from_list(to_sft_rows(train_rows)),
        processing_class=tokenizer,
        peft_config=lora_config(params.lora, source),
        callbacks=callbacks,
    )
    result = trainer.train(resume_from_checkpoint=resume)
    save_model(trainer, tokenizer, out_dir, merge_lora=not model_params.load_in_4bit)
    io.write_json(trainer.state.log_history, out_dir / "log_history.json")
    shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)  # the trainer's scratch, when no folder was given
    return {
        "resumed_from": resume,
        "train_loss": round(result.training_loss, 4),
        "steps": result.global_step,
        "seconds": round(result.metrics["train_runtime"], 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": io.peak_rss_mb(),
    }
