"""The stated confidence paid by the calibration reward alone (`grpo.confidence_advantage: own`).

TRL gives every token of a completion one advantage, from the rewards summed. An answer that ends
`"grade": 4, "confidence": 99` then has its confidence tokens paid by the grade, evidence and
departure rewards too, and a sure-sounding confidence goes with right grades often enough that GRPO
learns to say 99 whatever it knows, while the Brier reward pays a wrong grade stated at under 50 more than a
right one. Here each part of the answer is paid by the rewards that judge it: the tokens from the
`"confidence"` key to the end get the calibration reward's advantage alone (a proper scoring rule:
its best is the chance of being right given the answer written so far), every token before them the
other rewards' (TRL's formula over them, `advantages`). The confidence's baseline is the mean
calibration reward of the group's completions that wrote the same grade (`by_grade`): whether the
grade is right moves the Brier score by about ±0.4, the confidence stated by a tenth of that, and the
grade is written before the confidence, so a baseline that knows it is still unbiased and leaves the
confidence's own signal. TRL's loss takes an advantage per token (`GRPOTrainer._compute_loss` accepts
shape (B, T)).
"""

from __future__ import annotations

import re

KEY = '"confidence"'
GRADE = re.compile(r'"grade"\s*:\s*(-?\d+)')


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


def by_grade(rewards, grades: list, num_generations: int):
    """Each completion's reward minus the mean reward of its group's completions that wrote the same
    grade, over the spread of these differences across the batch; 0 where the reward is missing (NaN)
    or no other completion of the group wrote its grade.

    >>> import torch
    >>> r = torch.tensor([0.9, 0.7, 0.2, 0.6, 0.5, float("nan"), 0.5, 0.5])
    >>> [round(a, 2) for a in by_grade(r, [4, 4, 3, 3, 2, 2, 2, None], 4).tolist()]
    [0.55, -0.55, -1.09, 1.09, 0.0, 0.0, 0.0, 0.0]
    """
    import torch

    out = torch.zeros_like(rewards)
    for i in range(rewards.size(0)):
        group = range(i - i % num_generations, i - i % num_generations + num_generations)
        same = [j for j in group if grades[j] == grades[i] and not torch.isnan(rewards[j])]
        if grades[i] is not None and not torch.isnan(rewards[i]) and len(same) > 1:
            out[i] = rewards[i] - rewards[same].mean()
    spread = out[out != 0].std() if (out != 0).sum() > 1 else out.new_tensor(1.0)
    return out / (spread + 1e-4)


def written_grade(text: str):
    """The grade an answer wrote, read before the confidence; None when it wrote none.

    >>> written_grade('{"reasoning": "ok", "grade": 4, "confidence": 80}'), written_grade("{")
    (4, None)
    """
    found = GRADE.search(text)
    return int(found.group(1)) if found else None


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
            from accelerate.utils import gather_object

            out = super()._generate_and_score_completions(inputs)
            mode = "train" if self.model.training else "eval"
            rewards = self._rewards_seen  # every process's completions, as TRL normalises them
            groups = self.num_generations if mode == "train" else self.num_generations_eval
            weights = self.reward_weights.clone()
            weights[calibration] = 0.0
            rest = advantages(rewards, weights, groups, self.multi_objective_aggregation, self.scale_rewards)
            ids, mask = out["completion_ids"], out["completion_mask"]
            n = ids.size(0)
            rows = [ids[i][mask[i].bool()].tolist() for i in range(n)]
            texts = self.processing_class.batch_decode(rows, skip_special_tokens=True)
            grades = gather_object([written_grade(t) for t in texts])
            own = by_grade(rewards[:, calibration], grades, groups)
            mine = slice(self.accelerator.process_index * n, (self.accelerator.process_index + 1) * n)
            starts = [confidence_start(self.processing_class, row) for row in rows]
            out["advantages"] = per_token(rest[mine].to(ids.device), own[mine].to(ids.device), starts, ids.size(1))
            return out

    return OwningConfidence
