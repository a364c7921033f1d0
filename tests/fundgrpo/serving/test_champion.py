"""Prompts for the champion are the training prompts, for every row; scores use rated test-split funds only."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd

from fundgrpo.data import documents, ingestion, synthetic, synthetic_documents
from fundgrpo.evaluation import statistical
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import preparation as prepare
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import BaselineParams, EvidenceParams, IngestParams, Params, PrepareParams, SyntheticParams
from fundgrpo.serving import champion
from tests.support import REPO


def test_prompt_records_cover_unrated_rows_with_the_training_prompts():
    methodology = meth.load(REPO / "methodology/default.yaml")
    batch = synthetic.later_batch(SyntheticParams(n_funds=30, n_months=48), 3)
    batch.loc[:2, "expert_grade"] = pd.NA  # not rated (yet)
    records = champion.prompt_records(batch, methodology, PrepareParams())
    assert len(records) == len(batch)
    assert [r.labelled for r in records[:4]] == [False, False, False, True]
    assert records[0].expert_grade is None and records[0].reference is None  # nothing made up for it
    rated = prepare.build_records(batch[batch["expert_grade"].notna()].reset_index(drop=True), methodology)
    # same prompts as training, except that peer context here also counts the unrated rows
    assert [r.share_class_id for r in records[3:]] == [r.share_class_id for r in rated]
    assert all(r.split == split_of(r.fund_id, PrepareParams()) for r in records)
    assert records[5].prompt[0] == rated[2].prompt[0]  # the system prompt (methodology)

    # a few share classes only: the same records as the whole batch gives them (peers are still the whole batch)
    wanted = [records[1].share_class_id, records[7].share_class_id]
    few = champion.prompt_records(batch, methodology, PrepareParams(), only=wanted)
    assert few == [r for r in records if r.share_class_id in wanted]

    predictions = [
        Prediction(grade=r.rule_grade, written_grade=r.rule_grade, score=r.rule_score, valid=True) for r in records
    ]
    scored = champion.scored(records, predictions, methodology)
    used = [r for r in records if r.labelled and r.split == "test"]
    assert scored["n"] == len(used) > 0
    others = [(r, p) for r, p in zip(records, predictions) if r.split != "test"]
    assert (
        champion.scored([r for r, _ in others], [p for _, p in others], methodology) is None
    )  # trained-on funds never count


def test_served_prompts_read_the_stored_documents_as_training_did(tmp_path):
    """A fund the documents name gets them in its prompt and its text estimate; a new fund gets none
    and every pillar of its reference is "not assessed", never guessed."""
    p = Params()
    params = replace(p.synthetic, n_funds=60, documents=True, out_dir=str(tmp_path / "raw"))
    facts = synthetic.qualitative_facts(params)
    extra = synthetic_documents.files(synthetic.universe(params), facts, params, lambda f: False)
    synthetic.write(params, extra=extra)
    funds, _ = ingestion.run(IngestParams(path=str(tmp_path / "raw"), batches_dir=""))
    docs_params = replace(p.ingest.documents, path=str(tmp_path / "raw" / "documents.csv"))
    docs = documents.read(docs_params, funds)
    (tmp_path / "data/canonical").mkdir(parents=True)
    docs.to_parquet(tmp_path / p.ingest.documents_out)
    extra["judgements.csv"].to_parquet(tmp_path / p.ingest.judgements_out)
    m = meth.load(REPO / "methodology" / "documents.yaml")
    params_all = replace(p, ingest=replace(p.ingest, documents=docs_params))
    reading = champion.stored_reading(params_all, m, funds, tmp_path)
    assert (
        reading is not None
        and champion.stored_reading(params_all, meth.load(REPO / "methodology" / "default.yaml"), funds, tmp_path)
        is None
    )

    texts = funds["share_class_id"].astype(str).map(lambda i: documents.fund_text(reading.documents.get(i, [])))
    grid = BaselineParams(max_iter=30, learning_rate=(0.1,), max_leaf_nodes=(7,))
    _, estimator, _ = statistical.estimate(funds, grid, EvidenceParams(folds=2), PrepareParams(), m.grades, texts)
    new = funds.iloc[:1].assign(share_class_id="NEW1", fund_id="NEWF", company="Nobody Asset Management")
    universe = pd.concat([funds, new], ignore_index=True)
    known = str(funds["share_class_id"].iloc[0])
    records = champion.prompt_records(universe, m, PrepareParams(), [known, "NEW1"], estimator,
                                      champion.stored_reading(params_all, m, universe, tmp_path))  # fmt: skip
    by_id = {r.share_class_id: r for r in records}
    assert "Documents, newest first" in by_id[known].prompt[-1]["content"]
    assert "Documents: none" in by_id["NEW1"].prompt[-1]["content"]
    assert by_id["NEW1"].documents == "{}"
    assert all(v["judgement"] == "not assessed" for v in json.loads(by_id["NEW1"].pillars).values())

    # read for the evaluated share classes only (what a request does): the same records, no other fund's documents
    few = champion.stored_reading(params_all, m, universe, tmp_path, only=[known, "NEW1"])
    assert few is not None and set(few.documents) == {known, "NEW1"} and few.documents[known]
    assert set(few.judgements) <= {str(funds["fund_id"].iloc[0]), "NEWF"}
    assert champion.prompt_records(universe, m, PrepareParams(), [known, "NEW1"], estimator, few) == records
