"""prepare -> base -> sft -> train (GRPO) -> backtest -> register, each stage's run() on tiny inputs.

One chain per module (fixtures are module-scoped) so the tiny model is built once.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fundgrpo.evaluation.calibration import CalibrationFit, DecisionRule
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import records
from fundgrpo.params import (
    BacktestParams,
    GateParams,
    GenerationParams,
    GrpoParams,
    ModelArchParams,
    ModelParams,
    Params,
    ParamsError,
    PrepareParams,
    RegisterParams,
    SftParams,
)
from tests.support import REPO

TINY_ARCH = ModelArchParams(
    vocab_size=400,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
)


def tiny_funds(n_funds: int = 40, seed: int = 0) -> pd.DataFrame:
    """Two share classes per fund, expert grades from the default methodology's rule."""
    rng = np.random.default_rng(seed)
    n = 2 * n_funds
    funds = pd.DataFrame(
        {
            "share_class_id": [f"S{i:03d}" for i in range(n)],
            "fund_id": [f"F{i // 2:03d}" for i in range(n)],
            "name": [f"Fund {i}" for i in range(n)],
            "category": np.repeat(rng.choice(["Global Equity", "Korea Equity"], n_funds), 2),
            "sharpe_3y": rng.normal(0.5, 0.3, n),
            "return_3y": rng.normal(6, 3, n),
            "ongoing_cost": rng.uniform(0.2, 2, n),
            "max_drawdown_3y": -rng.uniform(5, 30, n),
            "information_ratio_3y": rng.normal(0, 0.5, n),
        }
    )
    return funds


@pytest.fixture(scope="module")
def methodology(repo_root_module):
    return meth.load(repo_root_module / "methodology/default.yaml")


@pytest.fixture(scope="module")
def schema(repo_root_module):
    return meth.output_schema(meth.load(repo_root_module / "methodology/default.yaml"))


@pytest.fixture(scope="module")
def repo_root_module():
    return REPO


@pytest.fixture(scope="module")
def datasets(methodology):
    from fundgrpo.methodology import preparation as prepare

    funds = tiny_funds()
    m = methodology
    rule = meth.rule_score(m, funds)
    funds["expert_grade"] = rule["rule_grade"].astype("Int64")
    funds["expert_score"] = rule["rule_score"]
    funds.loc[0, "expert_grade"] = pd.NA  # an unrated share class
    data, summary = prepare.run(funds, methodology, PrepareParams(train_share=0.6, validation_share=0.1))
    assert summary["unlabelled_rows_excluded"] == 1
    return data


@pytest.fixture(scope="module")
def chain(tmp_path_factory, datasets):
    from fundgrpo.model.modelling import build_base
    from fundgrpo.training import sft_trainer

    root = tmp_path_factory.mktemp("chain")
    model_params = ModelParams(arch=TINY_ARCH)
    build_base(model_params, datasets["train"], root / "base")
    info = sft_trainer.run(
        SftParams(epochs=1, batch_size=8), model_params, root / "base", datasets["train"], root / "sft"
    )
    return root, info


def test_prepare_never_splits_a_fund(datasets):
    owners: dict[str, set] = {}
    for split, rows in datasets.items():
        for r in rows:
            owners.setdefault(r.fund_id, set()).add(split)
    assert all(len(s) == 1 for s in owners.values())
    assert all(len(datasets[s]) > 0 for s in ("train", "validation", "test"))
    row = datasets["train"][0]
    assert row.prompt[-1]["role"] == "user" and "percentile" in row.prompt[-1]["content"].lower()
    answer = json.loads(row.reference)
    assert answer["grade"] == row.expert_grade


