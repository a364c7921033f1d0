"""The compact model's tokenizer: byte-level BPE with digits one by one, merging within words or across them."""

from __future__ import annotations

import pytest

from fundgrpo.training import modelling

ANSWERS = [
    '{"reasoning": "Average. Sharpe ratio top 30%; 3-year return top 10%. Methodology 4", "score": 48, "grade": 3}',
    '{"reasoning": "Poor. Sharpe ratio bottom 10%; 3-year return bottom 10%. Methodology 1", "score": 6, "grade": 1}',
    '{"reasoning": "보통. 샤프 비율 상위 30%; 3년 수익률 상위 10%. 방법론 4", "score": 52, "grade": 3}',
]


@pytest.mark.parametrize("merges", ["words", "phrases"])
def test_any_text_round_trips_and_digits_stay_single_tokens(merges):
    tok = modelling.build_tokenizer(ANSWERS * 30, 600, merges)
    for text in [*ANSWERS, "미지의 문구 12345, unseen words"]:  # Korean, and text the tokenizer never saw
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
        pieces = [tok.decode([i]) for i in ids]
        assert all(len(p) == 1 for p in pieces if any(c.isdigit() for c in p)), pieces  # a number is its digits


def test_phrase_merges_spell_the_templates_text_in_fewer_tokens():
    words = modelling.build_tokenizer(ANSWERS * 30, 600, "words")
    phrases = modelling.build_tokenizer(ANSWERS * 30, 600, "phrases")
    for text in ANSWERS:
        n_words = len(words(text, add_special_tokens=False)["input_ids"])
        n_phrases = len(phrases(text, add_special_tokens=False)["input_ids"])
        assert n_phrases * 2 <= n_words, (n_phrases, n_words)
    assert ', "grade": ' in [phrases.decode([i]) for i in phrases(ANSWERS[0], add_special_tokens=False)["input_ids"]]
