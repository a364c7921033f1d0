"""SFT with the rule scorer's misses repeated: does emphasis teach the model *when* to depart from the rule?

The prompt states the methodology's own grade (`prepare.show_rule`), and SFT learns to give it back
(78 % of the Morningstar test funds after one epoch); the expert departs from it on about a third.
This trains the profile's SFT once more with every training example whose expert grade differs from
the rule's grade repeated `--repeat` times, answers the validation funds greedily, and compares, paired by
fund, with the rule scorer and gradient boosting (out of fold, from the prepared records) and, given
`--against` (a per_fund.jsonl on the same validation funds), with its SFT and GRPO. The test split is the
backtest's alone: a design question is answered on validation.

Run in a checkout with a profile applied and `prepare` and `model` done, e.g. a copy made by
`benchmarks/time/pipeline.py` (its stages up to `model`; the copy holds research/experiments/ too):

    python research/experiments/departure_emphasis/departure_emphasis.py OUT --repeat 2 [--against VALIDATION_PER_FUND]

OUT/model is the trained SFT (reused when present), OUT/per_fund.jsonl its grades beside the other
run's, OUT/result.json the metrics, paired bootstrap intervals and departure counts (the two recorded
runs' result.json files are in results/ beside this script, and its README.md says what they showed).
CPU minutes: not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from fundgrpo import io
from fundgrpo.evaluation.agreement import paired_bootstrap
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.model.inference import evaluate_model
from fundgrpo.params import load_params
from fundgrpo.training import sft_trainer

METRICS = ("exact", "within_one", "qwk", "spearman")


def emphasise(rows: list[dict], repeat: int) -> list[dict]:
    """Every row once, then the rule's misses `repeat - 1` more times.

    >>> rows = [{"expert_grade": 3, "rule_grade": 3}, {"expert_grade": 4, "rule_grade": 3}]
    >>> [r["expert_grade"] for r in emphasise(rows, 3)]
    [3, 4, 4, 4]
    """
    misses = [r for r in rows if r["expert_grade"] != r["rule_grade"]]
    return rows + misses * (repeat - 1)


def departures(per_fund: list[dict], key: str) -> dict[str, int]:
    """How often an evaluator departs from the rule's grade, and with what result."""
    return {
        "departs": sum(r[f"{key}_grade"] != r["rule_grade"] for r in per_fund),
        "right_where_rule_wrong": sum(r[f"{key}_grade"] == r["expert_grade"] != r["rule_grade"] for r in per_fund),
        "wrong_where_rule_right": sum(r[f"{key}_grade"] != r["expert_grade"] == r["rule_grade"] for r in per_fund),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument(
        "--repeat", type=int, default=2, help="copies of each training example the rule scorer grades wrong"
    )
    ap.add_argument(
        "--against",
        type=Path,
        default=None,
        help="a per_fund.jsonl (sft_grade, grpo_grade) on the same validation funds",
    )
    ap.add_argument("--train-rows", type=int, default=0, help="the first N training rows only (a smoke check; 0 = all)")
    args = ap.parse_args()
    p = load_params()
    rubric, schema = load_compiled(Path(p.methodology.out_dir))
    model_dir = args.out / "model"
    result: dict = {"repeat": args.repeat, "against": str(args.against) if args.against else None}
    if not (model_dir / "config.json").exists():
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
        rows = emphasise(rows[: args.train_rows] if args.train_rows else rows, args.repeat)
        result["train_examples"] = len(rows)
        result["sft"] = sft_trainer.run(p.sft, p.model, Path(p.model.out_dir), rows, model_dir)
        shutil.rmtree(model_dir / "checkpoints", ignore_errors=True)  # as the sft stage does
    rows = io.read_jsonl(Path(p.prepare.out_dir) / "validation.jsonl")  # the test split is the backtest's
    started = time.perf_counter()
    result["metrics"], preds = evaluate_model(
        model_dir, rows, rubric, schema, p.generation.max_new_tokens, p.generation.batch_size, desc="emphasised SFT"
    )
    result["metrics"]["seconds"] = round(time.perf_counter() - started, 1)

    other = {r["share_class_id"]: r for r in io.read_jsonl(args.against)} if args.against else {}
    per_fund = []
    for r, q in zip(rows, preds):
        own = {k: r[k] for k in ("share_class_id", "fund_id", "expert_grade", "rule_grade", "gbm_grade")}
        o = other.get(r["share_class_id"], {}) if other else own
        if o.get("expert_grade") != r["expert_grade"]:
            raise SystemExit(
                f"{args.against}: no or another expert grade for {r['share_class_id']}: not the same funds"
            )
        per_fund.append({**own, **o, "emphasised_grade": q["grade"], "emphasised_valid": q.get("valid", True)})
    # SFT and GRPO only where --against gives their grades on these funds
    names = [n for n in ("sft", "grpo", "rule", "gbm") if all(f"{n}_grade" in r for r in per_fund)]
    io.write_jsonl(per_fund, args.out / "per_fund.jsonl")
    expert, groups = [r["expert_grade"] for r in per_fund], [r["fund_id"] for r in per_fund]
    result["paired"] = {
        f"emphasised SFT - {name}": {
            m: paired_bootstrap(
                expert,
                [r["emphasised_grade"] for r in per_fund],
                [r[f"{name}_grade"] for r in per_fund],
                groups,
                rubric["grades"],
                m,
            )
            for m in METRICS
        }
        for name in names
    }
    result["departures"] = {name: departures(per_fund, name) for name in ("emphasised", *names) if name != "rule"}
    result["rule_wrong"] = sum(r["rule_grade"] != r["expert_grade"] for r in per_fund)
    io.write_json(result, args.out / "result.json")
    print(json.dumps({k: result[k] for k in ("metrics", "departures", "rule_wrong")}, indent=1))
    for title, block in result["paired"].items():
        print(
            title + ": " + ", ".join(f"{m} {b['diff']:+.3f} [{b['lo']:+.3f}, {b['hi']:+.3f}]" for m, b in block.items())
        )


if __name__ == "__main__":
    main()
