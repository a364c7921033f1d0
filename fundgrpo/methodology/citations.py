"""Evaluations that cite: the qualitative criteria judged from a fund's documents, each judgement
resting on sentences it names in them.

The prompt shows the readable documents numbered 1, 2, ... (newest first) with their sentences
numbered too (`prompt_block`). An answer's `pillars` holds, per qualitative criterion of the
methodology, a judgement on its scale (or "not assessed") and its evidence, a list of {"document",
"sentence"}: the numbers the prompt gave them, short to write whatever a firm's document ids look like;
served, a citation names the document's id and quotes the sentence. A citation is *verified* when it
names a sentence of a document the evaluation could read: one of this fund's, its share class's or its
company's, dated on or before the as-of date (what the prompt showed, in its order: the record's
`documents` column). Citing is extractive, so a verified citation quotes its document exactly; whether
it is the sentence that matters is `summary`'s `pertinent`. A judgement without a verified citation is
*unsupported*; "not assessed" carries none.

>>> docs = {"D1": "Markets were calm. The lead manager resigned in May.", "D2": "The firm was fined."}
>>> pillars = {"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]},
...            "parent": {"judgement": -1, "evidence": [{"document": 1, "sentence": 3}]}}
>>> c = check(pillars, docs, ("people", "process", "parent"))
>>> c.citations, c.verified, c.supported, c.missing
(2, 1, 1, 1)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

import pandas as pd

from fundgrpo.data.documents import Document, by_share_class, sentences, sentences_of
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.qualitative import NOT_ASSESSED
from fundgrpo.methodology.records import PromptRecord


@dataclass(frozen=True)
class Checked:
    """What the citation check found in one answer's pillars."""

    criteria: int  # qualitative criteria of the methodology
    missing: int  # criteria the answer does not judge at all (neither a judgement nor "not assessed")
    assessed: int  # criteria judged on the scale
    supported: int  # ... of them with at least one verified citation
    citations: int
    verified: int

    @property
    def verified_share(self) -> float | None:
        return self.verified / self.citations if self.citations else None

    @property
    def coverage(self) -> float:
        """The share of criteria judged with a verified citation or marked not assessed."""
        done = self.supported + (self.criteria - self.missing - self.assessed)
        return done / self.criteria if self.criteria else 1.0


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def document_of(item: Any, documents: dict[str, str]) -> str | None:
    """The id of the document a citation names by its number in the prompt (None: no such document).

    >>> document_of({"document": 2, "sentence": 1}, {"D9": "x", "D4": "y"}), document_of({"document": 3}, {"D9": "x"})
    ('D4', None)
    """
    number = _number(item.get("document")) if isinstance(item, dict) else None
    return list(documents)[number - 1] if number is not None and number <= len(documents) else None


def cited(item: Any, documents: dict[str, str]) -> str | None:
    """The sentence one citation names, if it names one of a readable document (else None).

    >>> cited({"document": 1, "sentence": 2}, {"D1": "Calm. The manager resigned."})
    'The manager resigned.'
    >>> [cited({"document": d, "sentence": n}, {"D1": "Calm."}) for d, n in ((2, 1), (1, 2), (1, True), ("D1", 1))]
    [None, None, None, None]
    """
    doc = document_of(item, documents)
    number = _number(item.get("sentence")) if doc is not None else None
    if doc is None or number is None:
        return None
    found = sentences(documents[doc])
    return found[number - 1] if number <= len(found) else None


def verified(item: Any, documents: dict[str, str]) -> bool:
    """One citation: a mapping naming a sentence of a readable document.

    >>> verified({"document": 1, "sentence": 1}, {"D1": "The manager resigned."})
    True
    >>> verified({"document": 2, "sentence": 1}, {"D1": "The manager resigned."})
    False
    """
    return cited(item, documents) is not None


def sentence_counts(row: PromptRecord) -> tuple[int, ...]:
    """How many sentences each document the row's prompt showed has, in the prompt's order: what its
    citations may name (`citable`). The row's `documents` column is that JSON object, id -> text.

    >>> shown = PromptRecord.example(documents='{"D9": "Calm. The manager left.", "D4": "Fined."}')
    >>> sentence_counts(shown), sentence_counts(PromptRecord.example())
    ((2, 1), ())
    """
    return tuple(len(sentences(text)) for text in json.loads(row.documents or "{}").values())


