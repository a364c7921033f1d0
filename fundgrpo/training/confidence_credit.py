"""The stated confidence paid by the calibration reward alone (`grpo.confidence_advantage: own`).

TRL gives every token of a completion one advantage, from the rewards summed. An answer that ends
`"grade": 4, "confidence": 99` then has its confidence tokens paid by the grade, evidence and
departure rewards too, and a sure-sounding confidence goes with right grades often enough that GRPO
learns to say 99 whatever it knows (on Morningstar, three seeds: 0.99 on every fund, right on 72 %;
benchmarks/seeds_notes.md), while the Brier reward pays a wrong grade stated at under 50 more than a
right one. Here each part of the answer is paid by the rewards that judge it: the tokens from the
`"confidence"` key to the end get the calibration reward's advantage alone (a proper scoring rule:
its best is the chance of being right given the answer written so far), every token before them the
other rewards'. Both advantages are TRL's formula over their rewards (`advantages`); TRL's loss takes
an advantage per token (`GRPOTrainer._compute_loss` accepts shape (B, T)).
"""

from __future__ import annotations

KEY = '"confidence"'


def advantages(rewards, weights, num_generations: int, aggregation: str, scale: str):
    """TRL's advantages of `rewards` (completions x reward functions, NaN where a function does not
    apply) under `weights`, as `GRPOTrainer._generate_and_score_completions` computes them; 0 for a
    completion every function left unscored.

    >>> import torch
    >>> r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    >>> [round(a, 3) for a in advantages(r, torch.tensor([1.0, 0.0]), 2, "sum_then_normalize", "group").tolist()]
    [0.707, -0.707, 0.707, -0.707]
    >>> advantages(r, torch.tensor([0.0, 1.0]), 2, "sum_then_normalize", "none").tolist()
    [-0.5, 0.5, 0.5, -0.5]
    """
    import torch
    from trl.trainer.utils import nanstd as std

    unscored = torch.isnan(rewards).all(dim=1)
    weights = weights.to(rewards.device)
    if aggregation == "normalize_then_sum":
        grouped = rewards.view(-1, num_generations, rewards.size(1))
        each = (grouped - torch.nanmean(grouped, dim=1, keepdim=True)) / (std(grouped, 1, keepdim=True) + 1e-4)
        total = (each.view(-1, rewards.size(1)) * weights).nansum(dim=1)
        total[unscored] = torch.nan
        out = (total - torch.nanmean(total)) / (std(total) + 1e-4)
    else:
        total = (rewards * weights).nansum(dim=1)
        total[unscored] = torch.nan
        grouped = total.view(-1, num_generations)
        out = total - torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
        if scale == "group":
            out = out / (std(grouped, 1).repeat_interleave(num_generations) + 1e-4)
        elif scale == "batch":
            out = out / (std(total) + 1e-4)
    return torch.nan_to_num(out, nan=0.0)


def confidence_start(tokenizer, ids: list[int]) -> int | None:
    """The index of the first token of `ids` whose text reaches the last `"confidence"` key; None
    when the completion states none. Decoded prefixes, searched by halves: a tokenizer may merge the
    key with the text around it, and that token counts as the confidence's.

    >>> class Chars:
    ...     def decode(self, ids, skip_special_tokens=True):
    ...         return "".join(chr(i) for i in ids)
    >>> text = '{"grade": 4, "confidence": 80}'
    >>> start = confidence_start(Chars(), [ord(c) for c in text])
    >>> text[start:]
    '"confidence": 80}'
    >>> confidence_start(Chars(), [ord(c) for c in '{"grade": 4}']) is None
    True
    """
    at = tokenizer.decode(ids, skip_special_tokens=True).rfind(KEY)
    if at < 0:
        return None
    low, high = 0, len(ids) - 1  # the first k whose prefix ids[: k + 1] decodes past `at`
    while low < high:
        mid = (low + high) // 2
        if len(tokenizer.decode(ids[: mid + 1], skip_special_tokens=True)) > at:
            high = mid
        else:
            low = mid + 1
    return low


def per_token(rest, own, starts: list[int | None], length: int):
    """Advantages per token: `rest` before each row's confidence start, `own` from it on.

    >>> import torch
    >>> per_token(torch.tensor([1.0, 2.0]), torch.tensor([-1.0, 5.0]), [2, None], 3).tolist()
    [[1.0, 1.0, -1.0], [2.0, 2.0, 2.0]]
    """
    out = rest.unsqueeze(1).repeat(1, length)
    for row, start in enumerate(starts):
        if start is not None:
            out[row, start:] = own[row]
    return out


def owning_confidence(trainer_class, calibration: int):
    """`trainer_class` (TRL's `GRPOTrainer` or a subclass) whose completions' confidence tokens are
    paid by reward function `calibration` alone and every other token by the rest."""

    class OwningConfidence(trainer_class):
        def _calculate_rewards(self, *args, **kwargs):
            self._rewards_seen = super()._calculate_rewards(*args, **kwargs)
            return self._rewards_seen

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            mode = "train" if self.model.training else "eval"
            rewards = self._rewards_seen  # every process's completions, as TRL normalises them
            groups = self.num_generations if mode == "train" else self.num_generations_eval
            weights = self.reward_weights.clone()
            weights[calibration] = 0.0
            alone = self.reward_weights.new_zeros(weights.shape)
            alone[calibration] = self.reward_weights[calibration]
            rest = advantages(rewards, weights, groups, self.multi_objective_aggregation, self.scale_rewards)
            own = advantages(rewards, alone, groups, self.multi_objective_aggregation, self.scale_rewards)
            n = out["completion_ids"].size(0)
            mine = slice(self.accelerator.process_index * n, (self.accelerator.process_index + 1) * n)
            ids, mask = out["completion_ids"], out["completion_mask"]
            starts = [confidence_start(self.processing_class, ids[i][mask[i].bool()].tolist()) for i in range(n)]
            out["advantages"] = per_token(rest[mine].to(ids.device), own[mine].to(ids.device), starts, ids.size(1))
            return out

    return OwningConfidence
