"""benchmarks/time/pipeline.py runs trials' profiles from the research record: each must still load."""

from __future__ import annotations

import pytest

from fundgrpo.params import Params, deep_merge, from_dict, read_yaml
from fundgrpo.profiles import merged
from tests.support import REPO

TRIALS = sorted((REPO / "research" / "profiles").glob("*.yaml"))


@pytest.mark.research
@pytest.mark.parametrize("trial", TRIALS, ids=[t.stem for t in TRIALS])
def test_each_trial_profile_loads_over_the_profiles_it_was_run_with(trial):
    """Over the data and model profiles a trial was run with (strict: an unknown or retyped key fails)."""
    under = merged(["morningstar", "smollm2", "lora-top15"], REPO / "params.yaml", REPO / "profiles")
    assert isinstance(from_dict(Params, deep_merge(under, read_yaml(trial))), Params)
    assert not (REPO / "profiles" / trial.name).exists()  # one home: the product's profiles or the record's
