"""Stage `calibrate`: the evaluator's belief and confidence, fitted on the validation funds.

Answers every validation fund greedily with the trained policy, reads its grade probabilities at
each of `calibrate.beliefs` (fundgrpo/evaluation/belief.py), and fits the product's belief
(fundgrpo/evaluation/calibration.py: the probabilities as read, temperature-scaled, or pooled with
the statistical estimate's (out of fold on these funds); the one with the lowest validation Brier
score under `confidence: auto`; cut-points for the expected grade). Writes `calibrate.out`, which the
backtest applies to the test funds and `register` logs with the model.
"""

from __future__ import annotations

from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import StageError, run_stage
from fundgrpo.evaluation import calibration
from fundgrpo.evaluation.backtesting import DEFAULT_FIT, evaluate_model
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "validation.jsonl")
        rubric, schema = load_compiled(Path(p.methodology.out_dir))
        c = p.calibrate
        found, preds = evaluate_model(
            Path(p.grpo.out_dir), rows, rubric, schema, p.backtest.max_new_tokens, p.backtest.batch_size,
            "calibrate", tuple(c.beliefs),
        )  # fmt: skip
        readable = {m: [q["beliefs"].get(m) if q.get("beliefs") else None for q in preds] for m in c.beliefs}
        valid = sum(q["valid"] for q in preds)
        if valid == 0:  # an undertrained model: nothing to fit, its evaluations carry no confidence
            fit = {
                **DEFAULT_FIT,
                "grade_from": "greedy",
                "chosen": "none: no valid answer on validation",
                "options": {},
            }
            print(f"calibrate: warning: {p.grpo.out_dir} gave no valid answer on the {len(rows)} validation funds")
        elif not any(b is not None for rows_ in readable.values() for b in rows_):
            raise StageError(
                f"calibrate: {p.grpo.out_dir} puts no probability on any grade at its answers' decision points "
                f"({valid} valid answers on {len(rows)} validation funds; calibrate.beliefs {list(c.beliefs)}): "
                "its confidence cannot be read"
            )
        else:
            gbm = [r["gbm_probs"] for r in rows] if all("gbm_probs" in r for r in rows) else None
            fit = calibration.fit_choice(
                [r["expert_grade"] for r in rows], [q["grade"] for q in preds], readable, rubric["grades"],
                c.confidence, c.grade_from, c.bins, gbm,
            )  # fmt: skip
        fit.update(model=p.grpo.out_dir, validation_funds=len(rows), validation=found)
        io.write_json(fit, c.out)
        chosen = fit["options"].get(fit["chosen"], {})
        print(
            f"calibrate: {fit['chosen']} (temperature {fit['temperature']}) on {len(rows)} validation funds: "
            f"ECE {chosen.get('ece')}, Brier {chosen.get('brier')}; cut-points {fit['cutpoints']}; options "
            + ", ".join(f"{k} ECE {v['ece']}" for k, v in fit["options"].items())
        )

    run_stage("calibrate", body)


if __name__ == "__main__":
    main()
