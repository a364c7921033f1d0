"""A GRPO group's completions share one prompt: run the prompt once (`grpo.share_prompts`).

TRL generates `num_generations` completions per prompt from the prompt repeated that many times,
and scores the loss on every (prompt, completion) row whole: with the default's 320-token prompts
and completions of at most 64 tokens, seven eighths of the tokens a step runs through the model are
copies. Here each distinct prompt runs once, its key-value cache is indexed out to every row that
repeats it, and only the completions run per row: for the loss (gradients flow back through the
cache into the shared prompt's pass, so the log-probabilities and gradients are TRL's, to float
rounding) and for the prefill of generation (`model.generate` continues from the cache). The same
arithmetic as the whole rows, computed once: no approximation and no new engine.
"""

from __future__ import annotations

import contextlib


def distinct_rows(ids, mask):
    """(the distinct rows of `ids`, their `mask`, and each row's distinct row as an index into them),
    or None when no row repeats another.

    >>> import torch
    >>> ids = torch.tensor([[7, 8, 9], [0, 5, 6], [7, 8, 9], [0, 5, 6]])
    >>> rows, masks, owner = distinct_rows(ids, (ids != 0).long())
    >>> rows.tolist(), masks.tolist(), owner.tolist()
    ([[0, 5, 6], [7, 8, 9]], [[0, 1, 1], [1, 1, 1]], [1, 0, 1, 0])
    >>> distinct_rows(ids[:2], (ids[:2] != 0).long()) is None
    True
    """
    import torch

    rows, owner = torch.unique(torch.cat([ids, mask.to(ids.dtype)], dim=1), dim=0, return_inverse=True)
    if rows.size(0) == ids.size(0):
        return None
    return rows[:, : ids.size(1)], rows[:, ids.size(1) :].to(mask.dtype), owner


def prefill(model, ids, mask, positions_from_mask: bool = False):
    """The key-value cache of every row of `ids`/`mask`, each distinct row run once through `model`
    (its batch then indexed out to the rows); None when no row repeats another. Differentiable:
    under autograd the gradient of every row reaches the distinct row's pass.

    `positions_from_mask`: a left-padded row's first token at position 0, as `model.generate` counts
    positions for the tokens it adds; without it the pads count, as in the loss's forward of whole rows.
    A cache and the tokens that continue it must count alike: rotary embeddings see only the distance
    between positions, and a cache counted the other way put every padded row's new tokens as many
    positions off as it had pads (sampled answers garbled where prompts differ in length)."""
    found = distinct_rows(ids, mask)
    if found is None:
        return None
    rows, masks, owner = found
    positions = None
    if positions_from_mask:
        positions = (masks.long().cumsum(-1) - 1).masked_fill(masks == 0, 1)  # as GenerationMixin computes them
    cache = model(
        input_ids=rows, attention_mask=masks, position_ids=positions, use_cache=True, logits_to_keep=1
    ).past_key_values
    cache.reorder_cache(owner)  # an index_select per layer: every row gets its prompt's keys and values
    return cache


@contextlib.contextmanager
def generating_from_prefill(model):
    """While open, `model.generate` runs each distinct prompt once (`prefill` of all but its last
    token) and generates every row from that cache; calls it cannot serve are passed on unchanged."""
    import torch

    original = model.generate

    def generate(*args, input_ids=None, attention_mask=None, **kwargs):
        if args or input_ids is None or attention_mask is None or "past_key_values" in kwargs or input_ids.size(1) < 2:
            return original(*args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        with torch.no_grad():
            cache = prefill(model, input_ids[:, :-1], attention_mask[:, :-1], positions_from_mask=True)
        if cache is not None:
            kwargs["past_key_values"] = cache
        return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    model.generate = generate  # on the instance, for TRL's own generation call; removed below
    try:
        yield
    finally:
        del model.generate


def completion_logps(model, module, ids, mask, logits_to_keep):
    """(log-probability, entropy) of each of the last `logits_to_keep` tokens of each row (0 where `mask`
    is 0), as TRL's fused head gives them (`trl.trainer.utils.add_fused_lm_head`), each distinct prompt
    (all but the last `logits_to_keep` tokens) run once. `module` runs the shared prompts: the model
    itself where `model` is a DDP wrapper, so that the wrapper sees one forward per backward."""
    prompt = ids.size(1) - logits_to_keep
    cache = prefill(module, ids[:, : prompt - 1], mask[:, : prompt - 1])  # the prompt's last token runs per row
    tail = ids[:, prompt - 1 :] if cache is not None else ids
    labels = tail.masked_fill(mask[:, -tail.size(1) :] == 0, -100)
    labels[:, : tail.size(1) - logits_to_keep] = -100  # only the completion is scored
    out = model(input_ids=tail, attention_mask=mask, past_key_values=cache, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -logits_to_keep:], (None if out.entropy is None else out.entropy[:, -logits_to_keep:])


def sharing_prompts(trainer_class):
    """`trainer_class` (TRL's `GRPOTrainer`) whose generation and loss run each distinct prompt once.
    Text-only rows; anything else (images, a mixture-of-experts loss, vLLM) takes TRL's own path."""
    import torch

    class SharingPrompts(trainer_class):  # type: ignore[valid-type,misc]  # TRL's class, given at run time
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, *args, **kwargs):
            if self.use_vllm or images is not None or multimodal_fields:
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, *args, **kwargs)
            with generating_from_prefill(self.accelerator.unwrap_model(self.model_wrapped)):
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, *args, **kwargs)

        def _get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
            compute_aux_loss=False, **multimodal,
        ):  # fmt: skip
            plain = not compute_aux_loss and all(v is None for v in multimodal.values())
            if not plain or input_ids.size(1) - logits_to_keep < 2:
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                    **multimodal,
                )  # fmt: skip
            batch_size = batch_size or input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), batch_size):
                rows = slice(start, start + batch_size)
                module = self.accelerator.unwrap_model(model)
                with self.accelerator.autocast():
                    lp, entropy = completion_logps(model, module, input_ids[rows], attention_mask[rows], logits_to_keep)
                logps.append(lp)
                entropies.append(entropy)
            return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

    return SharingPrompts
