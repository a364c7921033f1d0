"""Grade probabilities read from a real (small, randomly initialised) causal LM: the trie under one
tree attention mask gives exactly what scoring each candidate on its own gives."""

from __future__ import annotations

import numpy as np
import pytest

from fundgrpo.methodology.compiler import parse
from fundgrpo.model import belief, modelling
from fundgrpo.params import ModelArchParams

METHODOLOGY = parse(
    {
        "criteria": [{"metric": "sharpe_3y", "weight": 1}],
        "grades": [
            {"grade": 1, "min": 0, "max": 32.5},
            {"grade": 2, "min": 32.5, "max": 67.5},
            {"grade": 3, "min": 67.5, "max": 100},
        ],
    }
)


@pytest.fixture(scope="module", params=[("words", 300), ("phrases", 400)], ids=["words", "phrases"])
def small(request):
    """A tiny model on each tokenizer the compact model can have: BPE merges within words, or across
    them (`"score": ` and `, "grade": ` are then single tokens)."""
    import torch

    torch.set_num_threads(1)
    merges, vocab = request.param
    corpus = ['{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}', "Rate this fund. 0123456789"] * 20
    tokenizer = modelling.build_tokenizer(corpus, vocab, merges)
    arch = ModelArchParams(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=16)  # fmt: skip
    model = modelling.build_model(arch, tokenizer)
    model.eval()
    return model, tokenizer


def naive_logprob(model, tokenizer, prefix: str, candidate: str, shared: int) -> float:
    """log P(candidate tokens | prefix) by one full forward pass over prefix + candidate."""
    import torch

    ids = tokenizer(prefix + candidate, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return float(sum(logp[i - 1, ids[i]] for i in range(shared, len(ids))))


def test_the_trie_equals_scoring_each_candidate_alone(small):
    model, tokenizer = small
    prefix = 'Rate this fund.{"reasoning": "Sharpe ratio top 10%", "score": '
    candidates = [f"{v}," for v in (0, 7, 10, 71, 99, 100)]
    got = belief.candidate_logprobs(model, tokenizer, prefix, candidates)
    shared = len(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    want = [naive_logprob(model, tokenizer, prefix, c, shared) for c in candidates]
    assert np.allclose(got, want, atol=1e-4)
    every = [f"{v}," for v in range(101)]  # the whole trie of scores, one pass
    assert np.allclose(
        belief.candidate_logprobs(model, tokenizer, prefix, every),
        [naive_logprob(model, tokenizer, prefix, c, shared) for c in every],
        atol=1e-4,
    )


def test_digits_take_the_end_of_a_score_as_given(small):
    """`digits` scores each candidate's tokens as `score` does, less the one that ends a two-digit score
    (or 0, or 100), which no other candidate competes with; so its trie runs a tenth of the nodes."""
    import torch

    model, tokenizer = small
    prefix = 'Rate this fund.{"reasoning": "Sharpe ratio top 10%", "score": '
    every = [f"{v}," for v in range(101)]
    head = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    ids = [tokenizer(prefix + c, add_special_tokens=False)["input_ids"] for c in every]
    assert all(i[: len(head)] == head for i in ids)
    suffix = [tuple(i[len(head) :]) for i in ids]
    prefixes = {s[:k] for s in suffix for k in range(1, len(s))}
    want = []
    for i, s in zip(ids, suffix):
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([i])).logits[0].float(), dim=-1)
        follow = lambda n: {t[len(n)] for t in suffix if len(t) > len(n) and t[: len(n)] == n}  # noqa: E731
        # the last token is left out where its node has no other child and nothing continues after it
        last = len(s) - 1
        given = last >= 1 and len(follow(s[:last])) == 1 and s not in prefixes
        want.append(sum(float(lp[len(head) + k - 1, s[k]]) for k in range(len(s)) if not (given and k == last)))
    got = belief.candidate_logprobs(model, tokenizer, prefix, every, given=True)
    assert np.allclose(got, want, atol=1e-4)
    exact = belief.candidate_logprobs(model, tokenizer, prefix, every)
    if max(map(len, suffix)) > 2:  # scores spelled a digit a token: two-digit scores end with a given token
        assert not np.allclose(got, exact, atol=1e-3)
        runs, all_ = (len(belief._trie(tokenizer, prefix, every, g)["where"]) for g in (True, False))
        assert runs <= 12 and all_ >= 100


def test_read_maps_scores_through_the_bands(small):
    model, tokenizer = small
    answer = '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}'
    found = belief.read(model, tokenizer, "Rate this fund.", answer, METHODOLOGY, "score")
    assert len(found.probs) == 3 and sum(found.probs) == pytest.approx(1.0, abs=1e-5)
    assert 0 < found.mass <= 1
    # the band sums: grade 1 holds scores 0-32, so its share is what those 33 candidates get
    prefix = 'Rate this fund.{"reasoning": "Sharpe ratio top 10%", "score": '
    _, candidates, _ = belief.question(answer, METHODOLOGY, "score", tokenizer)
    logp = belief.candidate_logprobs(model, tokenizer, prefix, candidates)
    p = np.exp(logp - logp.max())
    assert found.probs[0] == pytest.approx(p[:33].sum() / p.sum(), abs=1e-5)
    grade = belief.read(model, tokenizer, "Rate this fund.", answer, METHODOLOGY, "grade")
    assert sum(grade.probs) == pytest.approx(1.0, abs=1e-5)


