"""The GRPO settings reach TRL's GRPOConfig as params.yaml states them."""

from __future__ import annotations

from dataclasses import replace

from fundgrpo.params import GrpoParams, ModelParams


def test_sampling_and_reward_aggregation_reach_trl(tmp_path):
    from fundgrpo.training.grpo_trainer import grpo_config

    params = replace(GrpoParams(), temperature=0.7, multi_objective_aggregation="normalize_then_sum")
    config = grpo_config(params, ModelParams(), tmp_path)
    assert config.temperature == 0.7 and config.multi_objective_aggregation == "normalize_then_sum"
    assert grpo_config(GrpoParams(), ModelParams(), tmp_path).multi_objective_aggregation == "sum_then_normalize"
