"""The stated confidence paid by the calibration reward alone (`grpo.confidence_advantage: own`): TRL's
advantages reproduced from the rewards, the confidence's tokens found with the project's own tokenizer,
and a real GRPO step of a small model taking an advantage per token."""

from __future__ import annotations

import pytest

from fundgrpo.model import modelling
from fundgrpo.params import ModelArchParams
from fundgrpo.training import confidence_credit

ANSWER = '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 4, "confidence": 80}'


@pytest.fixture(scope="module")
def tokenizer():
    return modelling.build_tokenizer(["Rate this fund: Sharpe ratio top 10%, cost bottom 30%.", ANSWER] * 20, 300)


@pytest.mark.parametrize("merges", ["words", "phrases"])
def test_the_confidence_starts_at_the_token_that_reaches_its_key(merges):
    tok = modelling.build_tokenizer(["Rate this fund: Sharpe ratio top 10%.", ANSWER] * 20, 300, merges=merges)
    ids = tok(ANSWER, add_special_tokens=False)["input_ids"]
    start = confidence_credit.confidence_start(tok, ids)
    assert start is not None
    before, after = tok.decode(ids[:start]), tok.decode(ids[start:])
    assert '"confidence"' not in before and "71" in before
    assert '"confidence"' in after and after.endswith("80}")
    unsaid = tok(ANSWER[:-18] + "}", add_special_tokens=False)["input_ids"]
    assert confidence_credit.confidence_start(tok, unsaid) is None


@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_one_step_of_grpo_takes_the_rest_before_the_confidence_and_its_own_reward_after(
    tmp_path, tokenizer, aggregation, scale
):
    """A real GRPOTrainer step: with `own`, a completion's tokens before its confidence take TRL's advantage
    of the other rewards, those after the calibration reward's against the group's completions that wrote
    the same grade; TRL's own advantage of all the rewards is what `confidence_credit.advantages` computes
    from the same rewards."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    arch = ModelArchParams(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=16)  # fmt: skip
    modelling.build_model(arch, tokenizer).save_pretrained(tmp_path / "start")
    tokenizer.save_pretrained(tmp_path / "start")
    tokenizer.padding_side = "left"
    said = ['"grade": 4, "confidence": 80}', '"grade": 4, "confidence": 20}', '"grade": 3, "confidence": 9}', "",
            '"grade": 2, "confidence": 55}', '"grade": 2, "confidence": 50}', '"grade": 2}', "x"]  # fmt: skip

    def answered(completions, **columns):  # every completion states a confidence where `said` gives one
        return [float(len(c) % 3) for c in completions]

    def calibration(completions, **columns):
        return [float(i % 3) if i != 5 else None for i in range(len(completions))]  # one unscored

    seen = {}

    class Recording(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            ids = out["completion_ids"]
            # completions rewritten to text with and without a confidence key, as the rewards read them
            texts = [said[i % len(said)] for i in range(ids.size(0))]
            encoded = [tokenizer(t, add_special_tokens=False)["input_ids"][: ids.size(1)] for t in texts]
            pad = tokenizer.pad_token_id
            out["completion_ids"] = torch.tensor([e + [pad] * (ids.size(1) - len(e)) for e in encoded])
            out["completion_mask"] = torch.tensor([[1] * len(e) + [0] * (ids.size(1) - len(e)) for e in encoded])
            seen["trl"], seen["rewards"] = out["advantages"].clone(), self._rewards_seen.clone()
            seen["starts"] = [confidence_credit.confidence_start(tokenizer, e) for e in encoded]
            return out

    class LossRecording(confidence_credit.owning_confidence(Recording, calibration=1)):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            seen["per_token"] = out["advantages"].clone()
            return out

        def _compute_loss(self, model, inputs):  # TRL shuffles the rows before the loss
            seen["loss"] = inputs["advantages"].clone()
            return super()._compute_loss(model, inputs)

    config = GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=8, num_generations=4,
        max_completion_length=24, report_to="none", use_cpu=True, multi_objective_aggregation=aggregation,
        scale_rewards=scale, reward_weights=[2.0, 1.0], logging_steps=1, save_strategy="no",
    )  # fmt: skip
    trainer = LossRecording(
        model=str(tmp_path / "start"), reward_funcs=[answered, calibration], args=config,
        train_dataset=Dataset.from_list([{"prompt": f"Rate this fund {i}:"} for i in range(8)]),
        processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()
    rewards, weights = seen["rewards"], torch.tensor([2.0, 1.0])
    both = confidence_credit.advantages(rewards, weights, 4, aggregation, scale)
    assert torch.allclose(both, seen["trl"], atol=1e-5)  # TRL's formula, reproduced
    rest = confidence_credit.advantages(rewards, torch.tensor([2.0, 0.0]), 4, aggregation, scale)
    grades = [confidence_credit.written_grade(t) for t in said]
    assert grades == [4, 4, 3, None, 2, 2, 2, None]
    own = confidence_credit.by_grade(rewards[:, 1], grades, 4)
    assert own[[0, 1, 4, 6]].abs().min() > 0.5 and (own[[2, 3, 5, 7]] == 0).all()  # alone, unscored: no signal
    per_token = seen["per_token"]
    length = per_token.size(1)
    assert per_token.shape == seen["loss"].shape == (8, length)
    assert sorted(map(tuple, seen["loss"].tolist())) == sorted(map(tuple, per_token.tolist()))
    starts = seen["starts"]
    assert [s is None for s in starts] == [False, False, False, True, False, False, True, True]
    for row, start in enumerate(starts):
        start = length if start is None else start
        assert torch.allclose(per_token[row, :start], rest[row].expand(start))
        assert torch.allclose(per_token[row, start:], own[row].expand(length - start))


def test_own_needs_a_stated_confidence_and_a_calibration_weight():
    from fundgrpo.params import Params, ParamsError, from_dict

    with pytest.raises(ParamsError, match="prepare.stated_confidence"):
        from_dict(Params, {"grpo": {"confidence_advantage": "own"}})
    with pytest.raises(ParamsError, match="reward_weights.calibration is 0"):
        from_dict(Params, {"grpo": {"confidence_advantage": "own", "reward_weights": {"calibration": 0.0}}})
    with pytest.raises(ParamsError, match="confidence_advantage"):
        from_dict(Params, {"grpo": {"confidence_advantage": "mine"}})
    both = {"grpo": {"confidence_advantage": "own"}, "prepare": {"stated_confidence": True}}
    assert from_dict(Params, both).grpo.confidence_advantage == "own"