def test_a_candidate_ends_with_the_token_the_answer_has_after_its_value(small):
    """The belief is P(value, then what the model wrote next): each candidate is the value and the first
    token after it in the answer, `,` where merges stay within words, `, "grade": ` where they span them
    (the character alone would be a token the model never writes there)."""
    _, tokenizer = small
    answer = '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}'
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    for method, value in (("score", 71), ("grade", 3)):
        offset, candidates, owner = belief.question(answer, METHODOLOGY, method, tokenizer)
        [mine] = [c for c in candidates if c.startswith(str(value)) and not c[len(str(value))].isdigit()]
        want = tokenizer(answer[:offset] + mine, add_special_tokens=False)["input_ids"]
        assert ids[: len(want)] == want, (method, mine)


def test_a_model_that_means_none_of_the_grades_gives_no_probabilities(small):
    """Below the mass floor (here set above what any model puts on the candidates) nothing is read:
    the evaluation then carries no confidence rather than a made-up one."""
    model, tokenizer = small
    answer = '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}'
    found = belief.read(model, tokenizer, "Rate this fund.", answer, METHODOLOGY, "score", min_mass=1.01)
    assert found.probs is None and 0 < found.mass <= 1


def test_an_answer_without_a_decision_point_has_no_belief(small):
    model, tokenizer = small
    assert belief.read(model, tokenizer, "x", '{"reasoning": "no score here"}', METHODOLOGY, "score") is None
    with pytest.raises(belief.BeliefError, match="belief method must be one of"):
        belief.read(model, tokenizer, "x", '{"score": 5}', METHODOLOGY, "stated")


def test_questions_read_together_give_what_each_gives_alone(small):
    """Left-padded into one pass (prefixes and tries of different lengths), each question's
    log-probabilities are what its own pass gives: the padding is masked out, positions start at its
    first token, and the kept logit rows are its own."""
    model, tokenizer = small
    questions = [
        ('Rate this fund.{"reasoning": "Sharpe ratio top 10%", "score": ', [f"{v}," for v in range(101)]),
        ('Rate.{"score": ', [f"{v}}}" for v in (3, 30, 100)]),
        ('Rate this fund. 0123456789 {"reasoning": "top", "score": 71, "grade": ', ["1}", "2}", "3}"]),
    ]
    alone = [belief.candidate_logprobs(model, tokenizer, p, c) for p, c in questions]
    together = belief.candidate_logprobs_many(model, tokenizer, questions, batch_size=3)
    assert [len(t) for t in together] == [101, 3, 3]
    for a, t in zip(alone, together):
        assert np.allclose(a, t, atol=1e-5)
    prompts = [[{"role": "user", "content": "Rate this fund."}]] * 3
    answers = [
        '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}',
        '{"reasoning": "no score"}',
        '{"reasoning": "top", "score": 5, "grade": 1}',
    ]
    read = belief.beliefs(model, tokenizer, prompts, answers, METHODOLOGY, "score", batch_size=2)
    text = tokenizer.apply_chat_template(prompts[0], tokenize=False, add_generation_prompt=True)
    assert read[1] is None
    for i in (0, 2):
        one = belief.read(model, tokenizer, text, answers[i], METHODOLOGY, "score")
        assert np.allclose(read[i].probs, one.probs, atol=1e-5) and read[i].mass == pytest.approx(one.mass)


def test_a_chat_prompt_is_tokenized_once_and_the_candidates_as_whole_texts_would_be(small):
    model, tokenizer = small
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Rate this fund. 0123456789"}], tokenize=False, add_generation_prompt=True
    )
    prefix = text + '{"reasoning": "Sharpe ratio top 10%", "score": '
    candidates = [f"{v}," for v in range(101)] + ["7}", " 7,"]
    whole = [tokenizer(prefix + c, add_special_tokens=False)["input_ids"] for c in candidates]
    assert belief.encode(tokenizer, prefix, candidates) == whole
    assert belief.encode(tokenizer, "no special token here ", candidates) == [
        tokenizer("no special token here " + c, add_special_tokens=False)["input_ids"] for c in candidates
    ]


