"""The compact model's tokenizer: byte-level BPE with digits one by one, merging within words or across them."""

from __future__ import annotations

import pytest

from fundgrpo.model import modelling

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


def test_prompts_that_share_a_beginning_run_it_once_and_answer_as_each_would_alone():
    """`generate` runs a batch's shared beginning (here the system message and the first words) once and
    copies its key-value cache to every row: the next-token logits and the greedy answers are what each
    prompt gives alone, prompts of different lengths included; prompts that share nothing are padded left."""
    import torch

    from fundgrpo.params import ModelArchParams

    torch.manual_seed(0)
    tok = modelling.build_tokenizer(ANSWERS * 30, 600, "phrases")
    arch = ModelArchParams(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=16)  # fmt: skip
    model = modelling.build_model(arch, tok).eval()
    system = {"role": "system", "content": "You rate funds by the house methodology."}
    users = ["Sharpe ratio top 30%", "Sharpe ratio bottom 10%; 3-year return top 10%. Methodology 4", "방법론 4"]
    chats = [[system, {"role": "user", "content": u}] for u in users]
    texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    with torch.no_grad():
        batch = modelling.prompt_batch(model, tok, texts)
        shared, mask = modelling.shared_length(rows), batch["attention_mask"]
        assert batch["past_key_values"].get_seq_length() == shared > 10
        together = model(  # as `generate` runs it: the tokens after the cached ones, positions from the mask
            input_ids=batch["input_ids"][:, shared:], attention_mask=mask,
            position_ids=(mask.cumsum(-1) - 1)[:, shared:], past_key_values=batch["past_key_values"],
        ).logits[:, -1]  # fmt: skip
        for row, logits in zip(rows, together):
            assert torch.allclose(model(input_ids=torch.tensor([row])).logits[0, -1], logits, atol=1e-5)
        apart = modelling.prompt_batch(model, tok, ["Sharpe", "ongoing cost"])
        assert "past_key_values" not in apart and apart["attention_mask"][:, -1].all()
    alone = [modelling.generate(model, tok, [c], max_new_tokens=12)[0] for c in chats]
    assert modelling.generate(model, tok, chats, max_new_tokens=12) == alone


def test_a_model_with_sliding_window_layers_gets_left_padded_prompts():
    """A sliding-window layer (Gemma 3's) attends to the last columns, padding included: its prompts are not
    split around a shared beginning, and a batch answers as each prompt alone."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    tok = modelling.build_tokenizer(ANSWERS * 30, 600, "phrases")
    config = Gemma3TextConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
    )  # fmt: skip
    model = Gemma3ForCausalLM(config).eval()
    chats = [[{"role": "user", "content": f"Sharpe ratio {u}"}] for u in ("top 30%", "bottom 10%; 3-year return")]
    texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    with torch.no_grad():
        assert "past_key_values" not in modelling.prompt_batch(model, tok, texts)
    alone = [modelling.generate(model, tok, [c], max_new_tokens=8)[0] for c in chats]
    assert modelling.generate(model, tok, chats, max_new_tokens=8) == alone


def test_greedy_decoding_cites_only_the_documents_and_sentences_the_prompt_showed():
    """`CitingShown`: where the best token would name a document or sentence the row's prompt lacks, the best
    one that names a shown one is taken; other rows, and a row where nothing in reach fits, are left alone."""
    import torch

    cite = '{"people": {"judgement": -1, "evidence": [{"document": 2, "sentence": 1}]}}'
    tok = modelling.build_tokenizer([*ANSWERS, cite] * 30, 600, "phrases")
    prompt = tok("Documents: [1] (1) (2) (3) [2] (1)", add_special_tokens=False)["input_ids"]
    digit = {d: tok.convert_tokens_to_ids(d) for d in "0123456789"}

    def step(written: str, ranked: str, shown: tuple[int, ...]) -> str:
        ids = torch.tensor([prompt + tok(written, add_special_tokens=False)["input_ids"]])
        scores = torch.zeros(1, len(tok))
        for rank, d in enumerate(ranked):  # the model's preference, best first
            scores[0, digit[d]] = 10.0 - rank
        chosen = modelling.CitingShown(tok, [shown], len(prompt))(ids, scores)[0].argmax().item()
        return tok.decode([chosen])

    assert step('{"people": {"judgement": -1, "evidence": [{"document": ', "72", (3, 1)) == "2"
    assert step('{"people": {"judgement": -1, "evidence": [{"document": 2, "sentence": ', "301", (3, 1)) == "1"
    assert step('{"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": ', "31", (3, 1)) == "3"
    assert step('{"people": {"judgement": -1, "evidence": [{"document": 1', "0", (1,) * 12) == "0"  # 10 is shown
    assert step('{"people": {"judgement": -1, "evidence": [{"document": 1', "0", (1,) * 3) != "0"
    assert step('{"people": {"judgement": -1, "evidence": [{"document": ', "9", ()) == "9"  # none fits: the model's
    assert step('{"score": ', "9", (1,)) == "9"  # not a citation
