"""How much the LLM's prompt evidence can tell: gradient boosting (and a logistic regression) on
the numbers the Morningstar prompt shows, fitted on the training and validation funds, scored on
the test funds (benchmarks/real_experts.md, "Where the LLM stands"). "full prompt" is
`prepare.prompt_style: full` (each MRAR's value, peer median, percentile within the category and
among all funds, and the peer count); "compact prompt" the percentiles and peer count only (the
smollm2 profile's prompts); both prompts also state the methodology's score (`show_rule`): the
`+ rule_score` rows. Fitted on training and validation funds: the LLM's SFT sees the training funds only.

    python -m fundgrpo.profiles apply morningstar
    python -m stages.ingest && python -m stages.validate && python -m stages.methodology && python -m stages.prepare
    python benchmarks/prompt_evidence_gbm.py
"""

import json

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier

from fundgrpo.evaluation.agreement import grade_metrics
from fundgrpo.methodology import compiler as meth

rubric = json.load(open("data/schema/rubric.json"))
m = meth.from_rubric(rubric)
funds = pd.read_parquet("data/validated/funds.parquet")
ids = [c.id for c in m.criteria]
pct = meth.criterion_percentiles(m, funds)
pa = meth.criterion_percentiles(m, funds, within_category=False)
rules = meth.rule_score(m, funds, pct)
w = pd.Series({c.id: c.weight for c in m.criteria})


def comp(p):
    pres = p.notna()
    return p.fillna(0).mul(w, axis=1).sum(axis=1) / pres.mul(w, axis=1).sum(axis=1)


F = pd.DataFrame(index=funds.index)
for c in m.criteria:
    F[c.id + "_v"] = funds[c.metric]
    F[c.id + "_med"] = funds.groupby("category")[c.metric].transform("median")
    F[c.id + "_p"] = pct[c.id]
    F[c.id + "_pa"] = pa[c.id]
F["peers"] = funds.groupby("category")["share_class_id"].transform("count")
F["rule_score"] = rules.rule_score
F["comp_cat"] = comp(pct)
F["comp_all"] = comp(pa)
F["comp_all_rank"] = F.comp_all.rank(pct=True) * 100
tmp = pd.DataFrame({"category": funds.category, "c": F.comp_all})
F["comp_all_rank_cat"] = meth.percentile_within(tmp, "c")
recs = {
    s: [json.loads(l)["share_class_id"] for l in open(f"data/prepared/{s}.jsonl")]
    for s in ["train", "validation", "test"]
}
sid = funds.share_class_id.astype(str)
tr = sid.isin(recs["train"] + recs["validation"]).values
te = sid.isin(recs["test"]).values
y = funds.expert_grade.astype(int).values
base = [c for c in F if c.startswith("mrar")] + ["peers"]
sets = {
    "full prompt": base,
    "full prompt + rule_score": base + ["rule_score"],
    "+rule+comp_all_rank": base + ["rule_score", "comp_all_rank"],
    "+rule+comp_all_rank_cat": base + ["rule_score", "comp_all_rank", "comp_all_rank_cat"],
    "rule_score only": ["rule_score"],
    "compact prompt (pcts)": [c for c in base if c.endswith(("_p", "_pa"))],
    "compact prompt + rule_score": [c for c in base if c.endswith(("_p", "_pa"))] + ["rule_score"],
    "rule+comp_all_rank only": ["rule_score", "comp_all_rank"],
    "rule+comp_all_rank_cat": ["rule_score", "comp_all_rank_cat", "comp_all_rank"],
}
for name, cols in sets.items():
    res = []
    for seed in range(3):
        g = HistGradientBoostingClassifier(learning_rate=0.05, max_leaf_nodes=7, max_iter=150, random_state=seed).fit(
            F.loc[tr, cols], y[tr]
        )
        res.append(grade_metrics(list(y[te]), list(g.predict(F.loc[te, cols])), [1, 2, 3, 4, 5]))
    print(
        f"{name:30s}",
        {
            k: round(float(np.mean([r[k] for r in res])), 3)
            for k in res[0]
            if k in ("exact", "within_one", "qwk", "spearman")
        },
    )
print(
    "rule",
    {
        k: round(v, 3)
        for k, v in grade_metrics(list(y[te]), list(rules.rule_grade.values[te]), [1, 2, 3, 4, 5]).items()
        if k in ("exact", "within_one", "qwk", "spearman")
    },
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

abl = {
    "p+pa": [c for c in base if c.endswith("_p") or c.endswith("_pa")],
    "p+pa+v": [c for c in base if not c.endswith("_med")],
    "p+pa+v+med": [c for c in base if c != "peers"],
    "all": base,
}
for name, cols in abl.items():
    g = HistGradientBoostingClassifier(learning_rate=0.05, max_leaf_nodes=7, max_iter=150, random_state=0).fit(
        F.loc[tr, cols], y[tr]
    )
    r = grade_metrics(list(y[te]), list(g.predict(F.loc[te, cols])), [1, 2, 3, 4, 5])
    X = F[cols].copy()
    for c in cols:
        X[c + "_na"] = X[c].isna().astype(float)
    lr = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(max_iter=2000)).fit(X[tr], y[tr])
    r2 = grade_metrics(list(y[te]), list(lr.predict(X[te])), [1, 2, 3, 4, 5])
    print(name, "gbm", round(r["exact"], 3), round(r["qwk"], 3), "logreg", round(r2["exact"], 3), round(r2["qwk"], 3))