@pytest.mark.parametrize("layout", ["left", "shared"])
def test_beliefs_read_from_the_generation_cache_equal_the_exact_reading(small, layout):
    """`from_cache` runs only the trie over the key-value cache a generation leaves: prompts laid out
    as generation lays them (left-padded, or their shared beginning run once and the padding after it:
    `modelling.prompt_batch`), answers of different lengths, every method in one pass, give what
    `beliefs` gives by running prompt and answer again. The cache is made as generation makes it
    (positions count real tokens), with the answers teacher-forced so they hold a decision point."""
    import torch

    model, tokenizer = small
    prompts = [[{"role": "user", "content": "Rate this fund."}], [{"role": "user", "content": "Rate. 0123456789"}]] * 2
    answers = [
        '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}',
        '{"reasoning": "top", "score": 5, "grade": 1}',
        '{"reasoning": "no score"}',
        '{"score": 100, "grade": 3}',
    ]
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    if layout == "left":
        enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    else:
        with torch.no_grad():
            enc = modelling.prompt_batch(model, tokenizer, texts)
        assert enc["attention_mask"][:, 0].all() and not enc["attention_mask"].all()  # padding after the beginning
    new = [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
    longest = max(map(len, new))
    pad = tokenizer.pad_token_id
    sequences = torch.cat([enc["input_ids"], torch.tensor([n + [pad] * (longest - len(n)) for n in new])], dim=1)
    mask = torch.cat([enc["attention_mask"], torch.ones((len(new), longest), dtype=torch.long)], dim=1)
    ran = enc["past_key_values"].get_seq_length() if layout == "shared" else 0
    with torch.no_grad():
        cache = model(
            input_ids=sequences[:, ran:-1],
            attention_mask=mask[:, :-1],
            position_ids=(mask[:, :-1].cumsum(-1) - 1).clamp(min=0)[:, ran:],
            past_key_values=enc.get("past_key_values"),
            use_cache=True,
        ).past_key_values
    found = belief.from_cache(
        model, tokenizer, sequences, enc["attention_mask"], cache, answers, METHODOLOGY, ("score", "digits", "grade")
    )
    for method in ("score", "digits", "grade"):
        exact = belief.beliefs(model, tokenizer, prompts, answers, METHODOLOGY, method)
        assert found[method][2] is None and exact[2] is None  # no decision point
        for got, want in zip(found[method], exact):
            if want is not None:
                assert got is not belief.UNREAD
                assert np.allclose(got.probs, want.probs, atol=2e-6)
                assert got.mass == pytest.approx(want.mass)
    assert belief.token_boundary(tokenizer, new[0], answers[0], answers[0].index("71")) is not None


def test_a_decision_point_inside_a_token_is_left_to_the_exact_reading(small):
    """Only a point where a generated token starts can be read from the cache; inside a token nothing is
    (`from_cache` marks it `UNREAD` and `beliefs` reads it from the text)."""
    _, tokenizer = small
    answer = '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}'
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    ends = [len(tokenizer.decode(ids[:k])) for k in range(1, len(ids) + 1)]
    long = next(k for k in range(1, len(ids)) if ends[k] - ends[k - 1] > 1)  # a token of several characters
    assert belief.token_boundary(tokenizer, ids, answer, ends[long]) == long + 1
    assert belief.token_boundary(tokenizer, ids, answer, ends[long] - 1) is None


def test_beliefs_read_in_bfloat16_match_float32(small):
    """`generation.dtype: bfloat16` evaluates with half-width weights: the cache reading builds its
    masks in the model's dtype, so both readings run and agree with float32's to bfloat16's precision."""
    import copy

    import torch

    model, tokenizer = small
    half = copy.deepcopy(model).to(torch.bfloat16)
    prompts = [[{"role": "user", "content": "Rate this fund."}], [{"role": "user", "content": "Rate. 0123456789"}]]
    answers = [
        '{"reasoning": "Sharpe ratio top 10%", "score": 71, "grade": 3}',
        '{"reasoning": "top", "score": 5, "grade": 1}',
    ]
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    new = [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
    longest = max(map(len, new))
    sequences = torch.cat(
        [enc["input_ids"], torch.tensor([n + [tokenizer.pad_token_id] * (longest - len(n)) for n in new])], dim=1
    )
    mask = torch.cat([enc["attention_mask"], torch.ones((len(new), longest), dtype=torch.long)], dim=1)
    with torch.no_grad():
        cache = half(
            input_ids=sequences[:, :-1],
            attention_mask=mask[:, :-1],
            position_ids=(mask[:, :-1].cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
        ).past_key_values
    found = belief.from_cache(
        half, tokenizer, sequences, enc["attention_mask"], cache, answers, METHODOLOGY, ("score",)
    )
    wide = belief.beliefs(model, tokenizer, prompts, answers, METHODOLOGY, "score")
    narrow = belief.beliefs(half, tokenizer, prompts, answers, METHODOLOGY, "score")
    for got, exact, want in zip(found["score"], narrow, wide):
        assert got is not belief.UNREAD and np.isfinite(got.probs).all()
        assert np.allclose(got.probs, exact.probs, atol=0.02) and np.allclose(exact.probs, want.probs, atol=0.05)
