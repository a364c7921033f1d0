"""The charts' Vega-Lite specs say what a reader sees: grades in order, counts in the cells,
thresholds drawn, every reward a line."""

from __future__ import annotations

import pandas as pd

from fundgrpo.evaluation.report import FundRow, Graded
from fundgrpo.serving.dashboard import charts
from fundgrpo.serving.dashboard import workspace as wsm
from fundgrpo.serving.dashboard.labels import LABELS

T = LABELS["en"]


def test_confusion_heatmap_orders_grades_and_writes_counts():
    rows = [
        FundRow("A", "F", "Bond", e, graded={"grpo": Graded(p, p is not None)})
        for e, p in ((5, 5), (1, 2), (3, None), (10, 1))
    ]
    spec = charts.confusion_heatmap(wsm.confusion(rows, "grpo", [1, 2, 3, 4, 5]), "GRPO").to_dict()
    rect, text = spec["layer"]
    assert rect["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    assert rect["encoding"]["x"]["sort"] == ["1", "2", "3", "5", "invalid", "10"]  # grades, invalid, the rest
    data = next(iter(spec["datasets"].values()))
    assert sorted((d["expert"], d["predicted"], d["funds"]) for d in data) == [
        ("1", "2", 1), ("10", "1", 1), ("3", "invalid", 1), ("5", "5", 1)
    ]  # fmt: skip


def test_drift_over_time_draws_each_threshold_that_is_set():
    series = wsm.drift_series(
        [
            {"batch": "a", "date": "2026-10-01", "data_drift": {"share": 0.1}, "prediction_drift": {"migration": 0.3}},
            {"batch": "b", "date": "2026-11-01", "data_drift": {"share": 0.5}, "prediction_drift": {"migration": 0.1}},
        ]
    )
    spec = charts.drift_over_time(series, {"feature_drift": 0.3, "migration": 0.0}, T).to_dict()
    lines, rules = spec["layer"]
    assert rules["mark"]["type"] == "rule"
    datasets = list(spec["datasets"].values())
    assert [{"figure": T["feature_drift"], "threshold": 0.3}] in datasets  # migration 0: off, not drawn
    assert len(next(d for d in datasets if len(d) == 4)) == 4


def test_reward_curves_draw_the_total_and_each_named_reward():
    rows = [{"step": 1, "reward": 1.0, "json_reward": 0.5, "loss": 0.1}, {"step": 2, "reward": 1.5, "json_reward": 0.7}]
    spec = charts.curves(rows).to_dict()
    data = next(iter(spec["datasets"].values()))
    assert {d["reward"] for d in data} == {"reward", "json_reward"}  # the loss is not a reward
    assert len(data) == 4


def test_grade_distribution_counts_invalid_answers_apart():
    rows = [
        FundRow("A", "F", "Bond", 3, graded={"grpo": Graded(None, False), "rule": Graded(3)}),
        FundRow("B", "F", "Bond", 3, graded={"grpo": Graded(3)}),
    ]
    frame = wsm.distribution(rows)
    assert set(map(tuple, frame.values.tolist())) == {("expert", "3", 2), ("grpo", "invalid", 1), ("grpo", "3", 1),
                                                      ("rule", "3", 1)}  # fmt: skip
    assert charts.grade_distribution(frame, T).to_dict()["encoding"]["xOffset"]["field"] == "evaluator"
    assert isinstance(frame, pd.DataFrame)
