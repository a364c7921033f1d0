"""What an evaluation claims, checked against the prompt it answered.

An evaluation's reasoning opens with a verdict (a grade's label from the methodology file, e.g.
"above average") and names criteria with where the fund stands among its peers ("Sharpe ratio top
30%"). Everything checkable is checked, per claim:

- the verdict: the label it opens with must be the label of the grade the answer gives;
- for each criterion (weighted or context) it names: data in the prompt at all ("absent" if not),
  the side (top / bottom against the percentile), the band ("top 30%" holds for a percentile of 70
  or more; "bottom 20%" for 20 or less), and any other number quoted there, which must be the
  percentile as the prompt shows it (rounded).

A claim is "right", "no side" (named without a side), "wrong" (side, band or number) or "absent"
(no data in the prompt); "wrong" and "absent" are misstatements. Words per language: `TOP_WORDS`,
`BOTTOM_WORDS` (prompts), the grade labels (the methodology file).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fundgrpo.methodology.compiler import (
    Methodology,
    example_methodology,  # noqa: F401 (the doctests')
)
from fundgrpo.methodology.prompts import BOTTOM_WORDS, TEXT, TOP_WORDS

MISSTATED = ("wrong", "absent")
# A clause ends at ";", ",", a line end, or a full stop that is not a decimal point.
_CLAUSE_END = re.compile(r"[;,\n]|\.(?!\d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _verdict(reasoning: str, m: Methodology, grade: int | None) -> dict | None:
    """The verdict claim: the longest grade label the reasoning opens with, against `grade`."""
    opening = reasoning.lstrip().lower()
    said = [(g, lab) for g, lab in m.verdicts().items() if opening.startswith(lab.lower())]
    if not said or grade is None:
        return None
    g, label = max(said, key=lambda s: len(s[1]))
    right = g == int(grade)
    status, why = ("right", "") if right else ("wrong", "verdict")
    return {"about": "verdict", "said": label, "status": status, "why": why}


def _methodology(reasoning: str, language: str, grade: int | None, rule_grade: int | None) -> dict | None:
    """The claim about the methodology's grade ("Methodology 3; raised by ..."): its number against
    `rule_grade`, and the direction it says the grade moved ("raised"/"lowered") against `grade`."""
    t = TEXT[language]
    head = t["methodology"].split("{grade}")[0].strip()
    said = re.search(rf"{re.escape(head)}\s*(\d+)", reasoning, flags=re.IGNORECASE)
    if not said:
        return None
    n = int(said.group(1))
    out = {"about": "methodology", "said": said.group(0), "status": "right", "why": ""}
    if rule_grade is not None and n != int(rule_grade):
        return {**out, "status": "wrong", "why": "methodology"}
    if grade is None:
        return out
    rest = reasoning[said.end() :]
    up, down = (t[k].split("{why}")[0].strip("; ").strip() in rest for k in ("raised", "lowered"))
    moved = (int(grade) > n) - (int(grade) < n)
    if (up and moved != 1) or (down and moved != -1):
        return {**out, "status": "wrong", "why": "direction"}
    return {**out, "status": "no side"} if moved and not (up or down) else out


def _criterion(clause: str, pct: float, language: str) -> tuple[str, str]:
    """(status, why) of one criterion's clause given its percentile."""
    top, bottom = TOP_WORDS[language], BOTTOM_WORDS[language]
    says_top, says_bottom = top in clause, bottom in clause
    if says_top == says_bottom:  # neither, or both
        side = None
    else:
        side = "top" if says_top else "bottom"
        if side != ("top" if pct >= 50 else "bottom"):
            return "wrong", "side"
    band = re.search(rf"(?:{re.escape(top)}|{re.escape(bottom)})\s*(\d+(?:\.\d+)?)\s*%?", clause)
    if band and side is not None:
        n = float(band.group(1))
        holds = pct >= 100 - n if side == "top" else pct <= n
        if not holds:
            return "wrong", "band"
    rest = clause[: band.start()] + clause[band.end() :] if band else clause
    rest = re.sub(r"\d+(?:\.\d+)?\s*%", "", rest)  # a share with no side to check it against
    for number in _NUMBER.findall(rest):
        if "." not in number and int(number) != round(pct):
            return "wrong", "number"
    return ("no side", "") if side is None else ("right", "")


