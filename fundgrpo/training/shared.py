"""Pieces the SFT and GRPO stages share: device, dtype, LoRA, saving, resuming, curves."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from fundgrpo import io
from fundgrpo.evaluation import agreement
from fundgrpo.methodology import answers, claims
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord, expert_grades
from fundgrpo.model import inference, modelling
from fundgrpo.params import GrpoParams, LoraParams, ModelParams, SftParams, to_dict


def is_main_process() -> bool:
    """Rank 0, or the only process. Under `accelerate launch` every process runs the stage and
    trains its share of each batch; only rank 0 writes the stage's outputs (the trainer itself
    saves checkpoints on rank 0 only)."""
    return int(os.environ.get("RANK", "0")) == 0


def train_into(out_dir: str | Path, train: Callable[[Path], dict]) -> dict | None:
    """Run `train(folder)` for a stage's model output: on rank 0 into a temporary sibling of
    `out_dir` that replaces it only when training finished (a failed run keeps the last good
    model); on the other ranks of `accelerate launch` into a scratch folder, returning None
    (they train alongside rank 0 and write nothing)."""
    if not is_main_process():
        with tempfile.TemporaryDirectory() as scratch:
            train(Path(scratch))
        return None
    with io.atomic_path(out_dir) as tmp:
        return train(tmp)


def inputs_digest(rows: list[PromptRecord], package: Path = Path(__file__).resolve().parents[1]) -> str:
    """What a training run learns from beside its params and start: the prompts and columns (`rows`) and
    the library's code (the rewards, the prompts, the checks), as one digest.

    >>> a, b = PromptRecord.example(reference="a"), PromptRecord.example(reference="b")
    >>> inputs_digest([a]) == inputs_digest([a]) != inputs_digest([b])
    True
    """
    h = hashlib.sha256(json.dumps([r.as_dict() for r in rows], sort_keys=True).encode())
    for f in sorted(package.rglob("*.py")):
        h.update(f.relative_to(package).as_posix().encode() + f.read_bytes())
    return h.hexdigest()


def prepare_checkpoints(
    checkpoint_dir: Path, params: SftParams | GrpoParams, start_dir: Path, inputs: str = ""
) -> str | None:
    """The checkpoint to resume from, or None. Checkpoints of another run are cleared first.

    A fingerprint of the stage's params, the start model and `inputs` (`inputs_digest`: the rows and the
    code) is kept beside the checkpoints, so an interrupted run resumes only into the same run, never
    into one whose data, rewards or settings changed.

    A checkpoint counts once the trainer wrote its `trainer_state.json`, its last file: one cut mid-write
    is passed over for the one before (SFT keeps two).

    >>> d = Path(tempfile.mkdtemp())
    >>> def saved(step): (d / f"ck/checkpoint-{step}").mkdir(); (d / f"ck/checkpoint-{step}/trainer_state.json").touch()
    >>> _ = prepare_checkpoints(d / "ck", GrpoParams(), d, "a"); saved(5)
    >>> (d / "ck/checkpoint-10").mkdir()  # cut before its trainer state was written
    >>> prepare_checkpoints(d / "ck", GrpoParams(), d, "a") == str(d / "ck/checkpoint-5")
    True
    >>> prepare_checkpoints(d / "ck", GrpoParams(), d, "b") is None  # other rows or code: started afresh
    True
    >>> _ = prepare_checkpoints(d / "ck", SftParams(), d, "b"); saved(5)
    >>> prepare_checkpoints(d / "ck", SftParams(epochs=2), d, "b") is None  # other settings: afresh
    True
    """
    key = {k: v for k, v in to_dict(params).items() if k not in ("resume", "out_dir", "checkpoint_dir")}
    start = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in Path(start_dir).iterdir() if f.is_file())
    fingerprint = hashlib.sha256(json.dumps([key, str(start_dir), start, inputs], sort_keys=True).encode()).hexdigest()
    stamp = checkpoint_dir / "run.json"
    if checkpoint_dir.exists() and (not stamp.exists() or json.loads(stamp.read_text())["fingerprint"] != fingerprint):
        shutil.rmtree(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
    done = sorted(
        (c for c in checkpoint_dir.glob("checkpoint-*") if (c / "trainer_state.json").exists()),
        key=lambda p: int(p.name.split("-")[1]),
    )
    return str(done[-1]) if params.resume and done else None


def use_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def model_init_kwargs(params: ModelParams) -> dict[str, Any]:
    """How TRL loads the model by path: dtype, and 4-bit quantisation for QLoRA."""
    kwargs: dict[str, Any] = {"dtype": params.dtype}
    if params.load_in_4bit:
        import torch
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
    return kwargs


def lora_config(params: LoraParams, model_source: str | None = None):
    """peft's LoraConfig from params; `lora.top_layers` reads the layer count from `model_source`'s config."""
    if not params.enabled:
        return None
    from peft import LoraConfig

    layers = None
    if params.top_layers:
        from transformers import AutoConfig

        if model_source is None:
            raise ValueError("lora.top_layers needs the model's config to count its layers: pass model_source")
        n = AutoConfig.from_pretrained(model_source).get_text_config().num_hidden_layers
        if params.top_layers > n:
            raise ValueError(
                f"lora.top_layers is {params.top_layers} but {model_source} has {n} layers: "
                f"set at most {n} (or 0 for every layer)"
            )
        layers = list(range(n - params.top_layers, n))
    return LoraConfig(
        r=params.r,
        lora_alpha=params.alpha,
        lora_dropout=params.dropout,
        target_modules="all-linear" if tuple(params.target_modules) == ("all-linear",) else list(params.target_modules),
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )


def save_model(trainer, tokenizer, out_dir: Path, merge_lora: bool = True) -> None:
    """Save the trained model; a LoRA adapter is merged into its base unless quantised."""
    model = trainer.model
    if merge_lora and hasattr(model, "merge_and_unload") and not getattr(model, "is_loaded_in_4bit", False):
        model = model.merge_and_unload()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def curves(log_history: list[dict], keys: list[str]) -> list[dict]:
    """Rows of (step, key...) from a trainer's log history, for DVC plots.

    >>> curves([{"step": 5, "reward": 1.0, "loss": 0.1}, {"step": 6, "train_runtime": 3}], ["reward"])
    [{'step': 5, 'reward': 1.0}]
    """
    rows = []
    for entry in log_history:
        if any(k in entry for k in keys):
            rows.append({"step": entry["step"], **{k: entry[k] for k in keys if k in entry}})
    return rows


GREEDY_METRICS = ("exact", "within_one", "qwk", "spearman")


def collapsed(predicted: list, expert: list, share: float) -> tuple[bool, int | None, float]:
    """(has the answering collapsed, the commonest grade, its share of the answers): one grade given
    to more than `share` of the funds while the experts give it to no more than `share` of them.
    Invalid answers (None) count as answers of no grade.

    >>> collapsed([3] * 9 + [4], [1, 2, 3, 3, 3, 4, 4, 5, 5, 2], 0.8)
    (True, 3, 0.9)
    >>> collapsed([3] * 9 + [4], [3] * 10, 0.8), collapsed([1, 2, 3, 4], [1, 2, 3, 4], 0.8)
    ((False, 3, 0.9), (False, 1, 0.25))
    """
    valid = [p for p in predicted if p is not None]
    if not valid:
        return False, None, 0.0
    top = max(sorted(set(valid)), key=valid.count)
    top_share = valid.count(top) / len(predicted)
    expert_share = sum(int(e) == top for e in expert) / max(1, len(expert))
    return top_share > share and expert_share <= share, top, round(top_share, 4)


QUALITY = ("complete", "misstated", "stated_brier", "departure_gain", "evaluation")  # evaluation_quality's keys


def evaluation_quality(rows: list[PromptRecord], preds: list[Prediction], methodology: Methodology) -> dict[str, float]:
    """What the `evaluation` selection metric reads from greedy answers to validation prompts: the
    share of answers complete, minus twice the share of claims misstated (a wrong claim costs more
    than a right one earns), minus the stated confidence's top-label Brier score (where answers
    state one; an invalid answer counts as confident and wrong), plus what departing from the
    suggested grade gained in exact agreement over keeping it (departures right − suggestions right,
    per fund). Each part is returned beside the `evaluation` total.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> r = example_methodology()
    >>> shown = '{"sharpe_3y": 85, "cost": 15}'
    >>> rows = [PromptRecord.example(expert_grade=e, shown_grade=4, rule_grade=4, evidence=shown) for e in (4, 5)]
    >>> said = [("Sharpe ratio top 20%; ongoing cost bottom 20%", 4, 0.8), ("Sharpe ratio top 10%", 5, 0.6)]
    >>> preds = [Prediction(grade=g, written_grade=g, reasoning=t, stated=c) for t, g, c in said]
    >>> evaluation_quality(rows, preds, r)
    {'complete': 0.5, 'misstated': 0.3333, 'stated_brier': 0.1, 'departure_gain': 0.5, 'evaluation': 0.2334}
    """
    found = claims.summary(
        [p.reasoning for p in preds],
        [r.evidence for r in rows],
        methodology,
        [p.grade for p in preds],
        [r.rule_grade for r in rows],
    )
    stated = [
        (p.stated if p.grade is not None and p.stated is not None else 1.0, p.grade == expert)
        for p, expert in zip(preds, expert_grades(rows))
        if p.stated is not None or p.grade is None
    ]
    brier = (
        sum((c - float(ok)) ** 2 for c, ok in stated) / len(stated) if any(p.stated is not None for p in preds) else 0.0
    )
    moved = agreement.departures(rows, preds)
    parts = {
        "complete": found["complete"] or 0.0,
        "misstated": found["misstated_claims"] or 0.0,
        "stated_brier": round(brier, 4),
        "departure_gain": round((moved["right"] - moved["shown_right"]) / max(1, len(rows)), 4),
    }
    total = parts["complete"] - 2 * parts["misstated"] - parts["stated_brier"] + parts["departure_gain"]
    return {**parts, "evaluation": round(total, 4)}


COLLAPSED = -2.0  # what a collapsed checkpoint scores on the selection metric: below any real value


def greedy_validation_callback(
    rows: list[PromptRecord],
    methodology: Methodology,
    schema: dict,
    max_new_tokens: int,
    batch_size: int = 64,
    selection_key: str | None = None,
    collapse_share: float = 1.0,
    qwk_tolerance: float | None = None,
):
    """A trainer callback that, at every evaluation, answers `rows` greedily with the current
    policy and adds `eval_greedy_<metric>` (GREEDY_METRICS, and `valid_json`) to the metrics.

    Why: GRPO's own evaluation scores sampled answers, while the evaluator is used (and
    backtested) greedily; on the Morningstar experts the sampled reward rose while greedy
    agreement fell. The metrics dict is the one the Trainer then uses to pick the best
    checkpoint (`metric_for_best_model`), so adding to it in `on_evaluate` is enough.

    It also guards against collapse (`collapsed`): when the greedy answers give one grade to more
    than `collapse_share` of the funds, the metric under `selection_key` is set to COLLAPSED, so
    that checkpoint is never kept, and `eval_greedy_collapsed` records it.

    Where the rows carry the evidence their prompts showed it adds `eval_greedy_evaluation` and its
    parts (`evaluation_quality`). With `qwk_tolerance`, a checkpoint whose greedy QWK falls more
    than that below the start's (the first evaluation, `eval_on_start`) is refused like a collapsed
    one (`eval_greedy_refused`): better evaluations must not cost the grade.
    """
    from transformers import TrainerCallback

    class GreedyValidation(TrainerCallback):
        def __init__(self) -> None:
            self.history: list[dict] = []  # one row per evaluation: step and the greedy metrics
            self.start_qwk: float | None = None

        def on_evaluate(self, args, state, control, metrics=None, model=None, processing_class=None, **kwargs):
            started = time.perf_counter()
            was_training = model.training
            model.eval()
            texts = modelling.generate(
                model,
                processing_class,
                [r.prompt for r in rows],
                max_new_tokens,
                batch_size,
                desc="greedy validation",
                shown=inference.shown_documents(rows),
            )
            model.train(was_training)
            preds = answers.predictions_from_texts(texts, schema)
            found = agreement.metrics(rows, preds, methodology.grades)
            greedy = {f"eval_greedy_{k}": round(float(found[k]), 4) for k in ("valid_json", *GREEDY_METRICS)}
            gone, top, top_share = collapsed([p.grade for p in preds], expert_grades(rows), collapse_share)
            greedy["eval_greedy_top_grade"] = float(top) if top is not None else 0.0
            greedy["eval_greedy_top_share"] = top_share
            greedy["eval_greedy_collapsed"] = float(gone)
            quality = evaluation_quality(rows, preds, methodology)
            greedy.update({f"eval_greedy_{k}": v for k, v in quality.items()})
            if state.global_step == 0:
                self.start_qwk = greedy["eval_greedy_qwk"]
            refused = (
                qwk_tolerance is not None
                and self.start_qwk is not None
                and state.global_step > 0
                and greedy["eval_greedy_qwk"] < self.start_qwk - qwk_tolerance
            )
            greedy["eval_greedy_refused"] = float(refused)
            metrics.update(greedy)
            if (gone or refused) and selection_key:
                metrics[selection_key] = COLLAPSED
            self.history.append({"step": state.global_step, **greedy})
            # seconds apart from the metrics: the trainer's `eval_runtime` does not include this callback
            state.log_history.append(
                {"step": state.global_step, **greedy, "greedy_eval_seconds": round(time.perf_counter() - started, 2)}
            )

    return GreedyValidation()
