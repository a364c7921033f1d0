"""benchmarks/time/hotspots.py: each phase's own time, the methods it times still there, a real profile of
the API's evaluations on the trained tiny repo, and the page made from the recorded runs."""

import importlib
import json
import time

import pytest

from benchmarks.time import hotspots


def test_a_phase_counts_its_own_time_its_callees_apart():
    timers = hotspots.Timers(lambda stack: "inner" if "a" in stack else "top")
    inner = timers.wrap("b", lambda: time.sleep(0.2))

    def outer():
        time.sleep(0.02)
        inner()

    timers.wrap("a", outer)()
    assert timers.seconds[("inner", "b")] >= 0.2 and 0.02 <= timers.seconds[("inner", "a")] < 0.15
    assert timers.calls == {("inner", "b"): 1, ("inner", "a"): 1}


def test_the_timed_methods_exist_and_are_put_back():
    """A renamed TRL or project method would leave its phase silently empty: each must exist, and the
    originals come back after a profile (an inherited one is inherited again)."""
    for module, owner, name in [*hotspots.GRPO_PHASES, *hotspots.EVALUATE_PHASES]:
        target = importlib.import_module(module)
        assert callable(getattr(getattr(target, owner) if owner else target, name)), (module, owner, name)
    from trl import GRPOTrainer

    before = (GRPOTrainer.evaluate, GRPOTrainer.training_step)
    with hotspots.Timers().patched(hotspots.GRPO_PHASES):
        assert GRPOTrainer.evaluate is not before[0]
    assert (GRPOTrainer.evaluate, GRPOTrainer.training_step) == before and "evaluate" not in vars(GRPOTrainer)


def test_an_evaluation_profile_of_the_trained_repo(trained, tmp_path, monkeypatch):
    root, _ = trained
    monkeypatch.setattr(hotspots, "RESULTS", tmp_path)
    monkeypatch.chdir(root)  # the profile works in the workspace; the test's own folder comes back
    out = hotspots.profile_evaluate(root, "tiny", [1, 3], repeats=1, overrides=["generation.batch_size=2"])
    found = json.loads(out.read_text())
    assert found["kind"] == "evaluate" and list(found["requests"]) == ["1", "3"]
    assert found["command"].endswith("--repeats 1 --set generation.batch_size=2")  # the override, said
    for size in ("1", "3"):
        phases = found["requests"][size]["seconds"]
        assert phases["generation (greedy)"] > 0 and phases["prompt building"] > 0 and "other" in phases
    page = "\n".join(hotspots.render_evaluate(found))
    assert "| generation (greedy) |" in page and "| funds/s |" in page


@pytest.mark.research
def test_the_committed_page_is_what_the_recorded_runs_generate():
    if not hotspots.RESULTS.exists():
        pytest.skip("no recorded runs")
    assert hotspots.report() == hotspots.PAGE.read_text(encoding="utf-8"), (
        "run `python benchmarks/time/hotspots.py report`"
    )
