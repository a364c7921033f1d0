"""Grade probabilities from the language model: its belief read where the grade is decided.

One sampled or greedy token says nothing of how sure the model is. The answer is JSON, reasoning
first: `{"reasoning": "...", "score": 71, "grade": 4}`; the grade follows from the score through
the methodology's bands, so the probability of the grade token itself, read after the score, is
about 1 whatever the model believed (measured: 0.999 on average). The belief is read instead:

* `score`: at the score, the decision point. Every integer score 0-100 is scored as the model's
  continuation of its own reasoning (`"score": ` then the number and the token the model wrote after
  it: `,`, or `, "grade": ` for a tokenizer that merges across words), and each grade gets the
  probability of the scores in its band.
* `digits`: the same, less the factors no other valid token competes with: after a two-digit score (or
  `0`, or `100`) only its end can follow, so its probability is taken as given. With one token a
  digit that leaves 10 of the trie's 101 nodes to run; the beliefs differ from `score`'s by the
  model's doubt about ending a score, small where the model has learnt where a score ends.
* `grade`: at the grade token after the model's own score (the naive reading, kept to measure it).

Scoring is exact, not sampled: the candidates' tokens form a trie below the shared prefix, run in one
pass under a tree attention mask. Where the answer was just generated, the generation's own key-value
cache stands for prompt and answer (`from_cache`), so a fund costs the trie's hundred-odd tokens; else
(`beliefs`) one forward pass over prompt, answer and trie. `mass` is the probability the model puts on the
candidates at all (an integer score followed by the same token): near 1 for a trained model.
"""

from __future__ import annotations

import math
import os
import re
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fundgrpo.methodology.compiler import Methodology
from fundgrpo.params import BELIEF_METHODS

