"""tools/sweep.py for real: a two-member loss_type sweep queued as DVC experiments in a tiny repo.

Starts from a copy of the session's trained tiny repo (tests/support.py), committed as the
baseline, with no MLflow store yet (so the experiment is first created inside a queued
member's temporary copy). Checks: `dvc exp show` has both members with their loss type and
backtest; MLflow (the workspace's store) has a run tagged with each name, artifacts in the
workspace; the comparison table has both rows; nothing in the workspace changed; no member
was promoted.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
import time

import pytest

from tests import support

pytestmark = pytest.mark.slow
IGNORE = {"mlflow.db", "mlartifacts", "tmp", "__pycache__"}  # .dvc/tmp: locks and queue state of the original


@pytest.fixture(scope="module")
def swept(trained, tmp_path_factory):
    source, _ = trained
    root = tmp_path_factory.mktemp("sweep") / "repo"
    shutil.copytree(source, root, symlinks=True, ignore=lambda d, names: [n for n in names if n in IGNORE])
    shutil.rmtree(root / "monitoring" / "reports", ignore_errors=True)
    # an analyst's decision in the workspace's store (which DVC does not track): the baseline's decisions
    # table holds it, and so must every queued member's, whose stages run in a copy without the store.
    # On a share class outside the universe (a fund since closed): it changes the table, not the labels,
    # so the baseline's `dvc repro` reruns `decisions` and `prepare` only (6.6 s instead of 26.3 s, all
    # of training rerun, for a fund inside; a store the members cannot see still empties their table)
    from fundgrpo.serving.api.store import Store

    sid = "closed-fund-0001"
    assert sid not in (root / "data/prepared/test.jsonl").read_text(encoding="utf-8")
    store = Store(f"sqlite:///{root}/evaluations.db")
    store.add([{"share_class_id": sid, "grade": 3}], "models:/fund-evaluator/1")
    earlier = store.latest_decision(sid)
    store.decide(store.latest(sid), 1, "sweep test: the costs", "ana", earlier["id"] if earlier else None)
    store.engine.dispose()
    repro = support.run(["dvc", "repro"], root)
    assert "Running stage 'sft'" not in repro.stdout  # the labels did not change
    support.run(["git", "add", "-A"], root)
    support.run(["git", "commit", "-qm", "baseline", "--allow-empty"], root)
    guarded = {
        p: (root / p).read_bytes()
        for p in ("params.yaml", "metrics/backtest.json", "metrics/register.json", "dvc.lock")
    }
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        # An earlier in-process mlflow.set_tracking_uri (the monitoring flow's) exported the
        # variable (MLflow 3 does): it would send the members to that repo's store.
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        result = support.run(
            [
                sys.executable,
                "tools/sweep.py",
                "--sweep",
                "grpo.loss_type=grpo,dr_grpo",
                "--max-steps",
                "2",
                "--poll",
                "10",  # each `dvc queue status` costs ~0.65 s of CPU, taken from the members running beside it
                "--timeout",
                "1500",
            ],
            root,
            timeout=1800,
        )
    print(f"sweep of 2 members: {time.monotonic() - started:.0f} s")
    # read once for the tests below (each `dvc exp show` is ~2.5 s of CPU); after `guarded`, which it must not change
    show = json.loads(support.run(["dvc", "exp", "show", "--json"], root).stdout)
    return root, result.stdout, guarded, show


def test_both_members_are_dvc_experiments_with_their_loss_type_and_backtest(swept):
    _, _, _, show = swept
    head = next(c for c in show if c["rev"] != "workspace")
    exps = {e["name"]: e["revs"][0]["data"] for e in head["experiments"]}
    assert len(exps) == 2, exps.keys()
    loss = {d["params"]["params.yaml"]["data"]["grpo"]["loss_type"] for d in exps.values()}
    assert loss == {"grpo", "dr_grpo"}
    for data in exps.values():
        assert "qwk" in data["metrics"]["metrics/backtest.json"]["data"]["models"]["grpo"]
        register = data["metrics"]["metrics/register.json"]["data"]
        assert register["alias"] == "challenger" and not register["promoted"]  # sweeps never promote
        assert data["params"]["params.yaml"]["data"]["register"]["promote"] is False


def test_mlflow_logged_each_member_in_the_workspace_store(swept):
    root, _, _, show = swept
    names = {e["name"] for c in show for e in c.get("experiments") or []}
    client = support.mlflow_client(root)
    experiment = client.get_experiment_by_name("fund-grpo")
    assert experiment.artifact_location == (root / "mlartifacts").as_uri()  # created in a member's temp copy
    runs = client.search_runs([experiment.experiment_id])
    tagged = {r.data.tags.get("dvc.exp_name"): r for r in runs}
    assert names <= set(tagged)
    for name in names:
        run = tagged[name]
        assert run.info.run_name == name and run.data.tags["dvc.baseline_rev"]
        assert run.info.artifact_uri.startswith((root / "mlartifacts").as_uri())
    assert "champion" not in client.get_registered_model("fund-evaluator").aliases


def test_the_comparison_table_has_both_rows(swept):
    root, stdout, _, _ = swept
    assert "| exp " in stdout  # the markdown table is printed
    rows = list(csv.DictReader((root / "reports/sweeps/comparison.csv").open()))
    members = [r for r in rows if r["state"] != "baseline"]
    assert sorted(r["loss_type"] for r in members) == ["dr_grpo", "grpo"]
    assert all(r["qwk"] and r["mlflow_run"] and r["gate"].startswith("challenger") for r in members)
    assert [r["loss_type"] for r in rows if r["state"] == "baseline"] == ["dapo"]


def test_the_workspace_is_untouched(swept):
    root, _, guarded, _ = swept
    assert {p: (root / p).read_bytes() for p in guarded} == guarded
    assert support.run(["git", "status", "--porcelain", "--untracked-files=no"], root).stdout == ""


def test_every_member_trained_with_the_workspaces_decisions(swept):
    """Queued members run in copies under .dvc/tmp/exps without the store: the `decisions` stage reads
    the workspace's (DVC_ROOT), so each member's decisions table is the baseline's (it once exported
    an empty table from a store it could not see, dropping the analysts' labels)."""
    import yaml

    root, _, _, show = swept
    table = (root / "data/decisions/decisions.csv").read_text(encoding="utf-8")
    assert "sweep test: the costs" in table
    want = yaml.safe_load((root / "dvc.lock").read_text(encoding="utf-8"))["stages"]["decisions"]["outs"]
    head = next(c for c in show if c["rev"] != "workspace")
    revs = [e["revs"][0]["rev"] for e in head["experiments"]]
    assert len(revs) == 2
    for rev in revs:
        lock = yaml.safe_load(support.run(["git", "show", f"{rev}:dvc.lock"], root).stdout)
        assert lock["stages"]["decisions"]["outs"] == want, rev
