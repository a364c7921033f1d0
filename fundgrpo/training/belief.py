"""Grade probabilities from the language model: its belief read where the grade is decided.

One sampled or greedy token says nothing of how sure the model is. The answer is JSON, reasoning
first: `{"reasoning": "...", "score": 71, "grade": 4}`; the grade follows from the score through
the methodology's bands, so the probability of the grade token itself, read after the score, is
about 1 whatever the model believed (measured: 0.999 on average). The belief is read instead:

* `score`: at the score, the decision point. Every integer score 0-100 is scored as the model's
  continuation of its own reasoning (`"score": ` then the number and the character the model wrote
  after it), and each grade gets the probability of the scores in its band.
* `grade`: at the grade token after the model's own score (the naive reading, kept to measure it).

Scoring is exact, not sampled: the candidates' tokens form a trie below the shared prefix, which is
run once (its key-value cache then serves every candidate), so a fund costs one forward pass over
prompt and answer plus a few one-token steps. `mass` is the probability the model puts on the
candidates at all (an integer score followed by the same character): near 1 for a trained model.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fundgrpo.methodology.compiler import Methodology
from fundgrpo.params import BELIEF_METHODS

MIN_MASS = 1e-6  # below this the model does not mean any of the candidates: no belief is read
METHODS = tuple(m for m in BELIEF_METHODS if m != "stated")  # read from the model's tokens
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class BeliefError(ValueError):
    """The model's probabilities cannot be read; the message says why."""


def decision_point(text: str, key: str) -> tuple[int, str] | None:
    """(offset where the value of `key` starts in the answer text, the character after the value),
    or None when the key or its number is absent.

    >>> decision_point('{"reasoning": "a", "score": 71, "grade": 4}', "score")
    (28, ',')
    >>> decision_point('{"reasoning": "a", "score": 71, "grade": 4}', "grade")
    (41, '}')
    >>> decision_point('{"reasoning": "a"}', "score") is None
    True
    """
    m = re.search(rf'"{key}"\s*:\s*', text)
    if m is None:
        return None
    value = NUMBER.match(text, m.end())
    if value is None:
        return None
    after = text[value.end() : value.end() + 1] or "}"
    return m.end(), after


def candidate_logprobs(model, tokenizer, prefix: str, candidates: list[str]) -> np.ndarray:
    """log P(candidate | prefix) for each candidate string, exactly (teacher forcing), in one forward pass.

    The texts prefix+candidate are tokenized whole (so a tokenizer that merges across the boundary is
    honoured). Below their shared leading tokens the candidates' remaining tokens form a trie; every
    trie node that has a child is appended once after the prefix, and a tree attention mask lets each
    node see the prefix and its own ancestors only, at the position it would have in its candidate
    (tree attention, as in speculative decoding). So the 101 scores of a fund cost one pass over the
    prompt, the answer so far and about a hundred extra tokens, with no copies of a key-value cache.
    """
    import torch

    ids = [tokenizer(prefix + c, add_special_tokens=False)["input_ids"] for c in candidates]
    shared = len(ids[0])
    for seq in ids[1:]:
        shared = min(shared, next((i for i, (a, b) in enumerate(zip(ids[0], seq)) if a != b), len(seq)))
    shared = min(shared, min(len(s) for s in ids) - 1)  # every candidate keeps at least one token to score
    if shared < 1:
        raise BeliefError("the candidates share no prefix tokens to condition on")
    suffix = [tuple(s[shared:]) for s in ids]
    # the nodes whose next-token distribution is needed: every proper, non-empty prefix of a suffix
    nodes = sorted({s[:k] for s in suffix for k in range(1, len(s))}, key=lambda n: (len(n), n))
    where = {n: shared + i for i, n in enumerate(nodes)}  # the node's place in the sequence
    total = shared + len(nodes)
    allowed = torch.zeros((total, total), dtype=torch.bool)
    allowed[:shared, :shared] = torch.tril(torch.ones((shared, shared), dtype=torch.bool))
    allowed[shared:, :shared] = True
    for n in nodes:
        for k in range(1, len(n) + 1):  # its ancestors and itself
            allowed[where[n], where[n[:k]]] = True
    dtype = next(model.parameters()).dtype
    mask = torch.zeros((1, 1, total, total), dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    positions = list(range(shared)) + [shared + len(n) - 1 for n in nodes]
    input_ids = list(ids[0][:shared]) + [n[-1] for n in nodes]
    device = model.device
    with torch.no_grad():
        logits = model(
            input_ids=torch.tensor([input_ids], device=device),
            attention_mask=mask.to(device),
            position_ids=torch.tensor([positions], device=device),
            use_cache=False,
        ).logits[0]
    lp = torch.log_softmax(logits.float(), dim=-1).cpu().numpy()
    out = np.zeros(len(suffix))
    for i, s in enumerate(suffix):
        out[i] = lp[shared - 1, s[0]] + sum(lp[where[s[:k]], s[k]] for k in range(1, len(s)))
    return out


def read(
    model,
    tokenizer,
    prompt_text: str,
    answer: str,
    methodology: Methodology,
    method: str = "score",
    min_mass: float = MIN_MASS,
) -> dict[str, Any] | None:
    """The model's grade probabilities for one answer it gave, read at `method`'s decision point:
    {"probs": one per methodology grade, summing to 1, "mass": probability on the candidates}; None when
    the answer has no such point (an invalid answer has no belief). "probs" is None when the model
    puts (almost) no probability on any candidate (mass below `min_mass`): there is nothing to read."""
    if method not in METHODS:
        raise BeliefError(f"belief method must be one of {METHODS}, got {method!r}")
    grades = list(methodology.grades)
    point = decision_point(answer, method)
    if point is None:
        return None
    offset, after = point
    prefix = prompt_text + answer[:offset]
    if method == "score":
        values = list(range(0, 101))
        logp = candidate_logprobs(model, tokenizer, prefix, [f"{v}{after}" for v in values])
        owner = [grades.index(methodology.grade_for(v)) for v in values]
    else:
        logp = candidate_logprobs(model, tokenizer, prefix, [f"{g}{after}" for g in grades])
        owner = list(range(len(grades)))
    top = float(np.max(logp))
    weights = np.exp(logp - top)
    probs = np.zeros(len(grades))
    np.add.at(probs, owner, weights)
    total = float(probs.sum())
    mass = float(math.exp(top) * total) if math.isfinite(top) else 0.0
    if total <= 0 or not math.isfinite(total) or mass < min_mass:
        return {"probs": None, "mass": mass}
    return {"probs": (probs / total).round(6).tolist(), "mass": round(mass, 6)}


def beliefs(
    model,
    tokenizer,
    prompts: list[list[dict]],
    answers: list[str],
    methodology: Methodology,
    method: str = "score",
    desc: str = "",
) -> list[dict[str, Any] | None]:
    """`read` for each (chat prompt, the model's answer), with a progress bar."""
    out = []
    for prompt, answer in tqdm(list(zip(prompts, answers)), desc=f"{desc} beliefs ({method})", unit="fund"):
        text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        out.append(read(model, tokenizer, text, answer, methodology, method))
    return out
