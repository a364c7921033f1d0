"""How much the LLM's prompt evidence can tell: gradient boosting (and a logistic regression) on
the numbers the Morningstar prompt shows, fitted on the training funds, scored on the validation
funds (research/experiments/real_experts/real_experts.md, "Where the LLM stands"; the test split is the
backtest's alone: which evidence the prompt should show is a design question). "full prompt" is
`prepare.prompt_style: full` (each MRAR's value, peer median, percentile within the category and
among all funds, and the peer count); "compact prompt" the percentiles and peer count only (the
smollm2 profile's prompts); both prompts also state the methodology's score (`show_rule`): the
`+ rule_score` rows. Fitted on the training funds, as the LLM's SFT sees them.

    python -m fundgrpo.profiles apply morningstar
    python -m stages.ingest && python -m stages.validate && python -m stages.methodology && python -m stages.prepare
    python research/experiments/prompt_evidence_gbm/prompt_evidence_gbm.py

The gradient boosting is the `baseline` stage's model (`fundgrpo.evaluation.baselines`) at one
fixed setting, as measured: learning rate 0.05, 7 leaves, 150 rounds, no L2 penalty, mean of 3
seeds; the stage instead tunes these on an inner fund-grouped split. Peer medians are
`fundgrpo.data.peers.category_medians` (the medians the full prompt shows).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from fundgrpo.data.peers import category_medians, percentile_within
from fundgrpo.evaluation import baselines
from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.methodology import compiler as meth
from fundgrpo.params import BaselineParams

GRADES = [1, 2, 3, 4, 5]
SHOWN = ("exact", "within_one", "qwk", "spearman")


def prompt_features(m: meth.Methodology, funds: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(features, rule scores): every number a prompt shows for each criterion (`_v` value, `_med`
    peer median, `_p` percentile within the category, `_pa` among all funds), the peer count, the
    methodology's score, and weighted composites of the percentiles."""
    pct = meth.criterion_percentiles(m, funds)
    pa = meth.criterion_percentiles(m, funds, within_category=False)
    rules = meth.rule_score(m, funds, pct)
    w = pd.Series({c.id: c.weight for c in m.criteria})

    def comp(p):
        pres = p.notna()
        return p.fillna(0).mul(w, axis=1).sum(axis=1) / pres.mul(w, axis=1).sum(axis=1)

    medians = category_medians(funds, [c.metric for c in m.criteria])
    F = pd.DataFrame(index=funds.index)
    for c in m.criteria:
        F[c.id + "_v"] = funds[c.metric]
        F[c.id + "_med"] = medians[c.metric]
        F[c.id + "_p"] = pct[c.id]
        F[c.id + "_pa"] = pa[c.id]
    F["peers"] = funds.groupby("category")["share_class_id"].transform("count")
    F["rule_score"] = rules.rule_score
    F["comp_cat"] = comp(pct)
    F["comp_all"] = comp(pa)
    F["comp_all_rank"] = F.comp_all.rank(pct=True) * 100
    F["comp_all_rank_cat"] = percentile_within(pd.DataFrame({"category": funds.category, "c": F.comp_all}), "c")
    return F, rules


def gbm(X_train: pd.DataFrame, y_train: np.ndarray, X_held: pd.DataFrame, seed: int) -> list[int]:
    """The baseline's gradient boosting at the setting measured here, fitted and predicting."""
    params = BaselineParams(seed=seed, l2_regularization=0.0)
    model = baselines._model(params, learning_rate=0.05, max_leaf_nodes=7, max_iter=150)
    return list(model.fit(X_train, y_train).predict(X_held))


def shown(metrics: dict) -> dict:
    return {k: round(float(v), 3) for k, v in metrics.items() if k in SHOWN}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3, help="GBM seeds averaged per feature set")
    args = ap.parse_args()

    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rubric = json.loads(Path("data/schema/rubric.json").read_text(encoding="utf-8"))
    m = meth.from_rubric(rubric)
    funds = pd.read_parquet("data/validated/funds.parquet")
    F, rules = prompt_features(m, funds)
    recs = {
        s: [json.loads(line)["share_class_id"] for line in Path(f"data/prepared/{s}.jsonl").read_text().splitlines()]
        for s in ["train", "validation"]
    }
    sid = funds.share_class_id.astype(str)
    tr = sid.isin(recs["train"]).values
    va = sid.isin(recs["validation"]).values  # scored on validation: the test split is the backtest's
    y = funds.expert_grade.astype(int).values
    base = [c for c in F if c.startswith("mrar")] + ["peers"]
    pcts = [c for c in base if c.endswith(("_p", "_pa"))]
    sets = {
        "full prompt": base,
        "full prompt + rule_score": base + ["rule_score"],
        "+rule+comp_all_rank": base + ["rule_score", "comp_all_rank"],
        "+rule+comp_all_rank_cat": base + ["rule_score", "comp_all_rank", "comp_all_rank_cat"],
        "rule_score only": ["rule_score"],
        "compact prompt (pcts)": pcts,
        "compact prompt + rule_score": pcts + ["rule_score"],
        "rule+comp_all_rank only": ["rule_score", "comp_all_rank"],
        "rule+comp_all_rank_cat": ["rule_score", "comp_all_rank_cat", "comp_all_rank"],
    }
    for name, cols in sets.items():
        res = [
            grade_metrics(list(y[va]), gbm(F.loc[tr, cols], y[tr], F.loc[va, cols], seed), GRADES)
            for seed in range(args.seeds)
        ]
        print(f"{name:30s}", {k: round(float(np.mean([r[k] for r in res])), 3) for k in res[0] if k in SHOWN})
    print("rule", shown(grade_metrics(list(y[va]), list(rules.rule_grade.values[va]), GRADES)))

    abl = {
        "p+pa": [c for c in base if c.endswith("_p") or c.endswith("_pa")],
        "p+pa+v": [c for c in base if not c.endswith("_med")],
        "p+pa+v+med": [c for c in base if c != "peers"],
        "all": base,
    }
    for name, cols in abl.items():
        r = grade_metrics(list(y[va]), gbm(F.loc[tr, cols], y[tr], F.loc[va, cols], 0), GRADES)
        X = F[cols].copy()
        for c in cols:
            X[c + "_na"] = X[c].isna().astype(float)
        lr = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(max_iter=2000)).fit(X[tr], y[tr])
        r2 = grade_metrics(list(y[va]), list(lr.predict(X[va])), GRADES)
        print(
            name, "gbm", round(r["exact"], 3), round(r["qwk"], 3), "logreg", round(r2["exact"], 3), round(r2["qwk"], 3)
        )


if __name__ == "__main__":
    main()
