import pytest

from fundgrpo import profiles
from fundgrpo.params import Params, ParamsError, from_dict, load_params, render


def test_repo_params_and_profiles_load(repo_root):
    base = load_params(repo_root / "params.yaml")
    assert base.grpo.loss_type == "dapo"
    for profile in sorted((repo_root / "profiles").glob("*.yaml")):
        profiles.load(profile.stem, repo_root / "params.yaml", repo_root / "profiles")


def test_params_yaml_is_the_defaults_of_params_py(repo_root):
    """One home for each default: the committed params.yaml is rendered from fundgrpo/params.py."""
    text = (repo_root / "params.yaml").read_text(encoding="utf-8")
    if text.startswith("# params.yaml with profile(s)"):
        pytest.skip("a profile is applied to params.yaml here (`git checkout params.yaml` to compare)")
    assert text == render(), (
        "params.yaml and fundgrpo/params.py disagree: run `python -m fundgrpo.params > params.yaml`"
    )


def test_every_key_of_every_section_is_in_params_yaml():
    import yaml

    data = yaml.safe_load(render())
    assert from_dict(Params, data) == Params()
    assert data["grpo"]["lr_scheduler_type"] == "constant_with_warmup" and data["sft"]["seed"] == 0


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


def test_lora_top_layers_needs_module_names_and_a_count():
    from fundgrpo.params import LoraParams, ParamsError

    assert LoraParams(target_modules=("q_proj",), top_layers=15).top_layers == 15
    with pytest.raises(ParamsError, match="needs the module names"):
        LoraParams(target_modules=("all-linear",), top_layers=15)
    with pytest.raises(ParamsError, match="top_layers must be 0"):
        LoraParams(top_layers=-1)


def test_the_sampled_validation_reward_is_asked_for_where_best_metric_reads_it():
    from fundgrpo.params import GrpoParams, ParamsError

    assert GrpoParams(eval_prompts=0).eval_prompts == 0 and GrpoParams(best_metric="reward", eval_prompts=8)
    with pytest.raises(ParamsError, match="best_metric: reward reads the sampled validation reward"):
        GrpoParams(best_metric="reward", eval_prompts=0)
    with pytest.raises(ParamsError, match="grpo.eval_prompts must be >= 0"):
        GrpoParams(eval_prompts=-1)


def test_how_grpo_aggregates_its_rewards_is_one_of_trls_choices():
    from fundgrpo.params import GrpoParams, ParamsError

    assert GrpoParams(multi_objective_aggregation="normalize_then_sum")
    with pytest.raises(ParamsError, match=r"grpo.multi_objective_aggregation must be one of \['sum_then_normalize'"):
        GrpoParams(multi_objective_aggregation="normalize")


def test_trls_enumerated_grpo_settings_are_checked_when_params_load():
    """TRL reads loss_type and scale_rewards only in the first step's loss: a typo once surfaced after SFT
    and a round of generation (`Unknown loss type`), now when params load, naming the choices."""
    from fundgrpo.params import GRPO_LOSS_TYPES, GrpoParams, ParamsError

    assert all(GrpoParams(loss_type=kind) for kind in GRPO_LOSS_TYPES)
    assert GrpoParams(scale_rewards="batch", vllm_mode="server")
    with pytest.raises(ParamsError, match=r"grpo.loss_type must be one of \['grpo', 'bnpo', 'dr_grpo', 'dapo'"):
        GrpoParams(loss_type="dr-grpo")
    with pytest.raises(ParamsError, match=r"grpo.scale_rewards must be one of \['group', 'batch', 'none'\]"):
        GrpoParams(scale_rewards="True")
    with pytest.raises(ParamsError, match=r"grpo.vllm_mode must be one of \['colocate', 'server'\]"):
        GrpoParams(vllm_mode="remote")


def test_a_setting_read_late_or_silently_is_checked_when_params_load():
    """A scheduler's typo surfaced when its trainer started (GRPO's after SFT); a misspelt objective fitted the
    regressor without a word; a gate on score_mae (better lower) would have promoted the worse model."""
    from transformers import SchedulerType

    from fundgrpo.params import LR_SCHEDULERS, BaselineParams, GateParams, GrpoParams, ParamsError, SftParams

    assert set(LR_SCHEDULERS) == {s.value for s in SchedulerType}
    with pytest.raises(ParamsError, match=r"sft.lr_scheduler_type must be one of \['linear', 'cosine'"):
        SftParams(lr_scheduler_type="cosin")
    with pytest.raises(ParamsError, match=r"grpo.lr_scheduler_type must be one of"):
        GrpoParams(lr_scheduler_type="constant-with-warmup")
    with pytest.raises(ParamsError, match=r"baseline.objective must be one of \['classifier', 'regressor'\]"):
        BaselineParams(objective="clasifier")
    with pytest.raises(ParamsError, match=r"register.gate.metric must be one of \['qwk', 'exact', 'within_one'"):
        GateParams(metric="score_mae")


