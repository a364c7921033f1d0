"""Each GRPO prompt run once per group, on a real (small, randomly initialised) causal LM: the loss's
log-probabilities and gradients, and greedy generation, are those of the whole rows."""

from __future__ import annotations

import pytest

from fundgrpo.model import modelling
from fundgrpo.params import ModelArchParams
from fundgrpo.training import prompt_sharing


@pytest.fixture(scope="module")
def small():
    import torch
    from trl.trainer.utils import add_fused_lm_head

    torch.set_num_threads(1)
    corpus = ["Rate this fund: Sharpe ratio top 10%, cost bottom 30%.", '{"score": 71, "grade": 4} 0123456789'] * 20
    tokenizer = modelling.build_tokenizer(corpus, 300)
    arch = ModelArchParams(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=16)  # fmt: skip
    model = modelling.build_model(arch, tokenizer)
    add_fused_lm_head(model)  # as TRL's GRPOTrainer does
    return model, tokenizer


def batches(model, calls: list):
    """Record the (rows, tokens) of each forward pass of the model's backbone into `calls`."""

    def record(module, args, kwargs):
        calls.append(tuple(kwargs["input_ids"].shape))

    return model.model.register_forward_pre_hook(record, with_kwargs=True)


def rows(tokenizer, prompts: list[str], repeats: int, order: list[int]):
    """The prompts left-padded, each repeated `repeats` times, the rows in `order`."""
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    index = [i // repeats for i in range(len(prompts) * repeats)]
    index = [index[i] for i in order]
    return batch["input_ids"][index], batch["attention_mask"][index]


def test_the_loss_sees_the_same_log_probabilities_and_gradients_with_each_prompt_run_once(small):
    import torch

    model, tokenizer = small
    order = [5, 0, 9, 3, 11, 1, 7, 2, 10, 4, 8, 6]  # TRL shuffles a step's rows
    prompt_ids, prompt_mask = rows(tokenizer, ["Rate this fund:", "Sharpe ratio top 10%, cost", "0123"], 4, order)
    generator = torch.Generator().manual_seed(0)
    completion = torch.randint(3, len(tokenizer), (12, 6), generator=generator)
    completion_mask = torch.ones_like(completion)
    for row, length in enumerate([6, 2, 4, 6, 1, 5, 6, 3, 6, 6, 2, 4]):
        completion_mask[row, length:] = 0  # ended early: padding after the end
    ids, mask = torch.cat([prompt_ids, completion], 1), torch.cat([prompt_mask, completion_mask], 1)
    keep = completion.size(1)

    def whole():  # TRL's own `_get_per_token_logps_and_entropies`
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-keep] = -100
        return model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs[:, -keep:]

    def shared():
        return prompt_sharing.completion_logps(model, model, ids, mask, keep)[0]

    found = {}
    for name, fn in (("whole", whole), ("shared", shared)):
        model.zero_grad()
        calls: list = []
        hook = batches(model, calls)
        logps = fn()
        hook.remove()
        (logps * completion_mask).sum().backward()
        found[name] = (logps.detach(), [p.grad.clone() for p in model.parameters()], calls)
    assert found["whole"][2] == [(12, ids.size(1))]
    assert found["shared"][2] == [(3, prompt_ids.size(1) - 1), (12, keep + 1)]  # each prompt once, then the rows
    assert torch.allclose(found["shared"][0], found["whole"][0], atol=1e-5)
    assert (found["shared"][0][completion_mask == 0] == 0).all()
    for shared, whole in zip(found["shared"][1], found["whole"][1]):
        assert torch.allclose(shared, whole, atol=1e-5, rtol=1e-4)


def test_generation_from_the_prefill_is_generation_from_the_whole_prompt(small):
    import torch

    model, tokenizer = small
    ids, mask = rows(tokenizer, ["Rate this fund:", "Sharpe ratio top 10%, cost"], 3, [0, 1, 2, 3, 4, 5])
    assert mask[0].sum() < mask[-1].sum()  # the first prompt is left-padded
    settings = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    settings |= {"output_scores": True, "return_dict_in_generate": True}
    with torch.no_grad():
        whole = model.generate(input_ids=ids, attention_mask=mask, **settings)
        calls: list = []
        hook = batches(model, calls)
        with prompt_sharing.generating_from_prefill(model):
            shared = model.generate(input_ids=ids, attention_mask=mask, **settings)
        hook.remove()
    assert calls[0] == (2, ids.size(1) - 1) and calls[1] == (6, 1)  # each prompt once; then one token a row
    assert torch.equal(shared.sequences, whole.sequences)
    # every step's distribution, not only its greedy pick: sampling draws from these. A cache whose positions
    # counted the pads put the padded prompt's next tokens off by its padding (seen: half the sampled answers
    # of a trained model invalid JSON, while the greedy tokens of this random model still agreed)
    for step_whole, step_shared in zip(whole.scores, shared.scores, strict=True):
        torch.testing.assert_close(step_shared, step_whole, rtol=0, atol=1e-5)
    assert "generate" not in vars(model)  # the model's own generate is back
