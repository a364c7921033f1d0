"""The monthly evaluation flow: a real Prefect flow run scoring the configured universe."""

from __future__ import annotations

import pandas as pd

from flows.evaluation_flow import evaluation


def test_evaluation_flow_scores_the_configured_universe(trained, prefect_api):
    root, _ = trained
    out = evaluation(root=str(root), model=str(root / "models/policy"), month="2026-11")
    table = pd.read_parquet(root / out)
    universe = pd.read_parquet(root / "data/canonical/funds.parquet")
    assert out == "reports/evaluations/2026-11/evaluations.parquet"
    assert sorted(table["share_class_id"]) == sorted(universe["share_class_id"].astype(str))
    assert table["rule_grade"].between(1, 5).all() and table["gbm_grade"].between(1, 5).all()