def test_monitoring_drift_tests_are_evidentlys_and_checked_when_params_load():
    """A scheduled monitoring run reads its drift tests only when a batch arrives: a typo is refused at load."""
    from evidently.legacy.calculations.stattests.registry import _registered_stat_tests

    from fundgrpo.params import DRIFT_TESTS_CATEGORICAL, DRIFT_TESTS_NUMERICAL, MonitorParams, ParamsError

    kinds = {name: {str(kind) for kind in by_kind} for name, by_kind in _registered_stat_tests.items()}
    assert set(DRIFT_TESTS_NUMERICAL) == {n for n, k in kinds.items() if "ColumnType.Numerical" in k}
    assert set(DRIFT_TESTS_CATEGORICAL) == {n for n, k in kinds.items() if "ColumnType.Categorical" in k}
    assert MonitorParams(method="ks", prediction_method="psi")
    with pytest.raises(ParamsError, match=r"monitor.method must be one of \['anderson'"):
        MonitorParams(method="wasserstein_distance")
    with pytest.raises(ParamsError, match=r"monitor.prediction_method must be one of \['TVD', 'chisquare'"):
        MonitorParams(prediction_method="ks")  # a numerical test on the grades, read as categories


@pytest.mark.parametrize(
    "cls, field, value, says",
    [
        ("GrpoParams", "num_generations", 1, "grpo.num_generations must be at least 2, got 1"),
        ("GrpoParams", "temperature", 0.0, "grpo.temperature must be more than 0"),
        ("GrpoParams", "max_completion_length", 0, "grpo.max_completion_length must be at least 1"),
        ("GrpoParams", "learning_rate", -1e-4, "grpo.learning_rate must be more than 0"),
        ("GrpoParams", "epsilon_high", 0.1, "grpo.epsilon_high must be at least 0.2"),
        ("GrpoParams", "collapse_share", 1.5, "grpo.collapse_share must be at most 1"),
        ("SftParams", "epochs", 0.0, "sft.epochs must be more than 0"),
        ("SftParams", "batch_size", 0, "sft.batch_size must be at least 1"),
        ("GenerationParams", "max_new_tokens", 0, "generation.max_new_tokens must be at least 1"),
        ("BaselineParams", "max_leaf_nodes", (1,), r"baseline.max_leaf_nodes\[\] must be at least 2"),
        ("BaselineParams", "inner_validation_share", 1.5, "baseline.inner_validation_share must be at most 0.9"),
        ("GateParams", "min_valid_json", 1.5, "register.gate.min_valid_json must be at most 1"),
        ("MonitorParams", "drift_share", 1.5, "monitor.drift_share must be at most 1"),
        ("MonitorParams", "prediction_sample", -1, "monitor.prediction_sample must be at least 0"),
        ("LoraParams", "r", 0, "lora.r must be at least 1"),
        ("BacktestParams", "max_funds", -1, "backtest.max_funds must be at least 0"),
    ],
)
def test_numbers_out_of_range_are_refused_when_params_load(cls, field, value, says):
    """Accepted before and found only by the stage that used them, or never: one generation a prompt (no
    advantage), a drift share no batch could reach, a valid-JSON bar no candidate could pass."""
    import fundgrpo.params as params

    with pytest.raises(params.ParamsError, match=says):
        getattr(params, cls)(**{field: value})


def test_calibrate_settings_are_checked_when_params_load():
    from fundgrpo.params import CalibrateParams, GateParams, ParamsError

    with pytest.raises(ParamsError, match=r"calibrate.bins: 0; at least 1"):
        CalibrateParams(bins=0)
    with pytest.raises(ParamsError, match=r"calibrate.serve must be one of \['auto', 'lm', 'gbm', 'stack'\]"):
        CalibrateParams(serve="pooled")
    with pytest.raises(ParamsError, match=r"calibrate.folds: 1"):
        CalibrateParams(folds=1)
    with pytest.raises(ParamsError, match=r"register.gate.against\[\] must be one of"):
        GateParams(against=("champion", "gbm"))