def check(
    reasoning: str | None, pct: dict, m: Methodology, grade: int | None = None, rule_grade: int | None = None
) -> list[dict]:
    """Every checkable claim in `reasoning`: {"about": criterion id, "verdict" or "methodology",
    "said", "status", "why"}. `pct`: criterion id -> the percentile the prompt showed (None or NaN:
    no data); `grade`: the grade the answer gives (the verdict, and the direction it says the grade
    moved from the methodology's, are checked against it); `rule_grade`: the methodology's grade
    (what "Methodology N" must say).

    >>> r = example_methodology()
    >>> [(c["about"], c["status"], c["why"]) for c in check(
    ...     "Above average. Sharpe ratio top 10%; ongoing cost bottom 10%.", {"sharpe_3y": 79, "cost": 58}, r, 4)]
    [('verdict', 'right', ''), ('sharpe_3y', 'wrong', 'band'), ('cost', 'wrong', 'side')]
    >>> [(c["about"], c["status"]) for c in check("Excellent. Sharpe ratio top 30% (percentile 72); "
    ...     "manager tenure bottom 40", {"sharpe_3y": 72.4, "cost": 50, "tenure": 35}, r, 4)]
    [('verdict', 'wrong'), ('sharpe_3y', 'right'), ('tenure', 'right')]
    >>> [c["why"] for c in check("Sharpe ratio top 30% (percentile 75); ongoing cost top", {"sharpe_3y": 72}, r)]
    ['number', 'no data']
    >>> [(c["about"], c["status"], c["why"]) for c in check(
    ...     "Average. Sharpe ratio top 30%. Methodology 4; raised by manager tenure top 30%",
    ...     {"sharpe_3y": 72, "tenure": 8}, r, grade=3, rule_grade=4)][1:]
    [('methodology', 'wrong', 'direction'), ('sharpe_3y', 'right', ''), ('tenure', 'wrong', 'side')]
    """
    if not reasoning:
        return []
    out = []
    verdict = _verdict(reasoning, m, grade)
    if verdict:
        out.append(verdict)
    methodology = _methodology(reasoning, m.language, grade, rule_grade)
    if methodology:
        out.append(methodology)
    lowered = reasoning.lower()
    found = []
    labelled = [(m.label(c), c.id) for c in m.named]
    for label, cid in sorted(labelled, key=lambda c: -len(c[0])):  # "3-year Sharpe ratio" before "Sharpe ratio"
        at = lowered.find(label.lower())
        if at < 0:
            continue
        lowered = lowered[:at] + " " * len(label) + lowered[at + len(label) :]
        found.append((at, label, cid))
    for at, label, cid in sorted(found, key=lambda f: f[0]):
        clause = _CLAUSE_END.split(reasoning[at + len(label) :], maxsplit=1)[0]
        if _missing(pct.get(cid)):
            status, why = "absent", "no data"
        else:
            status, why = _criterion(clause, float(pct[cid]), m.language)
        out.append({"about": cid, "said": (label + clause).strip(), "status": status, "why": why})
    return out


def claims(reasoning: str | None, pct: dict, m: Methodology) -> dict[str, str]:
    """Each named criterion's status (`check`, without the verdict).

    >>> claims("Sharpe ratio bottom 20%", {"sharpe_3y": 85}, example_methodology())
    {'sharpe_3y': 'wrong'}
    """
    return {c["about"]: c["status"] for c in check(reasoning, pct, m) if c["about"] not in ("verdict", "methodology")}


def percentiles(evidence: str | dict) -> dict:
    """A record's `evidence` column (JSON or dict: criterion id -> percentile) as a dict."""
    return json.loads(evidence) if isinstance(evidence, str) else evidence


def misstated(
    reasoning: str | None, evidence: str | dict, m: Methodology, grade: int | None = None, rule_grade: int | None = None
) -> list[str]:
    """What a reasoning misstates: criteria without data or on the wrong side, band or number,
    "verdict" when its opening label is not its grade's, "methodology" when it misquotes the
    methodology's grade or says the grade moved the wrong way from it.

    >>> misstated("Excellent. Sharpe ratio top 10%", '{"sharpe_3y": 85}', example_methodology(), 4)
    ['verdict', 'sharpe_3y']
    >>> misstated(None, "{}", example_methodology())
    []
    """
    found = check(reasoning, percentiles(evidence), m, grade, rule_grade)
    return [c["about"] for c in found if c["status"] in MISSTATED]


