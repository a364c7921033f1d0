"""Stage `calibrate`: what the product serves and how it decides a grade, chosen on the validation funds.

Answers every validation fund greedily with the trained policy, reads its grade probabilities at
each of `calibrate.beliefs` (fundgrpo/model/belief.py), and chooses among the policy's own
belief, gradient boosting's probabilities (out of fold on these funds) and the two pooled, each
with each decision rule, by cross-validation over these funds (fundgrpo/evaluation/contest.py,
`fit_choice`). The SFT start gets the same choice (key `sft`), so the backtest compares like with
like. Writes `calibrate.out`, which the backtest applies to the test funds and `register` logs
with the model.
"""

from __future__ import annotations

from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import StageError, run_stage
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model.inference import fit_models
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = PromptRecord.read(Path(p.prepare.out_dir) / "validation.jsonl")
        methodology, schema = load_compiled(Path(p.methodology.out_dir))
        models = {"grpo": Path(p.grpo.out_dir), "sft": Path(p.sft.out_dir)}
        try:
            fit, fits = fit_models(models, rows, methodology, schema, p.calibrate, p.generation)
        except ValueError as err:
            raise StageError(str(err)) from None
        io.write_json(fit.as_dict(), p.calibrate.out)
        for name, f in fits.items():
            chosen = f.options.get(f.rule.chosen or "", {})
            print(
                f"calibrate {name}: serves {f.rule.chosen} (weights {f.rule.weights}) on {len(rows)} validation funds, "
                f"cross-validated: QWK {chosen.get('qwk')}, exact {chosen.get('exact')}, "
                f"contradicted {chosen.get('contradicted')}, Brier {chosen.get('brier')}; cut-points {f.rule.cutpoints}"
            )

    run_stage("calibrate", body)


if __name__ == "__main__":
    main()
