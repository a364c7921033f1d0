"""Evaluations that cite: prompts show each fund's documents, references cite them, the check verifies."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml

from fundgrpo.data.documents import Document
from fundgrpo.methodology import citations, compiler
from fundgrpo.methodology.answers import predictions_from_texts
from fundgrpo.methodology.preparation import build_records
from fundgrpo.params import PrepareParams
from tests.support import REPO

M = compiler.load(REPO / "methodology" / "documents.yaml")
IDS = tuple(q.id for q in M.qualitative)


def funds(n: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "share_class_id": [f"S{i}" for i in range(n)],
            "fund_id": [f"F{i}" for i in range(n)],
            "name": [f"Fund {i}" for i in range(n)],
            "category": "Equity",
            "company": ["Acme"] * (n // 2) + ["Bolt"] * (n - n // 2),
            **{c.metric: rng.normal(size=n) for c in M.criteria + M.context},
            "expert_grade": [1, 2, 3, 4, 5, 3, 2, 4][:n],
            "expert_score": [5.0, 20.0, 50.0, 80.0, 95.0, 50.0, 20.0, 80.0][:n],
        }
    )


DOCS = [
    Document("D3", "fund", "F0", "2024-06-01", "news", "en", "Markets were calm. The lead manager resigned in May."),
    Document("D2", "company", "Acme", "2024-03-01", "news", "en", "The regulator fined Acme for weak controls."),
    Document("D1", "fund", "F0", "2022-01-01", "commentary", "en", "We remain disciplined in our approach." * 8),
]
QUOTES = {"D3": "The lead manager resigned in May.", "D2": "The regulator fined Acme for weak controls.",
          "D1": "We remain disciplined in our approach."}  # fmt: skip
JUDGED = {
    "F0": [
        {"criterion": c, "judgement": j, "document_id": d, "quote": QUOTES[d]}
        for c, j, d in (("people", -1, "D3"), ("parent", -1, "D2"), ("process", 1, "D1"))
    ]
}


@pytest.fixture(scope="module")
def records():
    reading = citations.Reading({"S0": DOCS}, JUDGED, budget_chars=150)
    return {r.share_class_id: r for r in build_records(funds(), M, PrepareParams(), reading=reading)}


def test_the_prompt_shows_the_newest_documents_within_the_budget_and_says_what_was_cut(records):
    prompt = records["S0"].prompt[-1]["content"]
    assert "Documents, newest first, 1 older not shown:" in prompt
    assert prompt.index("[1] 2024-06-01 news") < prompt.index("[2] 2024-03-01 news") and "[3]" not in prompt
    assert "2022-01-01" not in prompt  # D1, cut
    assert prompt.rstrip().splitlines()[-1].startswith("JSON:")  # the answer's format stays last
    assert "Documents: none" in records["S1"].prompt[-1]["content"]


def test_the_reference_cites_what_the_prompt_showed_and_passes_its_own_checks(records):
    schema = compiler.output_schema(M)
    for r in records.values():
        answer = json.loads(r.reference)
        jsonschema.validate(answer, schema)
        assert list(answer)[0] == "pillars"  # judged before the grade is written
        assert citations.reward(answer["pillars"], json.loads(r.documents), IDS) == 1.0
    pillars = json.loads(records["S0"].reference)["pillars"]
    assert pillars["people"]["judgement"] == -1 and pillars["parent"]["evidence"][0]["document"] == 2  # D2
    # the analysts' quote, as the numbers the prompt shows its document and sentence by
    assert pillars["people"]["evidence"] == [{"document": 1, "sentence": 2}]
    assert (
        "[1] 2024-06-01 news: (1) Markets were calm. (2) The lead manager resigned in May."
        in (records["S0"].prompt[-1]["content"])
    )
    assert pillars["process"] == {"judgement": "not assessed", "evidence": []}  # its document was cut
    assert all(p["judgement"] == "not assessed" for p in json.loads(records["S1"].reference)["pillars"].values())


def test_a_citation_of_no_sentence_or_an_unshown_document_is_not_verified(records):
    documents = json.loads(records["S0"].documents)
    lies = {
        "people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 3}]},  # D3, shown first, has two
        "process": {"judgement": 1, "evidence": [{"document": 3, "sentence": 1}]},  # D1: not shown
        "parent": {
            "judgement": -1,
            "evidence": [{"document": 1, "sentence": 0}, {"document": 2}, {"document_id": "D2", "sentence": 1}],
        },  # fmt: skip
    }
    c = citations.check(lies, documents, IDS)
    assert (c.citations, c.verified, c.supported, c.coverage) == (5, 0, 0, 0.0)
    assert citations.reward(lies, documents, IDS) == 0.0
    assert citations.reward({}, documents, IDS) == 0.5  # nothing judged: no false citation, no coverage
    # served: the judgements rest on nothing, so none is served; the citations read as the model gave them
    served = {p.criterion: p for p in citations.judged(lies, documents, M)}
    assert {p.judgement for p in served.values()} == {None} and served["people"].reason == citations.NOT_FOUND
    assert served["people"].evidence[0].quote == "sentence 3" and not served["people"].evidence[0].verified
    assert served["people"].evidence[0].document_id == "D3"  # the number served as the id it stands for
    assert served["process"].evidence[0].document_id == "document 3"  # none: as the model wrote it


def test_a_verified_citation_serves_its_sentence_word_for_word(records):
    documents = json.loads(records["S0"].documents)
    said = {"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]}}
    [people] = [p for p in citations.judged(said, documents, M) if p.criterion == "people"]
    assert people.judgement == -1 and people.evidence[0].quote == "The lead manager resigned in May."
    assert people.evidence[0].document_id == "D3"  # served by its id
    assert people.evidence[0].quote in DOCS[0].text


def test_the_backtest_summary_counts_what_the_model_wrote(records):
    rows = [records["S0"], records["S1"]]
    texts = [rows[0].reference, json.dumps({"reasoning": "average fund", "score": 20, "grade": 2})]
    summary = citations.summary(rows, predictions_from_texts(texts, compiler.output_schema(M)), M)
    assert summary["with_pillars"] == 1 and summary["verified"] == 1.0 and summary["agree"] == 1.0
    assert summary["pertinent"] == 1.0  # the reference cites the analysts' sentences
    assert summary["covered"] == 0.5  # the second answer judged nothing
    assert summary["by_criterion"]["people"] == {"judged_by_analysts": 1, "agree": 1.0}


def test_korean_prompts_show_documents_in_korean():
    raw = yaml.safe_load((REPO / "methodology" / "documents.yaml").read_text(encoding="utf-8"))
    ko = compiler.parse({**raw, "language": "ko"}, "ko.yaml")
    doc = Document("K1", "company", "한빛자산운용", "2024-05-02", "news", "ko", "금융당국은 과태료를 부과했다.")
    block = citations.prompt_block(ko, [doc], 0)
    assert block.startswith("문서 (최신순):") and "[1] 2024-05-02 news: (1) 금융당국은" in block
    assert "문서 번호와 문장 번호" in block
    assert "운용인력, 운용 프로세스, 운용사" in block


def test_the_korean_methodology_writes_korean_references_that_cite_what_the_prompt_showed():
    """methodology/documents_ko.yaml: the prompt, the analysts' guidance and the reference evaluation in
    Korean; its citations are the prompt's numbers as in English, and pass the same check."""
    ko = compiler.load(REPO / "methodology" / "documents_ko.yaml")
    assert ko.language == "ko" and all(any("가" <= ch <= "힣" for ch in q.guidance["lowers"]) for q in ko.qualitative)
    assert [(q.id, q.weight) for q in ko.qualitative] == [(q.id, q.weight) for q in M.qualitative]
    reading = citations.Reading({"S0": DOCS}, JUDGED, budget_chars=150)
    records = build_records(funds(), ko, PrepareParams(), reading=reading)
    record = next(r for r in records if r.share_class_id == "S0")
    prompt = "\n".join(m["content"] for m in record.prompt)
    assert "문서 (최신순, 이전 문서 1건 생략):" in prompt and "[1] 2024-06-01 news: (1) Markets were calm." in prompt
    answer = json.loads(record.reference)
    assert any("가" <= ch <= "힣" for ch in answer["reasoning"]), answer["reasoning"]
    assert answer["pillars"]["people"] == {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]}
    checked = citations.check(answer["pillars"], json.loads(record.documents), IDS)
    assert checked.verified == checked.citations > 0