# A citation's number as an answer writes it: the key, then the digits so far, then what follows them
_NUMBER = re.compile(r'"(document|sentence)"\s*:\s*(\d*)(\S?)')


def citable(text: str, counts: Sequence[int]) -> bool:
    """Whether every citation number in `text`, an answer as far as it is written, is or can still become
    one the prompt showed: a document from 1 to len(counts), a sentence from 1 to that document's count.
    A number being written must already be one (a longer number only grows). A sentence whose document
    is not in `text` (cut off the front) is not judged. Greedy decoding takes the best token for which
    this holds (`fundgrpo.model.modelling.generate`), so a citation cannot name what the prompt lacks.

    >>> citable('{"document": 2, "sentence": 1', (3, 1)), citable('{"document": 1', (3, 1))
    (True, True)
    >>> citable('{"document": 3', (3, 1)), citable('{"document": 2, "sentence": 2', (3, 1))
    (False, False)
    >>> citable('{"document": "D1"', (3,)), citable('{"document": 01', (3,)), citable('"sentence": 9', (3,))
    (False, False, True)
    """
    document: int | None = None
    for key, digits, after in _NUMBER.findall(text):
        if not digits:
            if after:  # a string, a list or a word where a number belongs
                return False
            continue
        if key == "document":
            most = len(counts)
        elif document is None:
            continue
        else:
            most = counts[document - 1]
        if digits[0] == "0" or int(digits) > most:
            return False
        document = int(digits) if key == "document" else document
    return True


def check(pillars: Any, documents: dict[str, str], criteria: tuple[str, ...]) -> Checked:
    """The citation check of one answer's `pillars` against the documents the evaluation could read."""
    pillars = pillars if isinstance(pillars, dict) else {}
    missing = assessed = supported = citations = found = 0
    for cid in criteria:
        judged = pillars.get(cid)
        if not isinstance(judged, dict) or "judgement" not in judged:
            missing += 1
            continue
        evidence = judged["evidence"] if isinstance(judged.get("evidence"), list) else []
        ok = [verified(e, documents) for e in evidence]
        citations += len(ok)
        found += sum(ok)
        if judged["judgement"] != NOT_ASSESSED:
            assessed += 1
            supported += any(ok)
    return Checked(len(criteria), missing, assessed, supported, citations, found)


def reward(pillars: Any, documents: dict[str, str], criteria: tuple[str, ...]) -> float:
    """Half for the share of criteria covered (judged with a verified citation, or not assessed),
    half for the share of citations verified (1 when there are none to make).

    >>> reward({"people": {"judgement": "not assessed", "evidence": []}}, {}, ("people",))
    1.0
    >>> invented = {"judgement": 1, "evidence": [{"document_id": "X", "quote": "invented text"}]}
    >>> reward({"people": invented}, {}, ("people",))
    0.0
    """
    c = check(pillars, documents, criteria)
    share = c.verified_share if c.verified_share is not None else 1.0
    return round(0.5 * c.coverage + 0.5 * share, 4)


def directions(pillars: Any, reference: dict[str, Any]) -> list[bool]:
    """Per criterion the reference judges on its scale: did the answer judge it the same way?

    >>> directions({"people": {"judgement": -1}, "parent": {"judgement": 0}},
    ...            {"people": {"judgement": -1}, "parent": {"judgement": 1}, "process": {"judgement": "not assessed"}})
    [True, False]
    """
    pillars = pillars if isinstance(pillars, dict) else {}
    out = []
    for cid, ref in reference.items():
        if ref.get("judgement") == NOT_ASSESSED:
            continue
        got = pillars.get(cid)
        out.append(isinstance(got, dict) and got.get("judgement") == ref.get("judgement"))
    return out


@dataclass(frozen=True)
class Citation:
    """One sentence a judgement rests on, and whether the check found it in that document."""

    document_id: str
    quote: str
    verified: bool

    def as_dict(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "quote": self.quote, "verified": self.verified}