def test_base_model_loads_by_path(chain):
    from fundgrpo.model import modelling

    root, _ = chain
    model, tokenizer = modelling.load(root / "base")
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert "<|im_start|>assistant" in tokenizer.apply_chat_template(
        [{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True
    )
    # Korean text round-trips through the byte-level tokenizer
    assert tokenizer.decode(tokenizer("샤프지수 상위 10%")["input_ids"]) == "샤프지수 상위 10%"


def test_base_with_a_pretrained_name_writes_a_pointer(tmp_path):
    from fundgrpo.model import modelling
    from fundgrpo.model.modelling import build_base

    build_base(ModelParams(pretrained="Qwen/Qwen3-0.6B"), [], tmp_path)
    assert modelling.resolve(tmp_path) == "Qwen/Qwen3-0.6B"


def test_generation_stops_at_its_deadline(chain, datasets):
    """What frees the API's model at a request's timeout: past the deadline no batch starts, and a
    running one stops at its next token."""
    import time

    from fundgrpo.model import modelling

    root, _ = chain
    model, tokenizer = modelling.load(root / "base")
    prompts = [r.prompt for r in datasets["test"][:6]]
    assert modelling.generate(model, tokenizer, prompts, 32, 3, deadline=time.monotonic() - 1) == [""] * 6
    full = modelling.generate(model, tokenizer, prompts[:3], 32, 3)
    cut = modelling.generate(model, tokenizer, prompts[:3], 32, 3, deadline=time.monotonic())
    assert all(len(tokenizer(c)["input_ids"]) <= 1 < len(tokenizer(f)["input_ids"]) for c, f in zip(cut, full))


def test_sft_trains(chain):
    root, info = chain
    assert info["steps"] > 0 and np.isfinite(info["train_loss"])
    assert (root / "sft" / "model.safetensors").exists()


def test_sft_passes_callbacks_the_model_each_epoch(chain, datasets, tmp_path):
    """What the sft_epoch_curve study (research/experiments/) relies on: its callback sees the model after every
    epoch."""
    from transformers import TrainerCallback

    from fundgrpo.training import sft_trainer

    root, _ = chain
    seen = []

    class Epochs(TrainerCallback):
        def on_epoch_end(self, args, state, control, model=None, **kwargs):
            seen.append((round(state.epoch), sum(p.numel() for p in model.parameters())))

    sft_trainer.run(
        SftParams(epochs=2, batch_size=8),
        ModelParams(arch=TINY_ARCH),
        root / "base",
        datasets["train"],
        tmp_path,
        callbacks=[Epochs()],
    )
    assert [e for e, _ in seen] == [1, 2] and all(n > 0 for _, n in seen)


@pytest.fixture(scope="module")
def policy(chain, datasets, methodology, schema):
    from fundgrpo.training import grpo_trainer as train

    root, _ = chain
    params = GrpoParams(
        max_steps=2,
        eval_steps=0,
        save_steps=0,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=24,
        logging_steps=1,
        warmup_steps=0,
    )
    summary = train.run(
        params, ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"], methodology, schema, root / "policy"
    )
    return root / "policy", summary


def test_grpo_trains_and_logs_reward_curves(policy):
    path, summary = policy
    assert summary["steps"] == 2
    assert (path / "model.safetensors").exists()
    assert [r["step"] for r in summary["curves"]] == [1, 2]
    assert all("rewards/json_reward/mean" in r for r in summary["curves"])


@pytest.fixture(scope="module")
def backtest_result(policy, chain, datasets, methodology, schema):
    from fundgrpo.evaluation.backtesting import backtest, scored_funds
    from fundgrpo.model.inference import evaluate_models

    root, _ = chain
    models = {"grpo": policy[0], "base": root / "base"}
    params, fits = BacktestParams(max_funds=6), {"grpo": CalibrationFit(DecisionRule())}
    rows = scored_funds(params, datasets["test"])  # as the stage: inference, then scoring
    answered, reused = evaluate_models(
        models, rows, methodology, schema, params.beliefs, fits, GenerationParams(max_new_tokens=24)
    )
    return backtest(params, rows, methodology, answered, fits, reused)


def test_backtest_reports_every_evaluator(backtest_result):
    assert backtest_result["n_funds"] == 6
    assert set(backtest_result["models"]) == {"grpo", "base", "rule"}
    common = {"valid_json", "exact", "within_one", "qwk", "spearman", "score_mae", "neutral"}
    # every evaluator: how often it departs from the grade the prompt suggested (the methodology's,
    # shown by default): never, for the methodology's own scorer
    assert set(backtest_result["models"]["rule"]) == common | {"departures"}
    assert backtest_result["models"]["rule"]["departures"]["n"] == 0
    for name in ("grpo", "base"):  # language models also report how well their reasoning cites the evidence
        m = backtest_result["models"][name]
        assert common | {"evidence", "unsupported", "claims", "seconds"} <= set(m) and -1.0 <= m["evidence"] <= 1.0
        assert {"claims", "misstated_claims", "complete"} <= set(m["claims"]) and m["departures"]["n"] >= 0
        # an invalid answer is a miss: it cannot raise exact above the share of valid answers
        assert m["exact"] <= m["valid_json"] and m["neutral"]["exact"] >= m["exact"]
    assert "grpo-rule" in backtest_result["comparisons"]
    # the policy's confidence under the calibration fit, whether or not any of its answers is valid
    trust = backtest_result["models"]["grpo"]["trust"]
    assert {"ece", "brier", "exact_top70", "chosen"} <= set(trust) and 0 <= trust["confidence_mean"] <= 1
    # the test set's expert grades come from the rule, so the rule scorer is exact
    assert backtest_result["models"]["rule"]["exact"] == 1.0
    assert backtest_result["answers_reused"] == {}  # the base answers for itself


def test_backtest_answers_once_for_a_policy_that_kept_its_start(policy, datasets, methodology, schema, tmp_path):
    """GRPO that keeps its SFT start re-saves the SFT weights: the backtest reuses those answers."""
    import shutil

    from fundgrpo.evaluation.backtesting import backtest, scored_funds
    from fundgrpo.model.inference import evaluate_models

    kept = shutil.copytree(policy[0], tmp_path / "kept")
    (kept / "tokenizer.json").write_text((kept / "tokenizer.json").read_text() + " ")  # not part of the answers
    params = BacktestParams(max_funds=3)
    rows = scored_funds(params, datasets["test"])
    models = {"grpo": policy[0], "sft": kept}
    answered, reused = evaluate_models(
        models, rows, methodology, schema, params.beliefs, generation=GenerationParams(max_new_tokens=24)
    )
    result = backtest(params, rows, methodology, answered, reused=reused)
    assert result["answers_reused"] == {"sft": "grpo"}
    assert result["predictions"]["sft"] == result["predictions"]["grpo"] and result["models"]["sft"]["seconds"] == 0.0
    assert {k: v for k, v in result["models"]["sft"].items() if k != "seconds"} == {
        k: v for k, v in result["models"]["grpo"].items() if k != "seconds"
    }


def test_beliefs_of_a_trained_model_on_valid_answers(chain, datasets, methodology, schema):
    """The SFT model's grade probabilities on the reference answers (valid by construction): a
    distribution over the grades for each, read at the score and at the grade; a calibration fit
    on them; and every evaluation decided under that fit carries a confidence in 0-1."""
    from fundgrpo.evaluation import calibration, contest
    from fundgrpo.model import belief, modelling

    root, _ = chain
    rows = datasets["validation"]
    model, tokenizer = modelling.load(root / "sft")
    read = {
        m: belief.beliefs(model, tokenizer, [r.prompt for r in rows], [r.reference for r in rows], methodology, m)
        for m in ("score", "grade")
    }
    for found in read.values():
        assert all(abs(sum(b.probs) - 1) < 1e-4 and 0 < b.mass <= 1 for b in found)
    written = [r.expert_grade for r in rows]  # the references state the experts' grades
    fit = contest.fit_choice(
        written, written, {m: [b.probs for b in found] for m, found in read.items()}, methodology.grades
    )
    assert fit.rule.chosen in fit.options and fit.rule.confidence in ("token", "temperature")
    rule = fit.rule
    decided = [calibration.decide(b.probs, w, rule, methodology.grades) for b, w in zip(read[rule.method], written)]
    assert all(0 <= d["confidence"] <= 1 and 1 <= d["expected_grade"] <= 5 for d in decided)


def test_calibrate_on_a_model_with_no_valid_answer_writes_no_confidence(chain, datasets, tmp_path):
    """The untrained base answers nothing valid: calibrate warns and writes a fit that reads the
    belief as it is (no temperature), instead of failing the pipeline."""
    import os
    import subprocess
    import sys

    from fundgrpo import io

    root, _ = chain
    records.write(datasets["validation"][:4], tmp_path / "prepared/validation.jsonl")
    io.write_json(meth.rubric(meth.load(REPO / "methodology/default.yaml")), tmp_path / "schema/rubric.json")
    io.write_json(
        meth.output_schema(meth.load(REPO / "methodology/default.yaml")), tmp_path / "schema/output_schema.json"
    )
    (tmp_path / "params.yaml").write_text(
        f"prepare: {{out_dir: prepared}}\nmethodology: {{out_dir: schema}}\ngrpo: {{out_dir: {root / 'base'}}}\n"
        "calibrate: {out: out/calibration.json}\ngeneration: {max_new_tokens: 16}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "stages.calibrate"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "gave no valid answer" in done.stdout
    fit = json.loads((tmp_path / "out/calibration.json").read_text())
    assert fit["confidence"] == "token" and fit["options"] == {} and fit["validation"]["valid_json"] == 0.0


def test_register_gate_in_both_directions(
    tmp_path, policy, backtest_result, datasets, methodology, schema, monkeypatch
):
    from mlflow import MlflowClient

    from fundgrpo.registry.registration import register

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    reg = RegisterParams(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        artifact_location=str(tmp_path / "artifacts"),
        gate=GateParams(metric="qwk", margin=0.0, min_valid_json=0.0),
    )
    params = replace(
        Params(),
        register=reg,
        grpo=replace(GrpoParams(), out_dir=str(policy[0])),
        generation=GenerationParams(max_new_tokens=24),
    )
    rows = datasets["test"][:6]
    train = {"steps": 2}

    def candidate(qwk: float) -> dict:
        bt = json.loads(json.dumps({k: v for k, v in backtest_result.items() if k not in ("rows", "predictions")}))
        bt["models"]["grpo"].update(qwk=qwk, valid_json=1.0)
        bt["models"]["rule"]["qwk"] = 0.5
        bt["models"]["gbm_rule"] = {"qwk": 0.5, "valid_json": 1.0}  # the default gate compares with it too
        return bt

    # 1. first model, worse than the rule scorer: challenger, no champion
    d1 = register(params, candidate(0.2), train, [], rows, methodology, schema, [])
    assert (d1["alias"], d1["promoted"], d1["baseline_name"]) == ("challenger", False, "rule scorer")
    client = MlflowClient(tracking_uri=reg.tracking_uri)
    assert "champion" not in client.get_registered_model(reg.model_name).aliases

    # 2. beats the rule scorer: champion; its calibration fit travels with the registered model
    fit = CalibrationFit.of(
        {
            "method": "score",
            "confidence": "temperature",
            "temperature": 1.7,
            "grade_from": "greedy",
            "cutpoints": [1.5, 2.5, 3.5, 4.5],
            "options": {},
        }
    )
    d2 = register(params, candidate(0.8), train, [{"step": 1, "reward": 0.5}], rows, methodology, schema, [], fit)
    assert (
        d2["promoted"] and int(client.get_model_version_by_alias(reg.model_name, "champion").version) == d2["version"]
    )
    import mlflow

    from fundgrpo.registry import mlflow_registry
    from fundgrpo.serving.champion import calibration_of

    mlflow.set_tracking_uri(reg.tracking_uri)
    folder = mlflow_registry.load_components(f"models:/{reg.model_name}/{d2['version']}", tmp_path / "served")
    served = calibration_of(folder, params)  # the rule registered with the model, every field of it
    assert served == fit.rule and (served.temperature, served.cutpoints) == (1.7, (1.5, 2.5, 3.5, 4.5))

    # 3. worse than the champion on the same test set: the champion stays
    d3 = register(params, candidate(0.7), train, [], rows, methodology, schema, [])
    assert not d3["promoted"] and d3["baseline_name"] == f"champion v{d2['version']}"
    assert int(client.get_model_version_by_alias(reg.model_name, "champion").version) == d2["version"]
    assert int(client.get_model_version_by_alias(reg.model_name, "challenger").version) == d3["version"]

    # 3b. the champion re-scored on another test set answers with its own registered fit and decision
    #     rule, as serving does: the same model scored the same way as a candidate ties with it
    from fundgrpo.model.inference import evaluate_model
    from fundgrpo.registry.registration import champion_baseline

    elsewhere = dict(candidate(0.8), test_fingerprint="elsewhere")
    found, name = champion_baseline(client, params, elsewhere, rows, methodology, schema)
    assert name == f"champion v{d2['version']} (re-evaluated on this test set with its own fit)"
    assert found["trust"]["chosen"] == "score/temperature"  # the registered fit was applied
    same, _ = evaluate_model(policy[0], rows, methodology, schema, 24, 32, "candidate", ("score",), fit)
    assert {k: found[k] for k in ("exact", "qwk", "valid_json")} == {k: same[k] for k in ("exact", "qwk", "valid_json")}

    # 4. another test set: the champion is re-evaluated on this one, from the registry
    other = candidate(0.9)
    other["test_fingerprint"] = "different"
    d4 = register(params, other, train, [], rows, methodology, schema, [])
    assert "re-evaluated" in d4["reason"]  # every baseline passed: the reason names each, the champion re-scored

    # 5. a sweep member (register.promote false, inside `dvc exp run`): the gate passes, the
    #    champion stays; the MLflow run is named and tagged after the DVC experiment
    monkeypatch.setenv("DVC_EXP_NAME", "wooly-bear")
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", "abc123")
    champion = client.get_model_version_by_alias(reg.model_name, "champion").version
    best = dict(candidate(0.99), test_fingerprint="different")  # d4's test set: no re-evaluation if d4 is champion
    d5 = register(replace(params, register=replace(reg, promote=False)), best, train, [], rows, methodology, schema, [])
    assert (
        d5["gate_passed"]
        and not d5["promoted"]
        and d5["alias"] == "challenger"
        and "register.promote is false" in d5["reason"]
    )
    assert client.get_model_version_by_alias(reg.model_name, "champion").version == champion

    # 6. the default gate compares with gradient boosting with its validation-chosen rule too: beating the
    #    champion is not enough when the candidate falls below it; the record names the baseline that decided
    assert reg.gate.against == ("champion", "gbm_rule") and reg.gate.statistical_margin == 0.0
    strong = dict(candidate(0.99), test_fingerprint="different")
    strong["models"]["gbm_rule"] = {"qwk": 0.995, "valid_json": 1.0}
    d6 = register(params, strong, train, [], rows, methodology, schema, [])
    assert not d6["promoted"] and d6["baseline_name"] == "gradient boosting with its validation-chosen rule"
    assert "qwk 0.99 is below gradient boosting with its validation-chosen rule 0.995 by more than 0" in d6["reason"]
    # 7. a candidate that serves gradient boosting's grade alone equals it: not inferior, and said plainly
    gbm_alone = replace(fit.rule, serves="gbm", confidence="gbm", grade_from="likeliest", chosen="gbm/score/likeliest")
    alone = replace(fit, rule=gbm_alone)
    strong["models"]["gbm_rule"]["qwk"] = 0.99
    d7 = register(params, strong, train, [], rows, methodology, schema, [], alone)
    assert d7["promoted"] and "champion" in d7["reason"]
    assert "is not below gradient boosting with its validation-chosen rule 0.99 by more than 0" in d7["reason"]
    assert d7["reason"].endswith("it serves gradient boosting's grade alone (the language model's weight is 0: "
                                 "on validation funds it added nothing)")  # fmt: skip
    from fundgrpo.registry import mlflow_registry

    record = mlflow_registry.gate_record(client, reg.model_name, str(d7["version"]))
    assert record is not None and record.serves and record.serves.startswith("gradient boosting's grade alone")
    assert record.fingerprint() == meth.fingerprint(methodology)
    run = client.get_run(d5["run_id"])
    assert (
        run.info.run_name == "wooly-bear"
        and run.data.tags["dvc.exp_name"] == "wooly-bear"
        and run.data.tags["dvc.baseline_rev"] == "abc123"
    )


class Crash(Exception):
    pass


@pytest.mark.fault("GRPO training killed mid-run, then resumed")
def test_interrupted_grpo_resumes_to_the_same_curve(chain, datasets, methodology, schema, tmp_path):
    """Kill a run after its step-2 checkpoint, resume it, and compare with an uninterrupted run."""
    import torch
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from fundgrpo.training import grpo_trainer as train

    root, _ = chain
    params = GrpoParams(
        max_steps=4,
        save_steps=2,
        eval_steps=0,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
        logging_steps=1,
        warmup_steps=0,
        lr_scheduler_type="constant",
        temperature=1.0,
    )
    args = (params, ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"], methodology, schema)

    full = train.run(*args, tmp_path / "full", checkpoint_dir=tmp_path / "ckpt-full")

    class CrashAtStep3(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise Crash("killed mid-run")

    with pytest.raises(Crash):
        train.run(*args, tmp_path / "resumed", checkpoint_dir=tmp_path / "ckpt", callbacks=[CrashAtStep3()])
    assert (tmp_path / "ckpt" / "checkpoint-2").exists()
    resumed = train.run(*args, tmp_path / "resumed", checkpoint_dir=tmp_path / "ckpt")

    assert resumed["resumed_from"].endswith("checkpoint-2")

    def curve(s):
        return [(r["step"], round(r["reward"], 5), round(r["completions/mean_length"], 3)) for r in s["curves"]]

    assert curve(resumed) == curve(full)
    a, b = load_file(tmp_path / "full" / "model.safetensors"), load_file(tmp_path / "resumed" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


@pytest.mark.fault("SFT training killed mid-run, then resumed")
def test_interrupted_sft_resumes_to_the_same_losses_and_weights(chain, datasets, tmp_path):
    """Kill an SFT run after its step-2 checkpoint, resume it, and compare with an uninterrupted run (a
    pretrained model's SFT on a CPU outlasts a working day); other settings never resume into its checkpoints."""
    import torch
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from fundgrpo.training import sft_trainer

    root, _ = chain
    params = SftParams(epochs=1, batch_size=8, save_steps=2, logging_steps=1, warmup_steps=0)
    args = (params, ModelParams(arch=TINY_ARCH), root / "base", datasets["train"])
    full = sft_trainer.run(*args, tmp_path / "full", checkpoint_dir=tmp_path / "ckpt-full")
    assert full["steps"] >= 4 and full["resumed_from"] is None
    assert len(list((tmp_path / "ckpt-full").glob("checkpoint-*"))) == 2  # the last two kept, not every one

    class CrashAtStep3(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise Crash("killed mid-run")

    with pytest.raises(Crash):
        sft_trainer.run(*args, tmp_path / "resumed", checkpoint_dir=tmp_path / "ckpt", callbacks=[CrashAtStep3()])
    assert (tmp_path / "ckpt" / "checkpoint-2").exists()
    # a later checkpoint cut mid-write (half its weights, no trainer state) is passed over
    cut = tmp_path / "ckpt" / "checkpoint-3"
    cut.mkdir()
    weights = next((tmp_path / "ckpt" / "checkpoint-2").glob("*.safetensors")).read_bytes()
    (cut / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    resumed = sft_trainer.run(*args, tmp_path / "resumed", checkpoint_dir=tmp_path / "ckpt")
    assert resumed["resumed_from"].endswith("checkpoint-2") and resumed["steps"] == full["steps"]

    def losses(folder):
        rows = json.loads((folder / "log_history.json").read_text())
        return [(r["step"], round(r["loss"], 4)) for r in rows if "loss" in r]

    assert losses(tmp_path / "resumed") == losses(tmp_path / "full") and len(losses(tmp_path / "full")) >= 4
    a, b = load_file(tmp_path / "full" / "model.safetensors"), load_file(tmp_path / "resumed" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    # another run's checkpoints are never resumed into: other settings start afresh
    other = sft_trainer.run(
        replace(params, learning_rate=params.learning_rate / 2),
        *args[1:],
        tmp_path / "other",
        checkpoint_dir=tmp_path / "ckpt",
    )
    assert other["resumed_from"] is None


def test_best_checkpoint_by_validation_reward(chain, datasets, methodology, schema, tmp_path):
    from fundgrpo.training import grpo_trainer as train

    root, _ = chain
    params = GrpoParams(
        max_steps=4,
        save_steps=2,
        eval_steps=2,
        eval_prompts=4,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
        logging_steps=1,
        warmup_steps=0,
        best_metric="reward",
        collapse_share=1.0,  # never flagged: this checks the reward's choice alone
    )
    out = train.run(
        params,
        ModelParams(arch=TINY_ARCH),
        root / "sft",
        datasets["train"],
        methodology,
        schema,
        tmp_path / "p",
        datasets["validation"],
        tmp_path / "ckpt",
    )
    assert [r["step"] for r in out["eval_curve"]] == [0, 2, 4]  # the start, then every 2 steps
    trained = {r["step"]: r["eval_reward"] for r in out["eval_curve"] if r["step"] > 0}
    assert out["best_value"] == max(trained.values())
    assert out["start_value"] == out["eval_curve"][0]["eval_reward"]
    # the start competes: it is kept unless a trained step beats it on validation
    assert out["kept"] == (
        "start" if out["start_value"] >= out["best_value"] else f"step {max(trained, key=trained.get)}"
    )


def test_best_checkpoint_by_greedy_agreement_keeps_the_start_unless_beaten(
    chain, datasets, methodology, schema, tmp_path
):
    """best_metric=qwk: greedy answers to all validation prompts pick the kept model, the start included."""
    import torch
    from safetensors.torch import load_file

    from fundgrpo.training import grpo_trainer as train

    root, _ = chain
    # lr 0.05 wrecks the tiny policy: no trained step can beat the SFT start, which must come back unchanged
    params = GrpoParams(
        max_steps=4,
        save_steps=2,
        eval_steps=2,
        eval_prompts=4,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=48,
        logging_steps=1,
        warmup_steps=0,
        learning_rate=0.05,
        best_metric="qwk",
    )
    out = train.run(
        params,
        ModelParams(arch=TINY_ARCH),
        root / "sft",
        datasets["train"],
        methodology,
        schema,
        tmp_path / "p",
        datasets["validation"],
        tmp_path / "ckpt",
    )
    curve = {r["step"]: r for r in out["eval_curve"]}
    assert sorted(curve) == [0, 2, 4] and all("eval_greedy_qwk" in r and "eval_reward" in r for r in curve.values())
    assert out["start_value"] == curve[0]["eval_greedy_qwk"]
    # the callback's figures are the backtest's, for the start model on the same prompts
    from fundgrpo.model.inference import evaluate_model

    start_metrics, _ = evaluate_model(root / "sft", datasets["validation"], methodology, schema, max_new_tokens=48)
    assert {k: curve[0][f"eval_greedy_{k}"] for k in ("valid_json", "exact", "within_one", "qwk")} == {
        k: start_metrics[k] for k in ("valid_json", "exact", "within_one", "qwk")
    }
    from fundgrpo.training.shared import COLLAPSED

    def selected(r):  # a collapsed checkpoint scores below any real value (grpo.collapse_share)
        return COLLAPSED if r["eval_greedy_collapsed"] else r["eval_greedy_qwk"]

    assert out["best_value"] == max(selected(curve[2]), selected(curve[4]))
    assert out["best_value"] <= out["start_value"] and out["kept"] == "start"
    # three evaluations, each timed: both kinds are part of the stage's seconds
    assert 0 < out["greedy_eval_seconds"] and 0 < out["sampled_eval_seconds"]
    assert out["greedy_eval_seconds"] + out["sampled_eval_seconds"] < out["seconds"]
    start, kept = load_file(root / "sft" / "model.safetensors"), load_file(tmp_path / "p" / "model.safetensors")
    assert all(torch.equal(start[k], kept[k]) for k in start)
    with pytest.raises(ValueError, match="best_metric"):
        train.best_metric_key(replace(params, best_metric="accuracy"))


def test_training_stops_after_evaluations_that_beat_nothing_and_keeps_the_best(
    chain, datasets, methodology, schema, tmp_path
):
    """grpo.early_stopping_patience: transformers' EarlyStoppingCallback on the selection metric. With
    patience 1 training stops at the first trained evaluation that beats no earlier one (the start's does
    not count there: the callback starts counting at the first trained evaluation), not at max_steps;
    the wrecking learning rate above never beats the start, which comes back."""
    from fundgrpo.training import grpo_trainer as train

    root, _ = chain
    params = GrpoParams(
        max_steps=8, save_steps=2, eval_steps=2, eval_prompts=0, per_device_train_batch_size=8, num_generations=4,
        max_completion_length=48, logging_steps=1, warmup_steps=0, learning_rate=0.05, best_metric="qwk",
        early_stopping_patience=1,
    )  # fmt: skip
    args = (params, ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"], methodology, schema)
    out = train.run(*args, tmp_path / "p", datasets["validation"], tmp_path / "ckpt")
    from fundgrpo.training.shared import COLLAPSED

    trained = [  # what the callback compares: a collapsed checkpoint scores below any real value
        COLLAPSED if r["eval_greedy_collapsed"] else r["eval_greedy_qwk"] for r in out["eval_curve"] if r["step"] > 0
    ]
    assert out["steps"] < params.max_steps and out["eval_curve"][-1]["step"] == out["steps"]
    assert all(a < b for a, b in zip(trained[:-1], trained[1:-1])) and trained[-1] <= max(trained[:-1])
    assert out["best_value"] <= out["start_value"] and out["kept"] == "start"
    with pytest.raises(ParamsError, match="early_stopping_patience"):
        replace(params, early_stopping_patience=-1)


def test_without_sampled_prompts_the_greedy_validation_alone_runs_and_picks_the_same(
    chain, datasets, methodology, schema, tmp_path, monkeypatch
):
    """grpo.eval_prompts 0: no sampled validation (TRL's generation, rewards and loss on
    validation prompts, which only best_metric reward reads); the greedy answers still evaluate the start
    and every checkpoint, and pick the kept one. Evaluations draw from a copy of the random state, so
    training with and without the sampled validation samples the same completions, takes the same steps
    and keeps the same model."""
    from trl import GRPOTrainer

    from fundgrpo.training import grpo_trainer as train

    sampled_in_training: list = []
    generate = GRPOTrainer._generate_and_score_completions

    def recorded(self, inputs):
        out = generate(self, inputs)
        if self.model.training:
            sampled_in_training.append(out["completion_ids"].tolist())
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", recorded)
    root, _ = chain
    params = GrpoParams(
        max_steps=4, save_steps=2, eval_steps=2, eval_prompts=0, per_device_train_batch_size=8, num_generations=4,
        max_completion_length=48, logging_steps=1, warmup_steps=0, learning_rate=1e-3, best_metric="qwk",
    )  # fmt: skip
    runs, completions = {}, {}
    for n in (0, 4):
        sampled_in_training.clear()
        runs[n] = train.run(
            replace(params, eval_prompts=n), ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"],
            methodology, schema, tmp_path / f"p{n}", datasets["validation"], tmp_path / f"ckpt{n}",
        )  # fmt: skip
        completions[n] = list(sampled_in_training)
    out = runs[0]
    curve = {r["step"]: r for r in out["eval_curve"]}
    assert sorted(curve) == [0, 2, 4] and all("eval_greedy_qwk" in r and "eval_reward" not in r for r in curve.values())
    assert out["sampled_eval_seconds"] == 0 and out["greedy_eval_seconds"] > 0 and out["best_eval_reward"] is None
    assert out["start_value"] == curve[0]["eval_greedy_qwk"]
    best = max((curve[s]["eval_greedy_qwk"], s) for s in (2, 4) if not curve[s]["eval_greedy_collapsed"])
    if best[0] > out["start_value"]:
        assert out["kept"] == f"step {best[1]}" and out["best_value"] == best[0]
    else:
        assert out["kept"] == "start"
    # the other run sampled its validation too, and it changed nothing in training: the same completions
    # sampled at every step, the same losses and greedy validations, the same kept model
    sampled = runs[4]
    assert sampled["sampled_eval_seconds"] > 0 and all("eval_reward" in r for r in sampled["eval_curve"])
    assert len(completions[0]) == 4 and completions[0] == completions[4]
    assert [r["loss"] for r in sampled["curves"]] == [r["loss"] for r in out["curves"]]
    greedy = [{k: v for k, v in r.items() if k.startswith("eval_greedy_")} for r in out["eval_curve"]]
    assert greedy == [{k: r[k] for k in g} for r, g in zip(sampled["eval_curve"], greedy, strict=True)]
    assert (sampled["kept"], sampled["best_value"]) == (out["kept"], out["best_value"])


def test_a_collapsed_checkpoint_is_never_kept(chain, datasets, methodology, schema, tmp_path, capsys):
    """An evaluation whose greedy answers give one grade to more than grpo.collapse_share of the funds
    (while the experts give it to fewer) is flagged collapsed; such a checkpoint is never the kept one,
    and the stage says so. (A low share and a high learning rate make it likely on this tiny chain.)"""
    from fundgrpo.training import grpo_trainer as train

    root, _ = chain
    params = GrpoParams(
        max_steps=4,
        save_steps=2,
        eval_steps=2,
        eval_prompts=4,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=48,
        logging_steps=1,
        warmup_steps=0,
        learning_rate=3e-3,
        collapse_share=0.3,
    )
    out = train.run(
        params, ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"], methodology, schema, tmp_path / "p",
        datasets["validation"], tmp_path / "ckpt",
    )  # fmt: skip
    curve = {r["step"]: r for r in out["eval_curve"]}
    experts = [r.expert_grade for r in datasets["validation"]]
    for step, r in curve.items():  # the flag follows its definition
        expert_share = experts.count(int(r["eval_greedy_top_grade"])) / len(experts)
        assert r["eval_greedy_collapsed"] == float(step in out["collapsed_steps"])
        assert bool(r["eval_greedy_collapsed"]) == (r["eval_greedy_top_share"] > 0.3 and expert_share <= 0.3)
    kept = 0 if out["kept"] == "start" else int(out["kept"].split()[1])
    assert kept not in out["collapsed_steps"] or set(out["collapsed_steps"]) == set(curve)
    if out["collapsed_steps"]:
        assert "collapsed onto one grade" in capsys.readouterr().out


def test_best_checkpoint_by_evaluation_quality_refuses_a_lost_grade(
    chain, datasets, methodology, schema, tmp_path, capsys
):
    """best_metric=evaluation: each greedy validation evaluation carries the evaluation figure and its
    parts, a checkpoint whose QWK fell below the start's (tolerance 0) is refused like a collapsed
    one, and the kept model is the best evaluation among the rest, the start included."""
    from fundgrpo.training import grpo_trainer as train
    from fundgrpo.training.shared import COLLAPSED, QUALITY

    root, _ = chain
    params = GrpoParams(
        max_steps=4, save_steps=2, eval_steps=2, eval_prompts=4, per_device_train_batch_size=8, num_generations=4,
        max_completion_length=48, logging_steps=1, warmup_steps=0, learning_rate=0.05, best_metric="evaluation",
        qwk_tolerance=0.0,
    )  # fmt: skip
    out = train.run(
        params, ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"], methodology, schema, tmp_path / "p",
        datasets["validation"], tmp_path / "ckpt",
    )  # fmt: skip
    curve = {r["step"]: r for r in out["eval_curve"]}
    assert all(f"eval_greedy_{k}" in r for r in curve.values() for k in QUALITY)
    start = curve[0]
    assert out["start_value"] == start["eval_greedy_evaluation"] and not start["eval_greedy_refused"]
    for step in (2, 4):
        r = curve[step]
        assert r["eval_greedy_refused"] == float(r["eval_greedy_qwk"] < start["eval_greedy_qwk"])
        assert r["eval_greedy_refused"] == float(step in out["refused_steps"])
    allowed = [
        COLLAPSED
        if curve[s]["eval_greedy_refused"] or curve[s]["eval_greedy_collapsed"]
        else curve[s]["eval_greedy_evaluation"]
        for s in (2, 4)
    ]
    assert out["best_value"] == max(allowed)
    assert out["kept"] == (
        "start" if out["start_value"] >= out["best_value"] else f"step {(2, 4)[allowed.index(max(allowed))]}"
    )
    if out["refused_steps"]:
        assert "refused" in capsys.readouterr().out
    with pytest.raises(ParamsError, match="grpo.best_metric must be one of"):
        GrpoParams(best_metric="faithfulness")


def test_grpo_with_the_judge_reward_end_to_end(chain, datasets, methodology, schema, tmp_path, monkeypatch):
    """GRPO steps whose reward includes the judge, served by an OpenAI-compatible stub on loopback."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from fundgrpo.params import JudgeParams, RewardWeights
    from fundgrpo.training import grpo_trainer as train

    requests: list[str] = []

    class Judge(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            requests.append(self.headers.get("Authorization"))
            content = json.dumps({"faithful": 4, "evidence": 5, "coherent": 3})  # (4 + 5 + 3) / 15 = 0.8
            out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-test")
    root, _ = chain
    judge = JudgeParams(
        enabled=True,
        backend="http",
        model="judge",
        url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        api_key_env="TEST_JUDGE_KEY",
        log_path=str(tmp_path / "judge.jsonl"),
        cache_path=str(tmp_path / "cache.jsonl"),
    )
    params = GrpoParams(
        max_steps=2,
        eval_steps=0,
        save_steps=0,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=24,
        logging_steps=1,
        warmup_steps=0,
        judge=judge,
        reward_weights=replace(RewardWeights(), judge=1.0),
    )
    try:
        out = train.run(
            params, ModelParams(arch=TINY_ARCH), root / "sft", datasets["train"], methodology, schema, tmp_path / "p"
        )
    finally:
        server.shutdown()
    assert out["steps"] == 2 and requests and set(requests) == {"Bearer sk-test"}
    judged = [r["rewards/judge_reward/mean"] for r in out["curves"] if r.get("rewards/judge_reward/mean") is not None]
    assert judged == pytest.approx([0.8, 0.8])  # the judge's score is part of the GRPO reward at each step
    log = [json.loads(line) for line in (tmp_path / "judge.jsonl").read_text().splitlines()]
    assert len(log) == len(requests) and {r["score"] for r in log} == {0.8}
