"""Stage `baseline`: the bars the LLM must clear, on the validation split: the methodology's rule
scorer and a tuned gradient-boosting model. `dvc repro baseline` is the rule-only evaluation:
how a methodology agrees with the experts, in seconds, before any LLM is trained. It reads the
validation funds, where design choices are made; the test funds are read by `backtest` (which
reports both evaluators there) and `register` only.

The gradient-boosting grades are the `evidence` stage's for the validation funds (out of fold: the model fitted on
`prepare`'s training split (`fundgrpo.evaluation.statistical`; features: the canonical numeric metrics,
their within-category percentiles over the whole universe, the category; never the labels nor
columns that leak the rating company's pipeline), which `prepare` puts in each record. Writes
metrics/baseline.json; the rule scorer's figures are its "rule" block.
"""

from __future__ import annotations

from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.evaluation import statistical
from fundgrpo.evaluation.agreement import metrics as agreement
from fundgrpo.evaluation.agreement import rule_predictions
from fundgrpo.evaluation.baselines import gbm_metrics
from fundgrpo.methodology.compiler import load_methodology
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = PromptRecord.read(Path(p.prepare.out_dir) / "validation.jsonl")
        methodology = load_methodology(p.methodology.out_dir)
        rule = agreement(rows, rule_predictions(rows), methodology.grades)
        print(
            "baseline rule: "
            + ", ".join(f"{k}={rule[k]}" for k in ("exact", "within_one", "qwk", "spearman"))
            + f" on {len(rows)} validation share classes"
        )
        summary = statistical.read_summary(p.evidence.out_dir)
        metrics = gbm_metrics(rows, summary, p.baseline, methodology.grades, "validation")
        io.write_json({**metrics, "rule": rule}, p.baseline.metrics)
        shown = ("n_train", "n", "exact", "within_one", "qwk", "spearman")
        print("baseline gbm: " + ", ".join(f"{k}={metrics[k]}" for k in shown) + f", chosen {metrics['chosen']}")

    run_stage("baseline", body)


if __name__ == "__main__":
    main()