MIN_MASS = 1e-6  # below this the model does not mean any of the candidates: no belief is read
METHODS = tuple(m for m in BELIEF_METHODS if m != "stated")  # read from the model's tokens
GIVEN = ("digits",)  # methods that take a token no other candidate competes with as given
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FIRST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {text: its first token's text}


class BeliefError(ValueError):
    """The model's probabilities cannot be read; the message says why."""


def decision_point(text: str, key: str) -> tuple[int, str] | None:
    """(offset where the value of `key` starts in the answer text, the text after the value up to the
    next digit), or None when the key or its number is absent.

    >>> decision_point('{"reasoning": "a", "score": 71, "grade": 4}', "score")
    (28, ', "grade": ')
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
    after = re.match(r"\D*", text[value.end() :]).group() or "}"  # type: ignore[union-attr]  # \D* always matches
    return m.end(), after


def encode(tokenizer, prefix: str, candidates: list[str]) -> list[list[int]]:
    """The token ids of prefix + each candidate, as the tokenizer gives them whole.

    A special token (the chat template's `<|im_start|>`) splits the text: what precedes it is tokenized
    apart from what follows. So the prompt, up to the prefix's last special token, is tokenized once and
    only the rest (the answer so far) with each candidate: a tenth of the characters, where tokenizing
    101 whole prompts was 70 % of a belief read. Checked on the first candidate: a tokenizer that
    tokenizes a text's first part differently (a prefix space on the first segment only) is given the
    whole texts instead.
    """
    cut = max((prefix.rfind(t) + len(t) for t in tokenizer.all_special_tokens if t and t in prefix), default=0)
    if cut:
        head = tokenizer(prefix[:cut], add_special_tokens=False)["input_ids"]
        tails = tokenizer([prefix[cut:] + c for c in candidates], add_special_tokens=False)["input_ids"]
        ids = [head + t for t in tails]
        if ids[0] == tokenizer(prefix + candidates[0], add_special_tokens=False)["input_ids"]:
            return ids
    return tokenizer([prefix + c for c in candidates], add_special_tokens=False)["input_ids"]


def _trie(tokenizer, prefix: str, candidates: list[str], given: bool = False) -> dict[str, Any]:
    """The sequence that scores every candidate after `prefix` in one pass: the shared leading tokens,
    then each trie node that has a child, with the mask that lets a node see the prefix and its own
    ancestors only, at the position it would have in its candidate."""
    return _trie_ids(encode(tokenizer, prefix, candidates), given)


def _trie_ids(ids: list[list[int]], given: bool = False) -> dict[str, Any]:
    """`_trie` for candidates given as token ids (the prefix's and each candidate's, whole). `given`:
    leave out the nodes with one child (their one continuation is taken as given, `GIVEN`)."""
    import torch

    shared = len(os.path.commonprefix(ids))  # type: ignore[type-var]  # of token lists, not only strings
    shared = min(shared, min(len(s) for s in ids) - 1)  # every candidate keeps at least one token to score
    if shared < 1:
        raise BeliefError("the candidates share no prefix tokens to condition on")
    suffix = [tuple(s[shared:]) for s in ids]
    # the nodes whose next-token distribution is needed: every proper, non-empty prefix of a suffix
    nodes = sorted({s[:k] for s in suffix for k in range(1, len(s))}, key=lambda n: (len(n), n))
    if given:  # a node whose one continuation ends its candidate is not run (no other node is below it)
        children: dict[tuple, set] = {}
        for s in suffix:
            for k in range(1, len(s)):
                children.setdefault(s[:k], set()).add(s[k])
        inner = set(nodes)
        nodes = [n for n in nodes if len(children[n]) > 1 or (*n, *children[n]) in inner]
    where = {n: shared + i for i, n in enumerate(nodes)}  # the node's place in the sequence
    total = shared + len(nodes)
    allowed = torch.zeros((total, total), dtype=torch.bool)
    allowed[:shared, :shared] = torch.tril(torch.ones((shared, shared), dtype=torch.bool))
    allowed[shared:, :shared] = True
    for n in nodes:
        for k in range(1, len(n) + 1):  # its ancestors and itself
            allowed[where[n], where[n[:k]]] = True
    return {
        "input_ids": list(ids[0][:shared]) + [n[-1] for n in nodes],
        "positions": list(range(shared)) + [shared + len(n) - 1 for n in nodes],
        "allowed": allowed,
        "shared": shared,
        "suffix": suffix,
        "where": where,
    }


LOGITS_BUDGET = 2**25  # logits floats held at once (128 MB): fewer funds per pass for a large vocabulary


def candidate_logprobs_many(
    model, tokenizer, questions: list[tuple[str, list[str]]], batch_size: int = 16, given: bool = False
) -> list[np.ndarray]:
    """log P(candidate | prefix) for each candidate of each (prefix, candidates), exactly (teacher forcing):
    one forward pass per `batch_size` questions.

    The texts prefix+candidate are tokenized whole (so a tokenizer that merges across the boundary is
    honoured). Below their shared leading tokens the candidates' remaining tokens form a trie; every
    trie node that has a child is appended once after the prefix, and a tree attention mask lets each
    node see the prefix and its own ancestors only, at the position it would have in its candidate
    (tree attention, as in speculative decoding). So the 101 scores of a fund cost one pass over the
    prompt, the answer so far and about a hundred extra tokens, with no copies of a key-value cache.
    Questions share a pass left-padded (padding masked out, positions counted from each one's first
    token), and logits are kept for the last rows only, where every question's trie ends. `given`: a
    continuation no other candidate competes with is taken as given, not scored (`GIVEN`).
    """
    import torch

    tries = [_trie(tokenizer, prefix, candidates, given) for prefix, candidates in questions]
    dtype = next(model.parameters()).dtype
    vocab = model.get_output_embeddings().weight.shape[0]
    out: list[np.ndarray] = []
    start = 0
    while start < len(tries):
        keep = max(len(t["where"]) for t in tries[start : start + batch_size]) + 1
        size = max(1, min(batch_size, LOGITS_BUDGET // (keep * vocab)))
        chunk = tries[start : start + size]
        start += size
        keep = max(len(t["where"]) for t in chunk) + 1  # the last rows: each trie's nodes and the row before
        width = max(len(t["input_ids"]) for t in chunk)
        input_ids = torch.full((len(chunk), width), tokenizer.pad_token_id or 0, dtype=torch.long)
        positions = torch.zeros((len(chunk), width), dtype=torch.long)
        allowed = torch.eye(width, dtype=torch.bool).repeat(len(chunk), 1, 1)  # padding sees itself only
        for b, t in enumerate(chunk):
            pad = width - len(t["input_ids"])
            input_ids[b, pad:] = torch.tensor(t["input_ids"])
            positions[b, pad:] = torch.tensor(t["positions"])
            allowed[b, pad:, pad:] = t["allowed"]
        mask = torch.zeros((len(chunk), 1, width, width), dtype=dtype)
        mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
        device = model.device
        with torch.no_grad():
            logits = model(
                input_ids=input_ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                use_cache=False,
                logits_to_keep=keep,
            ).logits
        lp = torch.log_softmax(logits.float(), dim=-1).cpu().numpy()
        for b, t in enumerate(chunk):
            row = keep - 1 - len(t["where"])  # the row of the last shared token; the nodes follow it
            at = {n: row + 1 + i for i, n in enumerate(t["where"])}
            out.append(
                np.array(
                    [
                        lp[b, row, s[0]] + sum(lp[b, at[s[:k]], s[k]] for k in range(1, len(s)) if s[:k] in at)
                        for s in t["suffix"]
                    ]  # fmt: skip
                )
            )
    return out


def candidate_logprobs(model, tokenizer, prefix: str, candidates: list[str], given: bool = False) -> np.ndarray:
    """log P(candidate | prefix) for each candidate string, exactly, in one forward pass
    (`candidate_logprobs_many` for one question)."""
    return candidate_logprobs_many(model, tokenizer, [(prefix, candidates)], given=given)[0]


def question(
    answer: str, methodology: Methodology, method: str, tokenizer=None
) -> tuple[int, list[str], list[int]] | None:
    """Where in `answer` the belief is read and what is asked there: (offset of the decision point, the
    candidate continuations, the grade index each candidate stands for); None without a decision point.
    A candidate is a value and what the model wrote after it: its first token by `tokenizer` (a
    tokenizer that merges across words writes `, "grade": ` as one), else its first character.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> offset, candidates, owner = question('{"score": 71, "grade": 4}', example_methodology(), "score")
    >>> offset, candidates[:2], len(candidates), owner[0], owner[-1]
    (10, ['0,', '1,'], 101, 0, 4)
    >>> question('{"score": 71, "grade": 4}', example_methodology(), "digits")[1] == candidates
    True
    """
    if method not in METHODS:
        raise BeliefError(f"belief method must be one of {METHODS}, got {method!r}")
    grades = list(methodology.grades)
    point = decision_point(answer, "score" if method == "digits" else method)
    if point is None:
        return None
    offset, after = point
    after = first_token(tokenizer, after) if tokenizer is not None else after[0]
    if method in ("score", "digits"):
        values = list(range(0, 101))
        return offset, [f"{v}{after}" for v in values], [grades.index(methodology.grade_for(v)) for v in values]
    return offset, [f"{g}{after}" for g in grades], list(range(len(grades)))


def first_token(tokenizer, text: str) -> str:
    """The text of `text`'s first token (all of `text` where that token does not decode to a prefix of it)."""
    known = _FIRST.setdefault(tokenizer, {})
    if text not in known:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        head = tokenizer.decode(ids[:1]) if ids else text
        known[text] = head if head and text.startswith(head) else text
    return known[text]


@dataclass(frozen=True)
class Belief:
    """A model's grade probabilities read at one decision point of one answer."""

    probs: list[float] | None  # one per methodology grade, summing to 1; None: (almost) no mass to read
    mass: float  # the probability the model puts on the candidates at all


def probabilities(logp: np.ndarray, owner: list[int], grades: int, min_mass: float = MIN_MASS) -> Belief:
    """The candidates' log-probabilities summed per grade; `probs` None below `min_mass`.

    >>> probabilities(np.log([0.2, 0.3, 0.4]), [0, 1, 1], 2)
    Belief(probs=[0.222222, 0.777778], mass=0.9)
    """
    top = float(np.max(logp))
    weights = np.exp(logp - top)
    probs = np.zeros(grades)
    np.add.at(probs, owner, weights)
    total = float(probs.sum())
    mass = float(math.exp(top) * total) if math.isfinite(top) else 0.0
    if total <= 0 or not math.isfinite(total) or mass < min_mass:
        return Belief(None, mass)
    return Belief((probs / total).round(6).tolist(), round(mass, 6))


def read(
    model,
    tokenizer,
    prompt_text: str,
    answer: str,
    methodology: Methodology,
    method: str = "score",
    min_mass: float = MIN_MASS,
) -> Belief | None:
    """The model's grade probabilities for one answer it gave, read at `method`'s decision point; None when
    the answer has no such point (an invalid answer has no belief). `probs` is None when the model
    puts (almost) no probability on any candidate (mass below `min_mass`): there is nothing to read."""
    asked = question(answer, methodology, method, tokenizer)
    if asked is None:
        return None
    offset, candidates, owner = asked
    logp = candidate_logprobs(model, tokenizer, prompt_text + answer[:offset], candidates, method in GIVEN)
    return probabilities(logp, owner, len(methodology.grades), min_mass)


def beliefs(
    model,
    tokenizer,
    prompts: list[list[dict]],
    answers: list[str],
    methodology: Methodology,
    method: str = "score",
    desc: str = "",
    batch_size: int = 16,
) -> list[Belief | None]:
    """`read` for each (chat prompt, the model's answer), `batch_size` answers a forward pass, with a
    progress bar."""
    asked = [(i, q) for i, a in enumerate(answers) if (q := question(a, methodology, method, tokenizer)) is not None]
    out: list[Belief | None] = [None] * len(answers)
    bar = tqdm(total=len(answers), desc=f"{desc} beliefs ({method})", unit="fund")
    bar.update(len(answers) - len(asked))  # no decision point: nothing to read
    for start in range(0, len(asked), batch_size):
        chunk = asked[start : start + batch_size]
        questions = [
            (tokenizer.apply_chat_template(prompts[i], tokenize=False, add_generation_prompt=True) + answers[i][:at], c)
            for i, (at, c, _) in chunk
        ]
        found = candidate_logprobs_many(model, tokenizer, questions, batch_size, method in GIVEN)
        for (i, (_, _, owner)), logp in zip(chunk, found):
            out[i] = probabilities(logp, owner, len(methodology.grades))
        bar.update(len(chunk))
    bar.close()
    return out


# -- read from the generation's own key-value cache

UNREAD = "unread"  # from_cache could not read this answer there: read it the exact way (`beliefs`)
_ALONE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {(ending, candidates): ids}


def token_boundary(tokenizer, new: list[int], text: str, offset: int) -> int | None:
    """How many of the generated tokens `new` spell `text[:offset]` exactly (`text` being what they
    decode to): None when the decision point falls inside a token.

    >>> class Chars:  # one token per character
    ...     def decode(self, ids, skip_special_tokens=True): return "".join(map(chr, ids))
    >>> token_boundary(Chars(), [ord(c) for c in '{"score": 71'], '{"score": 71', 10)
    10
    """
    lo, hi = 1, len(new)
    while lo < hi:  # the fewest tokens whose text reaches the offset
        mid = (lo + hi) // 2
        if len(tokenizer.decode(new[:mid], skip_special_tokens=True)) >= offset:
            hi = mid
        else:
            lo = mid + 1
    return lo if tokenizer.decode(new[:lo], skip_special_tokens=True) == text[:offset] else None


def candidate_ids(tokenizer, prefix: str, candidates: list[str]) -> list[list[int]] | None:
    """Each candidate's token ids on its own, when that is how the tokenizer splits prefix + candidate
    whole (the boundary is a token boundary for every candidate); None when it is not. Checked on the
    first prefix with each ending (its last 16 characters) and remembered per tokenizer: the answers
    share their wording up to the decision point (`"score": `), so one check serves them all."""
    known = _ALONE.setdefault(tokenizer, {})
    key = (prefix[-16:], tuple(candidates))
    if key not in known:
        head = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        whole = tokenizer([prefix + c for c in candidates], add_special_tokens=False)["input_ids"]
        alone = tokenizer(candidates, add_special_tokens=False)["input_ids"]
        known[key] = alone if all(w == head + a for w, a in zip(whole, alone)) else None
    return known[key]


_TEMPLATES: dict[tuple, dict[str, Any]] = {}  # candidates' ids -> their trie below a placeholder token


def trie_after(first: int, alone: list[list[int]], given: bool = False) -> dict[str, Any]:
    """`_trie_ids` of `first` followed by each candidate's ids, with `gather`: for every token of every
    candidate, the row whose logits score it, the token, and the candidate (log P of a candidate is the sum
    of its rows'). Every answer's candidates are the same ids after a different last token, so the trie is
    built once per candidate set and only its first token changes (building it was a quarter of a read).
    `given`: see `_trie_ids` (a token taken as given has no row)."""
    key = (tuple(map(tuple, alone)), given)
    if key not in _TEMPLATES:
        t = _trie_ids([[0] + a for a in alone], given)
        row, node = t["shared"] - 1, t["where"]  # the last shared token's row, each node's
        gather = [(row, c, s[0]) for c, s in enumerate(t["suffix"])]
        gather += [(node[s[:k]], c, s[k]) for c, s in enumerate(t["suffix"]) for k in range(1, len(s)) if s[:k] in node]
        rows_, owners, tokens = (np.array(x, dtype=np.int64) for x in zip(*gather))
        if len(_TEMPLATES) > 64:  # a handful of candidate sets per tokenizer: bounded all the same
            _TEMPLATES.clear()
        _TEMPLATES[key] = {**t, "gather": (rows_, tokens, owners)}
    template = _TEMPLATES[key]
    return {**template, "input_ids": [first, *template["input_ids"][1:]]}


def decision_points(
    tokenizer, sequences, prompt_mask, cached: int, answers: list[str], methodology: Methodology, methods, out: dict
) -> list[tuple[int, list]]:
    """Per answer, its padding and a segment per method it can be read at over the cache: (method, trie,
    end, position, owner), `end` the prefix's last token (run again: its logits give the first digit).
    A method with no decision point in the answer is set to None in `out` (nothing to read)."""
    width = prompt_mask.shape[1]
    rows: list[tuple[int, list]] = []
    for b, text in enumerate(answers):
        pad = width - int(prompt_mask[b].sum())  # a position is a column less the padding before it
        new = sequences[b, width:].tolist()
        segments = []
        for m in methods:
            asked = question(text, methodology, m, tokenizer)
            if asked is None:
                out[m][b] = None
                continue
            offset, candidates, owner = asked
            k = token_boundary(tokenizer, new, text, offset)
            alone = candidate_ids(tokenizer, text[:offset], candidates) if k is not None else None
            if k is None or alone is None or width + k - 1 > cached:
                continue
            end = width + k - 1
            t = trie_after(int(sequences[b, end]), alone, m in GIVEN)
            segments.append((m, t, end, end - pad, owner))
        rows.append((pad, segments))
    return rows


def tree_batch(rows: list[tuple[int, list]], size: int, cached: int, prompt_mask, pad_id: int, dtype):
    """(input ids, positions, additive attention mask) of every answer's tries laid after the cache: each
    trie token sees the prompt (less its padding) and the answer up to its decision point, and its own
    trie's ancestors; padding sees itself only."""
    import torch

    width, batch = prompt_mask.shape[1], len(rows)
    input_ids = torch.full((batch, size), pad_id, dtype=torch.long)
    positions = torch.zeros((batch, size), dtype=torch.long)
    allowed = torch.zeros((batch, size, cached + size), dtype=torch.bool)
    allowed[:, torch.arange(size), cached + torch.arange(size)] = True
    for b, (_, segments) in enumerate(rows):
        at = 0
        for _, t, end, position, _ in segments:
            n = len(t["input_ids"])
            input_ids[b, at : at + n] = torch.tensor(t["input_ids"])
            positions[b, at : at + n] = position + torch.tensor(t["positions"])
            allowed[b, at : at + n, :end] = True
            allowed[b, at : at + n, :width] &= prompt_mask[b].bool().cpu()
            allowed[b, at : at + n, cached + at : cached + at + n] = t["allowed"]
            at += n
    mask = torch.zeros((batch, 1, size, cached + size), dtype=dtype)
    mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    return input_ids, positions, mask


def from_cache(
    model, tokenizer, sequences, prompt_mask, cache, answers: list[str], methodology: Methodology, methods
) -> dict[str, list]:
    """Each method's belief for each answer of one generated batch, read from the key-value cache the
    generation left (`model.generate(..., return_dict_in_generate=True)`), so the prompt and the answer
    are not run again: per answer and method, the last token before the decision point and the
    candidates' trie are run once over the cache (tree attention over the cache's own columns), all
    answers and methods in one pass. The prefix is the model's own tokens, the candidates tokenized as
    `candidate_ids` finds them. An entry is `read`'s answer, or `UNREAD` where the decision point falls
    inside a generated token or the candidates do not split off cleanly (`beliefs` reads those).

    `sequences`: prompt and answer ids (batch, width + new); `prompt_mask`: the prompt's attention mask
    (padding anywhere, `modelling.prompt_batch`); `answers`: the new tokens decoded, special tokens skipped.
    """
    import torch
    from transformers.cache_utils import DynamicLayer

    out: dict[str, list] = {m: [UNREAD] * len(answers) for m in methods}
    # only a cache whose every layer holds every token maps its columns to the sequence's positions
    # (a sliding-window layer, Gemma 3's, keeps the last few: those answers are read the exact way)
    if cache is None or not all(type(layer) is DynamicLayer for layer in getattr(cache, "layers", [None])):
        return out
    cached = cache.get_seq_length()
    rows = decision_points(
        tokenizer, sequences, prompt_mask, cached, answers=answers, methodology=methodology, methods=methods, out=out
    )
    size = max((sum(len(t["input_ids"]) for _, t, *_ in s) for _, s in rows), default=0)
    if size == 0:
        return out
    dtype = next(model.parameters()).dtype
    input_ids, positions, mask = tree_batch(rows, size, cached, prompt_mask, tokenizer.pad_token_id or 0, dtype)
    device = model.device
    with torch.no_grad():
        hidden = model.get_decoder()(
            input_ids=input_ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            past_key_values=cache,
            use_cache=True,
        ).last_hidden_state
        head, cap = model.get_output_embeddings(), getattr(model.config, "final_logit_softcapping", None)
        for b, (_, segments) in enumerate(rows):
            at = 0
            for m, t, _, _, owner in segments:
                n = len(t["input_ids"])
                logits = head(hidden[b, at : at + n]).float()
                if cap:
                    logits = torch.tanh(logits / cap) * cap
                lp = torch.log_softmax(logits, dim=-1).cpu().numpy()
                rows_, tokens, owners = t["gather"]
                logp = np.bincount(owners, weights=lp[rows_, tokens], minlength=len(t["suffix"]))
                out[m][b] = probabilities(logp, owner, len(methodology.grades))
                at += n
    return out