@dataclass(frozen=True)
class PillarJudgement:
    """One qualitative criterion as served: a judgement on its scale resting on at least one verified
    citation, or not assessed (`judgement` None) with the reason."""

    criterion: str
    judgement: int | None
    evidence: tuple[Citation, ...]
    reason: str | None  # why not assessed: no documents, the model said so, no sentence it cited exists

    @classmethod
    def from_dict(cls, p: dict[str, Any]) -> PillarJudgement:
        """Read back from `as_dict` (a stored evaluation's pillars).

        >>> p = PillarJudgement("people", -1, (Citation("D1", "left", True),), None)
        >>> PillarJudgement.from_dict(p.as_dict()) == p
        True
        """
        evidence = tuple(Citation(str(c["document_id"]), str(c["quote"]), bool(c["verified"])) for c in p["evidence"])
        judgement = None if p["judgement"] == NOT_ASSESSED else int(p["judgement"])
        return cls(str(p["criterion"]), judgement, evidence, p.get("reason"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "criterion": self.criterion,
            "judgement": NOT_ASSESSED if self.judgement is None else self.judgement,
            "evidence": [c.as_dict() for c in self.evidence],
            "reason": self.reason,
        }


# A judgement in words, per language: what a reader is shown beside the number
JUDGEMENT_WORDS = {
    "en": {
        -2: "lowers strongly",
        -1: "lowers",
        0: "neutral",
        1: "raises",
        2: "raises strongly",
        NOT_ASSESSED: NOT_ASSESSED,
    },
    "ko": {-2: "크게 하향", -1: "하향", 0: "중립", 1: "상향", 2: "크게 상향", NOT_ASSESSED: "평가 불가"},
}
NO_DOCUMENTS = "no documents"
SAID_NOT_ASSESSED = "no document speaks to it"
NOT_JUDGED = "the evaluation did not judge it"
NOT_FOUND = "no sentence it cited is in the fund's documents"


def judged(pillars: Any, documents: dict[str, str], m: Methodology) -> tuple[PillarJudgement, ...]:
    """The pillars an evaluation serves: each qualitative criterion's judgement where a quote of it was
    named in a document the evaluation could read (its quote that sentence); otherwise not assessed, never guessed.

    >>> from fundgrpo.methodology import compiler
    >>> m = compiler.load("methodology/documents.yaml")
    >>> said = {"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 1}]},
    ...         "parent": {"judgement": 1, "evidence": [{"document": 1, "sentence": 2}]}}
    >>> [(p.criterion, p.judgement, p.reason) for p in judged(said, {"D1": "The manager resigned."}, m)]
    [('people', -1, None), ('process', None, 'the evaluation did not judge it'), ('parent', None, "no sentence it cited is in the fund's documents")]
    >>> {p.reason for p in judged(said, {}, m)}
    {'no documents'}
    """  # noqa: E501
    pillars = pillars if isinstance(pillars, dict) else {}
    out = []
    for q in m.qualitative:
        said = pillars.get(q.id)
        said = said if isinstance(said, dict) else {}
        given = said.get("evidence")
        evidence = given if isinstance(given, list) else []
        named = [(e, cited(e, documents)) for e in evidence if isinstance(e, dict)]
        cites = tuple(
            Citation(
                document_of(e, documents) or f"document {e.get('document')}",
                found or f"sentence {e.get('sentence')}",
                found is not None,
            )
            for e, found in named
        )
        judgement = said.get("judgement")
        if not documents:
            out.append(PillarJudgement(q.id, None, (), NO_DOCUMENTS))
        elif judgement == NOT_ASSESSED:
            out.append(PillarJudgement(q.id, None, cites, SAID_NOT_ASSESSED))
        elif judgement not in q.judgements or isinstance(judgement, bool):
            out.append(PillarJudgement(q.id, None, cites, NOT_JUDGED))
        elif not any(c.verified for c in cites):
            out.append(PillarJudgement(q.id, None, cites, NOT_FOUND))
        else:
            out.append(PillarJudgement(q.id, int(judgement), cites, None))
    return tuple(out)


def within_budget(documents: list[Document], budget_chars: int) -> tuple[list[Document], int]:
    """The documents a prompt shows, newest first, within `budget_chars` of text; and how many were cut.

    >>> d = [Document(str(i), "fund", "F", f"2024-0{i}-01", "news", "en", "x" * 40) for i in range(1, 5)]
    >>> [x.document_id for x in within_budget(d, 100)[0]], within_budget(d, 100)[1]
    (['4', '3'], 2)
    """
    ordered = sorted(documents, key=lambda d: (d.date, d.document_id), reverse=True)
    out: list[Document] = []
    used = 0
    for doc in ordered:
        if used + len(doc.text) > budget_chars and out:
            break
        out.append(doc)
        used += len(doc.text)
    return out, len(ordered) - len(out)


def reference(m: Methodology, judgements: list[dict], readable: dict[str, str]) -> dict[str, Any]:
    """The reference answer's pillars: the analysts' judgement of each criterion citing the sentences
    they quote, where those documents are readable (`readable`: id -> text, in the prompt's order, which
    numbers them); "not assessed" where no readable document speaks.

    >>> from fundgrpo.methodology import compiler
    >>> m = compiler.load("methodology/documents.yaml")
    >>> said = [{"criterion": "people", "judgement": -1, "document_id": "D1", "quote": "Left."}]
    >>> ref = reference(m, said, {"D1": "Calm. Left."})
    >>> ref["people"], ref["process"]["judgement"]
    ({'judgement': -1, 'evidence': [{'document': 1, 'sentence': 2}]}, 'not assessed')
    """
    out: dict[str, Any] = {}
    for q in m.qualitative:
        rows = [j for j in judgements if j["criterion"] == q.id and j["document_id"] in readable]
        if rows:  # each quote checked at ingest: it gives at least one sentence
            number = {d: i for i, d in enumerate(readable, start=1)}
            evidence = [{"document": number[j["document_id"]], "sentence": n}
                        for j in rows for n in sentences_of(j["quote"], readable[j["document_id"]])]  # fmt: skip
            out[q.id] = {"judgement": int(rows[0]["judgement"]), "evidence": evidence}
        else:
            out[q.id] = {"judgement": NOT_ASSESSED, "evidence": []}
    return out


def documents_column(documents: list[Document]) -> str:
    """A record's `documents` column: the shown documents' texts by id, in the prompt's order (which
    numbers them), as JSON (what the check reads)."""
    return json.dumps({d.document_id: d.text for d in documents}, ensure_ascii=False)


PROMPT = {
    "en": {
        "head": "Documents, newest first",
        "cut": ", {n} older not shown",
        "none": "Documents: none",
        "ask": 'Judge {names} from the documents: {scale} or "not assessed", each citing document and sentence.',
    },
    "ko": {
        "head": "문서 (최신순",
        "cut": ", 이전 문서 {n}건 생략",
        "none": "문서: 없음",
        "ask": '문서를 근거로 {names}을(를) 평가: {scale} 또는 "not assessed", 문서 번호와 문장 번호를 함께.',
    },
}


@dataclass(frozen=True)
class Reading:
    """What an evaluation reads beyond the numbers: each share class's readable documents (newest
    first) and each fund's judgements by the analysts (for the reference answers)."""

    documents: dict[str, list[Document]]
    judgements: dict[str, list[dict]]
    budget_chars: int


def prompt_block(m: Methodology, docs: list[Document], cut: int) -> str:
    """The documents as the prompt shows them, what was cut, and what to judge from them.

    >>> from fundgrpo.methodology import compiler
    >>> m = compiler.load("methodology/documents.yaml")
    >>> print(prompt_block(m, [Document("D1", "fund", "F", "2024-03-01", "news", "en", "Calm. The manager left.")], 2))
    Documents, newest first, 2 older not shown:
    [1] 2024-03-01 news: (1) Calm. (2) The manager left.
    Judge People, Process, Parent from the documents: -1/0/1 or "not assessed", each citing document and sentence.
    """
    t = PROMPT[m.language]
    names = ", ".join(q.text(m.language) for q in m.qualitative)
    scale = "/".join(str(j) for j in m.qualitative[0].judgements)
    ask = t["ask"].format(names=names, scale=scale)
    if not docs:
        return f"{t['none']}\n{ask}"
    head = t["head"] + (t["cut"].format(n=cut) if cut else "") + (")" if m.language == "ko" else "") + ":"
    lines = [
        f"[{k}] {d.date} {d.kind}: " + " ".join(f"({i}) {x}" for i, x in enumerate(sentences(d.text), 1))
        for k, d in enumerate(docs, start=1)
    ]
    return "\n".join([head, *lines, ask])


def reading(
    documents: pd.DataFrame, judgements: pd.DataFrame, funds: pd.DataFrame, as_of: str | None, budget_chars: int
) -> Reading:
    """The `Reading` of `funds`: their documents readable as of `as_of`, the analysts' judgements by fund."""
    by_fund: dict[str, list[dict]] = {}
    judgements = judgements[judgements["fund_id"].astype(str).isin(set(funds["fund_id"].astype(str)))]
    for row in judgements.to_dict("records"):
        by_fund.setdefault(str(row["fund_id"]), []).append(row)
    return Reading(by_share_class(documents, funds, as_of), by_fund, budget_chars)


@dataclass(frozen=True)
class Tally:
    """One answer's pillars against one record's documents and the analysts' pillars."""

    checked: Checked  # the citation check (`check`)
    agree: dict[str, bool]  # per criterion the analysts judge on its scale: judged as they did
    cited: int  # verified citations on those criteria
    pertinent: int  # ... that are a sentence the analysts cite for that criterion


def tally(said: Any, row: PromptRecord, ids: tuple[str, ...]) -> Tally:
    """`said` (an answer's pillars) against `row` (a record with `documents` and reference `pillars`);
    `summary` adds these up over an evaluator's answers."""
    documents = json.loads(row.documents or "{}")
    reference_pillars = json.loads(row.pillars or "{}")
    agree: dict[str, bool] = {}
    cited = pertinent = 0
    for cid in ids:
        ref = reference_pillars.get(cid)
        if ref and ref.get("judgement") != NOT_ASSESSED:
            agree[cid] = directions(said, {cid: ref})[0]
            right = {(e["document"], e["sentence"]) for e in ref["evidence"]}
            mine = said.get(cid) if isinstance(said, dict) else None
            given = mine.get("evidence") if isinstance(mine, dict) else None
            ok = [e for e in given if verified(e, documents)] if isinstance(given, list) else []
            cited += len(ok)
            pertinent += sum((e["document"], e["sentence"]) in right for e in ok)
    return Tally(check(said, documents, ids), agree, cited, pertinent)


def summary(rows: list[PromptRecord], preds: Sequence[Prediction], m: Methodology) -> dict[str, Any]:
    """One evaluator's qualitative judgements over `rows` (records with `documents` and reference
    `pillars`): the citations made and verified, the verified ones *pertinent* (a sentence the analysts
    cite for that criterion, where they judge it), the criteria covered (judged with a verified
    citation, or not assessed), and the judgements that agree with the analysts', overall and per
    criterion.

    >>> m = __import__("fundgrpo.methodology.compiler", fromlist=["load"]).load("methodology/documents.yaml")
    >>> row = PromptRecord.example(documents='{"D1": "Calm. The lead manager resigned."}',
    ...        pillars='{"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]}}')
    >>> said = {"people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2},
    ...                                                   {"document": 1, "sentence": 1}]}}
    >>> s = summary([row], [Prediction(grade=2, written_grade=2, pillars=said)], m)
    >>> s["citations"], s["verified"], s["pertinent"], s["agree"], s["by_criterion"]["people"]
    (2, 1.0, 0.5, 1.0, {'judged_by_analysts': 1, 'agree': 1.0})
    """
    ids = tuple(q.id for q in m.qualitative)
    made = found = pertinent = judged_cites = 0
    covered: list[float] = []
    agree: dict[str, list[bool]] = {cid: [] for cid in ids}
    for row, pred in zip(rows, preds):
        t = tally(pred.pillars, row, ids)
        made, found = made + t.checked.citations, found + t.checked.verified
        covered.append(t.checked.coverage)
        for cid, same in t.agree.items():
            agree[cid].append(same)
        judged_cites, pertinent = judged_cites + t.cited, pertinent + t.pertinent
    together = [a for v in agree.values() for a in v]
    return {
        "evaluations": len(rows),
        "with_pillars": sum(isinstance(p.pillars, dict) for p in preds),
        "citations": made,
        "verified": round(found / made, 4) if made else None,
        "pertinent": round(pertinent / judged_cites, 4) if judged_cites else None,
        "covered": round(sum(covered) / len(covered), 4) if covered else None,
        "agree": round(sum(together) / len(together), 4) if together else None,
        "by_criterion": {
            cid: {"judged_by_analysts": len(v), "agree": round(sum(v) / len(v), 4) if v else None}
            for cid, v in agree.items()
        },
    }
