import pytest

from fundgrpo.params import Params, ParamsError, from_dict, load_params


def test_repo_params_and_profiles_load(repo_root):
    base = load_params(repo_root / "params.yaml")
    assert base.grpo.loss_type == "dapo"
    for profile in sorted((repo_root / "profiles").glob("*.yaml")):
        load_params(repo_root / "params.yaml", profile)


def test_unknown_key_is_an_error():
    with pytest.raises(ParamsError, match=r"params.grpo: unknown key\(s\) \['stpes'\]"):
        from_dict(Params, {"grpo": {"stpes": 3}})


def test_wrong_type_is_an_error():
    with pytest.raises(ParamsError, match="params.grpo.max_steps: expected an integer"):
        from_dict(Params, {"grpo": {"max_steps": "many"}})


def test_params_are_frozen():
    p = Params()
    with pytest.raises(AttributeError):
        p.grpo.max_steps = 3  # type: ignore[misc]
