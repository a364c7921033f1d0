"""The GPU profile (profiles/gpu-qwen3.yaml) shares the CPU code path: its trainer configs are
built here, without a GPU, so that a configuration error surfaces in CI and not on the A6000."""

from __future__ import annotations

from fundgrpo.params import Params, from_dict
from fundgrpo.profiles import merged
from tests.support import REPO


def test_gpu_profile_builds_its_sft_grpo_and_lora_configs(tmp_path):
    from fundgrpo.training.grpo_trainer import grpo_config
    from fundgrpo.training.sft_trainer import sft_config
    from fundgrpo.training.shared import lora_config

    p = from_dict(Params, merged(["morningstar", "gpu-qwen3"], REPO / "params.yaml", REPO / "profiles"))
    sft = sft_config(p.sft, p.model, tmp_path / "sft")
    assert sft.bf16 and sft.model_init_kwargs == {"dtype": "bfloat16"} and sft.per_device_train_batch_size == 8
    grpo = grpo_config(p.grpo, p.model, tmp_path / "grpo")
    assert grpo.bf16 and grpo.use_vllm and grpo.vllm_mode == "colocate"
    assert grpo.per_device_train_batch_size % grpo.num_generations == 0 and grpo.max_completion_length == 160
    assert grpo.metric_for_best_model == "eval_greedy_qwk"  # the data profile's choice of kept model stays
    assert p.generation.dtype == "bfloat16"  # funds evaluated with the weights bf16 trained them in
    for lora in (p.sft.lora, p.grpo.lora):
        assert lora_config(lora).r == 16
    # the CPU profile differs in what params say, not in code: same builders, other values
    cpu = from_dict(Params, merged(["morningstar", "smollm2"], REPO / "params.yaml", REPO / "profiles"))
    assert not grpo_config(cpu.grpo, cpu.model, tmp_path / "cpu").bf16
