"""The synthetic universe's documents: facts that move the grade, traps, phrasings held out of training."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fundgrpo.data import synthetic, synthetic_documents
from fundgrpo.params import SyntheticParams

PARAMS = SyntheticParams(n_funds=240, documents=True)


@pytest.fixture(scope="module")
def written():
    sc = synthetic.universe(PARAMS)
    facts = synthetic.qualitative_facts(PARAMS, sc)
    heldout = {f: int(f[-4:]) % 3 == 0 for f in facts["fund_id"]}  # a third of the funds: "validation/test"
    docs = synthetic_documents.write_documents(sc, facts, PARAMS, heldout.__getitem__)
    return sc, facts, docs, heldout


def phrasing_tails(fact: str) -> list[str]:
    """A fragment of each held-out phrasing of `fact`, in both languages."""
    out = []
    for language in ("en", "ko"):
        for text in synthetic_documents.FACT_TEXT[fact][language][-synthetic_documents.HELD_OUT :]:
            out.append(max(text.split("{"), key=len).split("}")[-1].strip()[:12])
    return out


def test_phrasings_and_kind_held_out_never_reach_a_training_fund(written):
    _, _, docs, heldout = written
    train = docs[docs["fund_id"].map(lambda f: f != "" and not heldout[f])]
    assert not train["heldout"].any()
    assert synthetic_documents.HELD_OUT_KIND not in set(train["kind"])
    for fact in synthetic_documents.FUND_FACTS:
        for fragment in phrasing_tails(fact):
            assert not train["text"].str.contains(fragment, regex=False).any(), (fact, fragment)
    assert docs.loc[docs["heldout"], "fund_id"].map(heldout).all()
    assert docs["heldout"].any()  # and the held-out funds do meet them


def test_every_fund_has_documents_in_its_language_and_company_documents_are_keyed_by_company(written):
    sc, facts, docs, _ = written
    per_fund = docs[docs["fund_id"] != ""].groupby("fund_id")["language"].agg(set)
    korean = set(sc.loc[sc["category"] == "Korea Equity", "fund_id"])
    assert set(per_fund.index) == set(facts["fund_id"])  # at least a commentary each
    assert all(langs == ({"ko"} if f in korean else {"en"}) for f, langs in per_fund.items())
    company_docs = docs[docs["company"] != ""]
    assert set(company_docs["company"]) <= set(sc["company"]) and company_docs["fund_id"].eq("").all()


def test_a_manager_change_shortens_tenure_and_the_pillars_move_the_analysts_grade():
    plain, _ = synthetic.generate(replace(PARAMS, documents=False))
    funds, _ = synthetic.generate(PARAMS)
    facts = synthetic.qualitative_facts(PARAMS)
    changed = facts.loc[facts["manager_change_month"] >= 0, "fund_id"]
    assert len(changed) > 5
    tenure = funds.set_index("fund_id").loc[changed, "manager_tenure"]
    assert (tenure <= synthetic_documents.WINDOW / 12).all()
    scores = funds.merge(facts, on="fund_id").dropna(subset=["expert_score"])
    lowered = scores[(scores[["people", "process", "parent"]] < 0).all(axis=1)]["expert_score"].mean()
    raised = scores[(scores[["people", "process", "parent"]].sum(axis=1) >= 2)]["expert_score"].mean()
    assert lowered < 40 < 60 < raised  # the qualitative half moves funds across the grade bands
    assert (funds["expert_grade"] != plain["expert_grade"]).mean() > 0.2


def test_traps_leave_the_pillars_neutral(written):
    _, facts, docs, _ = written
    trapped = facts[facts["events"].str.contains("negation|hedge|correction|other_fund")]
    assert len(trapped) > 5
    quiet = trapped[~trapped["events"].str.contains("manager_change|team_turnover|team_strengthened")]
    assert (quiet["people"] == 0).all()  # a denied, hedged or corrected departure is no departure
    texts = docs[docs["fund_id"].isin(quiet["fund_id"])]["text"]
    said = "did not leave|has not stepped down|퇴사하지 않았|사실이 아닌|not leaving|떠나지 않는|considering|may leave"
    assert texts.str.contains(said + "|이직설|떠날 수|not of this fund|이 펀드가 아니라").any()


def test_without_documents_there_are_no_facts_and_every_fund_names_its_company():
    funds, _ = synthetic.generate(SyntheticParams(n_funds=40))
    assert synthetic.qualitative_facts(SyntheticParams(n_funds=40)) is None
    assert "company" in funds.columns and funds["company"].str.endswith(("Asset Management", "자산운용")).all()