# Credit per claim, times the criterion's weight (context metrics and the verdict: the smallest
# criterion weight). A misstatement costs twice what a right claim earns: citing less is never
# worse than citing wrongly, and one wrong claim outweighs a right one.
CLAIM_CREDIT = {"right": 1.0, "no side": 0.25, "wrong": -2.0, "absent": -2.0}


def score(reasoning: str, evidence: str | dict, m: Methodology, grade: int | None, rule_grade: int | None) -> float:
    """How complete and right a reasoning is, within -1..1: every checkable claim (`check`) earns
    `CLAIM_CREDIT` times its weight, normalised by the weight of the criteria a reference cites (the
    `cite_top` weightiest for the fund). A right verdict or methodology claim earns nothing (the
    grade is paid for elsewhere); a wrong one costs.

    >>> r, ev = example_methodology(), {"sharpe_3y": 85, "cost": 15}
    >>> score("Sharpe ratio top 20%", ev, r, 4, None), score("Sharpe ratio bottom 20%", ev, r, 4, None)
    (0.6, -1.0)
    """
    weights = {c.id: c.weight for c in m.criteria}
    floor = min(weights.values())
    pct = percentiles(evidence)
    got = 0.0
    for c in check(reasoning, pct, m, grade, rule_grade):
        credit = CLAIM_CREDIT[c["status"]]
        if c["about"] in ("verdict", "methodology"):
            credit = min(credit, 0.0)
        got += credit * weights.get(c["about"], floor)
    possible = sorted((weights[c] for c in pct if c in weights and not _missing(pct[c])), reverse=True)
    need = sum(possible[: m.cite_top]) or 1.0
    return round(min(1.0, max(-1.0, got / need)), 6)


def complete(reasoning: str | None, evidence: str | dict, m: Methodology) -> bool:
    """Does the reasoning cite, rightly, every criterion a reference cites for this fund (the
    `cite_top` whose percentiles pull the score furthest from the middle, by weight)?

    >>> r = example_methodology()
    >>> ev = {"sharpe_3y": 85, "cost": 15}
    >>> complete("Sharpe ratio top 20%; ongoing cost bottom 20%", ev, r), complete("Sharpe ratio top 20%", ev, r)
    (True, False)
    """
    pct = percentiles(evidence)
    said = claims(reasoning, pct, m)
    pull = {c.id: abs(pct[c.id] - 50) * c.weight for c in m.criteria if not _missing(pct.get(c.id))}
    need = min(m.cite_top, len(pull))
    if not need:
        return True
    # criteria tied with the last one a reference cites count as well (the percentiles are rounded)
    bar = sorted(pull.values(), reverse=True)[need - 1] - 1e-3
    return sum(said.get(cid) == "right" for cid, p in pull.items() if p >= bar) >= need


def summary(
    reasonings: list[str | None],
    evidence: list,
    m: Methodology,
    grades: list[int | None],
    rule_grades: list[int | None] | None = None,
) -> dict[str, Any]:
    """Per evaluator: claims made, the share misstated (band level), the share of answers with any
    misstatement, and the share of answers that are complete (`complete`); None-reasoning answers
    (invalid) count as incomplete and make no claim.

    >>> r = example_methodology()
    >>> summary(["Sharpe ratio top 20%; ongoing cost bottom 20%", "Sharpe ratio top 10%", None],
    ...         [{"sharpe_3y": 85, "cost": 15}] * 3, r, [4, 4, None])
    {'claims': 3, 'misstated_claims': 0.3333, 'misstated_answers': 0.3333, 'complete': 0.3333}
    """
    made = wrong = wrong_answers = whole = 0
    for text, ev, g, rule in zip(reasonings, evidence, grades, rule_grades or [None] * len(reasonings)):
        found = check(text, percentiles(ev), m, g, rule)
        made += len(found)
        bad = sum(c["status"] in MISSTATED for c in found)
        wrong += bad
        wrong_answers += bad > 0
        whole += bool(text) and complete(text, ev, m)
    n = len(reasonings)
    return {
        "claims": made,
        "misstated_claims": round(wrong / made, 4) if made else None,
        "misstated_answers": round(wrong_answers / n, 4) if n else None,
        "complete": round(whole / n, 4) if n else None,
    }
