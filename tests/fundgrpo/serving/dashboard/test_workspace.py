"""What the dashboard reads: a version's figures from its MLflow run equal what that run wrote, a
fund's peers and history, the API's store read without being made. The trained tiny repo (real
MLflow on sqlite, real DVC outputs); the pure helpers' doctests live in the module."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fundgrpo.params import EvaluateParams
from fundgrpo.serving.api.store import Store
from fundgrpo.serving.dashboard import workspace as wsm
from tests.support import REPO


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the workspace's own store, as the dashboard reads it


def test_a_versions_figures_are_what_its_run_wrote(trained):
    root, _ = trained
    ws = wsm.Workspace(root)
    versions = ws.versions()
    decision = json.loads((root / "metrics/register.json").read_text())
    last = next(v for v in versions if v["version"] == decision["version"])
    assert decision["alias"] in last["aliases"] and last["run_id"] == decision["run_id"]
    backtest = json.loads((root / "metrics/backtest.json").read_text())
    assert last["metrics"]["grpo.qwk"] == pytest.approx(backtest["models"]["grpo"]["qwk"])

    # The last run's figures from the registry equal the workspace's files, unless a later
    # test in this session retrained (then they are that run's, which the registry holds too).
    figures = ws.figures(last["version"], versions)
    local = ws.figures(None)
    assert local.version == decision["version"] and local.aliases == [decision["alias"]]
    assert figures.backtest == local.backtest and figures.predictions == local.predictions
    rewards = json.loads((root / "plots/grpo_rewards.json").read_text())
    assert [r["step"] for r in figures.curves] == [r["step"] for r in rewards]
    assert [r["reward"] for r in figures.curves] == pytest.approx([r["reward"] for r in rewards])


def test_fund_table_names_every_tested_share_class_and_flags_by_the_queue_rule(trained):
    root, _ = trained
    ws = wsm.Workspace(root)
    figures = ws.figures(None)
    table = wsm.fund_table(figures.predictions, ws.funds(), ws.params.evaluate)
    assert len(table) == len(figures.predictions) and table["name"].str.len().gt(0).all()
    rule = EvaluateParams(review_below=ws.params.evaluate.review_below, disagree_by=ws.params.evaluate.disagree_by)
    assert table["needs_analyst"].tolist() == [wsm.needs_review(r, rule) for r in figures.predictions]
    below = table[table["direction"] == -1]
    assert (below["model"] < below["expert"]).all()
    name = table.loc[0, "name"]
    found = wsm.filter_funds(table, search=name.upper())
    assert table.loc[0, "share_class_id"] in found["share_class_id"].tolist()


def test_peers_rank_the_cheapest_fund_of_a_category_first_on_cost(trained):
    root, _ = trained
    funds = wsm.Workspace(root).funds()
    category = funds["category"].mode()[0]
    same = funds[funds["category"] == category].dropna(subset=["ongoing_cost"])
    cheapest = same.loc[same["ongoing_cost"].idxmin(), "share_class_id"]
    table = wsm.peer_table(funds, cheapest).set_index("metric")
    assert table.loc["ongoing_cost", "percentile"] == 100.0  # lower cost is better
    assert table.loc["ongoing_cost", "peer_median"] == pytest.approx(same["ongoing_cost"].median())
    assert table["percentile"].between(0, 100).all()


def test_a_funds_store_history_is_read_without_making_a_store(trained, tmp_path, monkeypatch):
    root, _ = trained
    url = f"sqlite:///{tmp_path}/store.db"
    monkeypatch.setenv("FUNDGRPO_DB_URL", url)
    ws = wsm.Workspace(root)
    assert ws.store_history("SYN0002A") == ([], []) and not (tmp_path / "store.db").exists()
    store = Store(url)
    [first] = store.add([{"share_class_id": "SYN0002A", "grade": 3, "confidence": 0.4}], "models:/fund-evaluator/1")
    store.decide(store.latest("SYN0002A"), 2, "costs", "ana", None)
    evaluations, decisions = ws.store_history("SYN0002A")
    assert [(e["evaluation_id"], e["grade"], e["confidence"]) for e in evaluations] == [(first, 3, 0.4)]
    assert [(d["grade"], d["analyst"], d["reason"]) for d in decisions] == [(2, "ana", "costs")]


def test_a_workspace_without_a_registry_shows_its_own_run_and_makes_no_registry(trained, tmp_path):
    root, _ = trained
    ws_root = tmp_path / "ws"
    for rel in ("params.yaml", "data/schema", "metrics", "reports/backtest", "plots"):
        src, dst = root / rel, ws_root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    ws = wsm.Workspace(ws_root)
    assert ws.versions() == [] and not (ws_root / "mlflow.db").exists()
    figures = ws.figures(None)
    assert figures.predictions and figures.backtest is not None
    assert ws.drift() == [] and ws.funds().empty  # no validated universe copied: names are blank, not an error
    assert wsm.fund_table(figures.predictions, ws.funds(), ws.params.evaluate)["name"].eq("").all()


def test_drift_summaries_come_oldest_first_with_their_folders(tmp_path: Path):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    for date, batch in (("2026-12-01", "b2"), ("2026-11-01", "b1")):
        folder = tmp_path / "monitoring/reports" / date / batch
        folder.mkdir(parents=True)
        summary = {"batch": batch, "date": date, "verdict": "no drift", "data_drift": {"share": 0.1}}
        (folder / "summary.json").write_text(json.dumps(summary))
    rows = wsm.Workspace(tmp_path).drift()
    assert [r["batch"] for r in rows] == ["b1", "b2"] and rows[0]["folder"] == "monitoring/reports/2026-11-01/b1"
    assert wsm.drift_series(rows)["value"].tolist() == [0.1, 0.1]
