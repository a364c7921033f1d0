"""The `monitoring` flow for real (Prefect test server) on the shared tiny repo, in order:
bad batches are quarantined; a tiny batch gets no verdict; a calm batch is not merged;
a drifted batch is merged, relearned on, and ends at the registry gate."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import yaml

from fundgrpo import profiles
from fundgrpo.data import synthetic, synthetic_documents
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import SyntheticParams
from monitoring import simulate
from tests import support

TINY = profiles.load("tiny", support.REPO / "params.yaml", support.REPO / "profiles").synthetic


def drop(root: Path, name: str, table: pd.DataFrame) -> Path:
    return simulate.write(table, root / "data/incoming" / name)


def newest_report(root: Path, batch: str) -> Path:
    return max((root / "monitoring/reports").glob(f"*/{batch}"))


def test_bad_batches_are_quarantined_kept_and_never_merged(trained):
    from flows.monitoring_flow import monitoring

    root, _ = trained
    good = synthetic.later_batch(TINY, 6)
    bad = good.copy()
    bad.loc[:4, "expert_grade"] = 9  # not a grade
    bad.loc[5, "share_class_id"] = bad.loc[6, "share_class_id"]  # a duplicate
    drop(root, "batch-bad.csv", bad)
    (root / "data/incoming/batch-empty.csv").write_text("")
    register_before = (root / "metrics/register.json").read_text()

    results = {r["batch"]: r for r in monitoring(root=str(root), retries=0)}

    assert {b: r["verdict"] for b, r in results.items()} == {"batch-bad": "quarantined", "batch-empty": "quarantined"}
    bad_dir = root / results["batch-bad"]["quarantine"]
    assert (bad_dir / "batch-bad.csv").exists() and (bad_dir / "validation" / "index.html").exists()
    failing = json.loads((bad_dir / "validation" / "summary.json").read_text())
    assert not failing["success"]
    assert "expect_column_values_to_be_in_set(expert_grade)" in results["batch-bad"]["reason"]
    assert "expect_column_values_to_be_unique(share_class_id)" in (bad_dir / "reason.txt").read_text()
    assert "file is empty" in results["batch-empty"]["reason"]
    assert (root / results["batch-empty"]["quarantine"] / "batch-empty.csv").exists()
    assert json.loads((newest_report(root, "batch-bad") / "summary.json").read_text())["verdict"] == "quarantined"
    assert not list((root / "data/incoming").glob("*.csv")) and not list((root / "data/batches").glob("*.parquet"))
    assert (root / "metrics/register.json").read_text() == register_before  # no training ran


def test_a_batch_with_too_few_rows_gets_no_verdict_and_no_retrain(trained):
    from flows.monitoring_flow import monitoring

    root, _ = trained
    drop(root, "batch-small.csv", synthetic.later_batch(TINY, 6).head(12))
    [result] = monitoring(root=str(root), retries=0)
    assert result["verdict"] == "no verdict"
    assert result["reason"] == "too few rows for a verdict: the batch has 12 rows, monitor.min_rows is 30"
    assert result["retrain"]["status"] == "not needed"
    assert "too few rows for a verdict" in (newest_report(root, "batch-small") / "drift.html").read_text()
    assert (root / result["processed"]).exists() and not list((root / "data/batches").glob("*.parquet"))


def test_calm_batch_no_retrain_then_drifted_batch_relearns_to_a_gate_decision(trained, capsys):
    """The demo, end to end on the tiny profile."""
    from flows.monitoring_flow import monitoring

    root, _ = trained
    client = support.mlflow_client(root)
    name = "fund-evaluator"
    # The tiny model never beats the rule scorer, so promote one by hand: a champion to watch.
    support.promote_by_hand(root, support.versions(root)[-1])
    champion = int(client.get_model_version_by_alias(name, "champion").version)
    versions = support.versions(root)

    drop(root, *simulate.make_batch(TINY, 6, "none"))
    [calm] = monitoring(root=str(root), retries=0)
    assert calm["verdict"] == "no drift" and calm["retrain"]["status"] == "not needed"
    assert calm["prediction_drift"]["verdict"] is False and calm["champion_version"] == champion
    # the same share classes graded on the reference and the batch: their grades pair up for the migration
    assert calm["prediction_drift"]["paired"] >= 30 and calm["prediction_drift"]["migration"] is not None
    assert "rating migration" in calm["prediction_drift"]["reason"]
    assert not list((root / "data/batches").glob("*.parquet")) and support.versions(root) == versions

    drop(root, *simulate.make_batch(TINY, 6, "vol_spike"))
    start = time.monotonic()
    state = monitoring(root=str(root), retries=0, return_state=True)
    [spike] = state.result()
    seconds = time.monotonic() - start
    # what engineers see in Prefect: the verdict and the gate's decision in the run's message and an artifact
    assert state.message.startswith("batch-2023-06-vol_spike: drift, retrain done (fund-evaluator v")
    verdict = support.artifact(state.state_details.flow_run_id, "drift-verdict")
    assert "### batch-2023-06-vol_spike: drift" in verdict and "| gate | v" in verdict

    assert spike["verdict"] == "drift" and spike["data_drift"]["share"] >= 0.3
    retrain = spike["retrain"]
    assert retrain["status"] == "done" and (root / retrain["accepted"]).exists()  # merged into the training data
    decision = retrain["decision"]
    assert decision == json.loads((root / "metrics/register.json").read_text())
    assert support.versions(root) == versions + [decision["version"]]
    now = int(client.get_model_version_by_alias(name, "champion").version)
    assert now == (decision["version"] if decision["promoted"] else champion)  # the gate, either way
    assert decision["baseline_name"].startswith(f"champion v{champion}")
    assert set(retrain["on_batch"]) == {"candidate", "rule", "champion"} and retrain["on_batch"]["candidate"]["n"] > 0
    assert set(retrain["on_test_set"]) >= {"grpo", "rule"}
    # reports on disk
    report = newest_report(root, "batch-2023-06-vol_spike")
    for f in ("drift.html", "drift.json", "prediction_drift.html", "prediction_drift.json", "summary.json"):
        assert (report / f).exists(), f
    assert json.loads((report / "summary.json").read_text())["retrain"]["decision"] == decision
    # the figures and the decision in MLflow
    experiment = client.get_experiment_by_name("fund-grpo-monitoring")
    runs = client.search_runs([experiment.experiment_id], "tags.batch = 'batch-2023-06-vol_spike'")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["drift.share"] == spike["data_drift"]["share"]
    assert runs[0].data.metrics["gate.promoted"] == float(decision["promoted"])
    assert runs[0].data.tags["gate.reason"] == decision["reason"]
    with capsys.disabled():
        print(f"\n[monitoring e2e] drifted batch -> relearn -> gate in {seconds:.0f} s: {retrain['message']}")


def test_a_drifted_batch_with_retraining_off_is_kept_for_the_next_training_run(trained):
    import yaml

    from flows.monitoring_flow import monitoring

    root, _ = trained
    versions = support.versions(root)
    # the reference already holds the month-6 spike (relearned above): a low bar makes month 7 a drift
    params_path = root / "params.yaml"
    original = params_path.read_text(encoding="utf-8")
    data = yaml.safe_load(original)
    data["monitor"]["drift_share"] = 0.05
    params_path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    drop(root, *simulate.make_batch(TINY, 7, "vol_spike"))
    try:
        [kept] = monitoring(root=str(root), retries=0, retrain=False)
    finally:
        params_path.write_text(original, encoding="utf-8")
    assert kept["verdict"] == "drift" and kept["retrain"]["status"] == "skipped"
    accepted = root / kept["retrain"]["accepted"]
    assert accepted.exists()  # in the training data: the next training run learns from it
    assert support.versions(root) == versions  # but nothing trained now
    # taken back out, so that the next test's relearn retrains on the decisions it makes, not on this
    # batch as well (a whole tiny pipeline: about a minute of CPU)
    accepted.unlink()


def test_analysts_decisions_past_the_setting_relearn_through_the_gate(trained):
    """Decisions made in the API's store since the newest version was trained are counted; below
    `monitor.relearn_after_decisions` nothing runs, at it the training flow does (the `decisions` stage
    makes them labels) and ends at the gate; counted again from the new version, nothing is due."""
    import yaml

    from flows.monitoring_flow import monitoring
    from fundgrpo.serving.api.store import Store

    root, _ = trained
    params_path = root / "params.yaml"
    original = params_path.read_text(encoding="utf-8")
    data = yaml.safe_load(original)
    data["monitor"]["relearn_after_decisions"] = 2
    params_path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    try:
        test = PromptRecord.read(root / "data/prepared/test.jsonl")[:2]
        versions = support.versions(root)
        store = Store(f"sqlite:///{root}/evaluations.db")
        store.add([{"share_class_id": r.share_class_id, "grade": 3} for r in test], f"models:/x/{versions[-1]}")
        regraded = {r.share_class_id: 5 if r.expert_grade < 4 else 1 for r in test}
        first, second = regraded
        store.decide(store.latest(first), regraded[first], "the record says otherwise", "ana", None)
        assert monitoring(root=str(root), retries=0) == []  # one decision: below the setting, nothing runs
        store.decide(store.latest(second), regraded[second], "a closer look at costs", "ana", None)
        [summary] = monitoring(root=str(root), retries=0)
        assert summary["kind"] == "decisions" and "2 analyst decision(s)" in summary["reason"]
        decision = summary["retrain"]["decision"]
        assert summary["retrain"]["status"] == "done" and support.versions(root) == versions + [decision["version"]]
        labelled = {
            r.share_class_id: r
            for r in PromptRecord.read(root / "data/prepared/test.jsonl")
            if r.share_class_id in regraded
        }
        assert {k: (r.expert_grade, r.label_source) for k, r in labelled.items()} == {
            k: (g, "analyst") for k, g in regraded.items()
        }
        # the backtest reports agreement with the analysts' decisions apart from the export's grades
        labels = json.loads((root / "metrics/backtest.json").read_text())["labels"]
        assert labels["analyst"]["n"] == 2 and labels["export"]["n"] > 2 and "exact" in labels["analyst"]["grpo"]
        assert monitoring(root=str(root), retries=0) == []  # counted from the version just trained
    finally:
        params_path.write_text(original, encoding="utf-8")


def test_documents_that_come_with_a_batch_are_checked_compared_and_kept_with_it(trained, tmp_path):
    """A batch's documents (`<batch>.documents.csv`) are compared with those the training reference read:
    Korean broker research against English notes is document drift, said by name; a batch whose documents
    name a fund it lacks is quarantined with them; either way the documents move with their batch."""
    from flows.monitoring_flow import monitoring

    root = support.workspace_copy(trained[0], tmp_path / "repo")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["monitor"]["prediction_sample"] = 0  # the documents' verdict is the point: no generation
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    p = SyntheticParams(n_funds=240, documents=True)
    sc = synthetic.universe(p)
    stored = synthetic_documents.write_documents(sc, synthetic.qualitative_facts(p, sc), p, lambda f: False)
    stored[stored["language"] == "en"].assign(date="2022-06-30").to_parquet(root / "data/canonical/documents.parquet")

    batch = synthetic.later_batch(TINY, 6)
    ids = batch["share_class_id"].head(60).tolist()
    sent = pd.DataFrame({"document_id": [f"B{i}" for i in range(60)], "share_class_id": ids, "date": "2023-01-15",
                         "kind": "broker_research", "language": "ko",
                         "text": [f"리서치 {i}호: 업황 회복으로 목표주가 상향." for i in range(60)]})  # fmt: skip
    drop(root, "batch-docs.csv", batch)
    sent.to_csv(root / "data/incoming/batch-docs.documents.csv", index=False)
    drop(root, "batch-badocs.csv", batch)
    sent.assign(share_class_id="NOT-A-FUND").to_csv(root / "data/incoming/batch-badocs.documents.csv", index=False)

    results = {r["batch"]: r for r in monitoring(root=str(root), retries=0, retrain=False)}

    assert set(results) == {"batch-docs", "batch-badocs"}  # the documents are no batch of their own
    docs = results["batch-docs"]["documents_drift"]
    assert docs["verdict"] is True and "korean_share" in docs["drifted"] and docs["rows"]["current"] == 60
    assert (
        results["batch-docs"]["verdict"] == "drift"
        and "document descriptors drifted" in results["batch-docs"]["reason"]
    )
    assert (newest_report(root, "batch-docs") / "documents_drift.html").exists()
    assert (root / results["batch-docs"]["processed"]).with_name("batch-docs.documents.csv").exists()
    bad = results["batch-badocs"]
    assert bad["verdict"] == "quarantined" and "its documents cannot be read" in bad["reason"]
    assert "field share_class_id: 'NOT-A-FUND' is not in the fund table" in bad["reason"]
    assert (root / bad["quarantine"] / "batch-badocs.documents.csv").exists()
    assert not list((root / "data/incoming").iterdir())
