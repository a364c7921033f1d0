"""Prompts for the champion are the training prompts, for every row; scores use rated test-split funds only."""

from __future__ import annotations

import pandas as pd

from fundgrpo.data import synthetic
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import preparation as prepare
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import PrepareParams, SyntheticParams
from fundgrpo.serving import champion
from tests.support import REPO


def test_prompt_records_cover_unrated_rows_with_the_training_prompts():
    methodology = meth.load(REPO / "methodology/default.yaml")
    batch = synthetic.later_batch(SyntheticParams(n_funds=30, n_months=48), 3)
    batch.loc[:2, "expert_grade"] = pd.NA  # not rated (yet)
    records = champion.prompt_records(batch, methodology, PrepareParams())
    assert len(records) == len(batch)
    assert [r["labelled"] for r in records[:4]] == [False, False, False, True]
    rated = prepare.build_records(batch[batch["expert_grade"].notna()].reset_index(drop=True), methodology)
    # same prompts as training, except that peer context here also counts the unrated rows
    assert [r["share_class_id"] for r in records[3:]] == [r["share_class_id"] for r in rated]
    assert all(r["split"] == split_of(r["fund_id"], PrepareParams()) for r in records)
    assert records[5]["prompt"][0] == rated[2]["prompt"][0]  # the system prompt (methodology)

    # a few share classes only: the same records as the whole batch gives them (peers are still the whole batch)
    wanted = [records[1]["share_class_id"], records[7]["share_class_id"]]
    few = champion.prompt_records(batch, methodology, PrepareParams(), only=wanted)
    assert few == [r for r in records if r["share_class_id"] in wanted]

    predictions = [{"grade": r["rule_grade"], "score": r["rule_score"], "valid": True} for r in records]
    scored = champion.scored(records, predictions, methodology)
    used = [r for r in records if r["labelled"] and r["split"] == "test"]
    assert scored["n"] == len(used) > 0
    others = [(r, p) for r, p in zip(records, predictions) if r["split"] != "test"]
    assert (
        champion.scored([r for r, _ in others], [p for _, p in others], methodology) is None
    )  # trained-on funds never count
