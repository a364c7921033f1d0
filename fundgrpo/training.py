"""Pieces the SFT and GRPO stages share: device, dtype, LoRA, saving, curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fundgrpo.params import LoraParams, ModelParams


def use_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def model_init_kwargs(params: ModelParams) -> dict[str, Any]:
    """How TRL loads the model by path: dtype, and 4-bit quantisation for QLoRA."""
    kwargs: dict[str, Any] = {"dtype": params.dtype}
    if params.load_in_4bit:
        import torch
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
    return kwargs


def lora_config(params: LoraParams):
    if not params.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=params.r,
        lora_alpha=params.alpha,
        lora_dropout=params.dropout,
        target_modules=list(params.target_modules),
        task_type="CAUSAL_LM",
    )


def save_model(trainer, tokenizer, out_dir: Path, merge_lora: bool = True) -> None:
    """Save the trained model; a LoRA adapter is merged into its base unless quantised."""
    model = trainer.model
    if merge_lora and hasattr(model, "merge_and_unload") and not getattr(model, "is_loaded_in_4bit", False):
        model = model.merge_and_unload()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def curves(log_history: list[dict], keys: list[str]) -> list[dict]:
    """Rows of (step, key...) from a trainer's log history, for DVC plots.

    >>> curves([{"step": 5, "reward": 1.0, "loss": 0.1}, {"step": 6, "train_runtime": 3}], ["reward"])
    [{'step': 5, 'reward': 1.0}]
    """
    rows = []
    for entry in log_history:
        if any(k in entry for k in keys):
            rows.append({"step": entry["step"], **{k: entry[k] for k in keys if k in entry}})
    return rows
