"""The fund page's qualitative half: each pillar's judgement beside the fund's documents, the sentences
it cites highlighted where they were found. Documents are the firm's text (and a client's): shown
escaped, never as markup."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pandas as pd
import streamlit as st

from fundgrpo.evaluation.report import FundRow
from fundgrpo.methodology.citations import (
    JUDGEMENT_WORDS,
    NO_DOCUMENTS,
    NOT_FOUND,
    NOT_JUDGED,
    SAID_NOT_ASSESSED,
    PillarJudgement,
    judged,
)
from fundgrpo.methodology.compiler import Methodology
from fundgrpo.methodology.records import PromptRecord

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Qualitative pillars",
        "pillar": "Pillar",
        "judgement": "Judgement",
        "evidence": "Cited",
        "documents": "Documents read",
        "not_assessed": "not assessed",
        "unverified": "no such sentence in the document",
        "no_documents": "No documents for this fund: its qualitative pillars are not assessed.",
        NO_DOCUMENTS: "no documents",
        SAID_NOT_ASSESSED: "no document speaks to it",
        NOT_JUDGED: "the evaluation did not judge it",
        NOT_FOUND: "no sentence it cited is in the fund's documents",
    },
    "ko": {
        "title": "정성 평가",
        "pillar": "항목",
        "judgement": "판단",
        "evidence": "인용 근거",
        "documents": "참고 문서",
        "not_assessed": "평가 불가",
        "unverified": "문서에 없는 문장",
        "no_documents": "이 펀드의 문서가 없어 정성 항목은 평가하지 않았습니다.",
        NO_DOCUMENTS: "문서 없음",
        SAID_NOT_ASSESSED: "해당 내용을 다룬 문서 없음",
        NOT_JUDGED: "평가하지 않음",
        NOT_FOUND: "인용한 문장이 펀드 문서에 없음",
    },
}


def highlight(text: str, quotes: list[str]) -> str:
    """`text` as safe HTML with each quote (whitespace aside) marked where it occurs.

    >>> highlight("The lead  manager left. <b>x</b>", ["lead manager left"])
    'The <mark>lead  manager left</mark>. &lt;b&gt;x&lt;/b&gt;'
    >>> highlight("a < b", [])
    'a &lt; b'
    """
    spans = []
    for quote in quotes:
        words = quote.split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(w) for w in words)
        spans += [m.span() for m in re.finditer(pattern, text)]
    out, at = [], 0
    for start, end in sorted(spans):
        if start < at:  # overlaps the one before: already marked
            continue
        out += [html.escape(text[at:start]), "<mark>", html.escape(text[start:end]), "</mark>"]
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


def rows(pillars: tuple[PillarJudgement, ...], m: Methodology, language: str) -> pd.DataFrame:
    """One row per pillar: its name, the judgement in words (or not assessed and why), what it cites."""
    w = WORDS[language]
    out = []
    for p in pillars:
        q = next(q for q in m.qualitative if q.id == p.criterion)
        said = (
            f"{w['not_assessed']} ({w.get(p.reason or '', p.reason)})"
            if p.judgement is None
            else f"{JUDGEMENT_WORDS[language].get(p.judgement, p.judgement)} ({p.judgement:+d})"
        )
        cited = " · ".join(
            f"[{c.document_id}] “{c.quote}”" + ("" if c.verified else f" ({w['unverified']})") for c in p.evidence
        )
        out.append({w["pillar"]: q.text(language), w["judgement"]: said, w["evidence"]: cited or "—"})
    return pd.DataFrame(out)


def pillars_of(
    row: FundRow | None, entry: dict, record: PromptRecord | None, m: Methodology
) -> tuple[PillarJudgement, ...]:
    """The pillars the page shows: the tested answer's (`row`, checked against the documents its prompt
    showed), else the latest stored evaluation's (`entry`: the API's list or the batch file's JSON)."""
    if row is not None:
        try:
            answer = json.loads(row.served.text or "{}")
        except json.JSONDecodeError:
            answer = {}
        said = answer.get("pillars") if isinstance(answer, dict) else None
        return judged(said, json.loads((record.documents if record else None) or "{}"), m)
    stored: Any = entry.get("pillars")
    if isinstance(stored, str) and stored:
        stored = json.loads(stored)
    if not isinstance(stored, list):
        return ()
    return tuple(PillarJudgement.from_dict(p) for p in stored if isinstance(p, dict) and "criterion" in p)


def section(
    pillars: tuple[PillarJudgement, ...], record: PromptRecord | None, documents: pd.DataFrame, m: Methodology
) -> None:
    """The pillars' table, then each document the evaluation read, newest first, cited sentences marked."""
    language = m.language if m.language in WORDS else "en"
    w = WORDS[language]
    st.subheader(w["title"])
    texts: dict[str, str] = json.loads((record.documents if record else None) or "{}")
    if not texts:
        st.info(w["no_documents"])
    if pillars:
        table = rows(pillars, m, language)
        st.dataframe(table, hide_index=True, width="stretch")
    if not texts:
        return
    quotes: dict[str, list[str]] = {}
    for p in pillars:
        for c in p.evidence:
            if c.verified:
                quotes.setdefault(c.document_id, []).append(c.quote)
    meta = documents.set_index("document_id") if not documents.empty else pd.DataFrame()
    st.markdown(f"**{w['documents']}**")
    for doc_id, text in texts.items():
        date = meta.at[doc_id, "date"] if doc_id in meta.index else ""
        kind = meta.at[doc_id, "kind"] if doc_id in meta.index else ""
        head = html.escape(" · ".join(str(x) for x in (doc_id, date, kind) if x))
        body = highlight(text, quotes.get(doc_id, []))
        st.markdown(f'<div class="fund-document"><small><b>{head}</b></small><br>{body}</div>', unsafe_allow_html=True)
