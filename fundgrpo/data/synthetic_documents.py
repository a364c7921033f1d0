"""Qualitative facts, and the dated documents that carry them, for the SYNTHETIC universe.

Nothing here is real. Each fund and each management company gets hidden facts that the analysts
weigh in their grade, as three pillars, each -1 (lowers), 0 (neutral) or +1 (raises):

    people  (fund)     the lead manager left and was replaced (-), team turnover (-), the team strengthened (+)
    process (fund)     the portfolio drifted from its stated process (-), a disciplined process confirmed (+)
    parent  (company)  a regulator's sanction (-), an ownership change (-), a strong independent risk function (+)

A pillar with a lowering and a raising fact is neutral. A manager change also resets the fund's
`manager_tenure` to the time since the change (the number and the text agree, as in life).

Each fact is written, with probability `DOCUMENTED`, as a dated document (Korean for the Korean
companies, English for the others): a meeting note, news, a commentary, a company announcement.
What a reader must do to get each fact right, and the traps around the facts:

* read the fact in any of its phrasings, Korean or English (a keyword list misses some);
* ignore boilerplate: commentaries on the market that use the same vocabulary ("the team remains
  disciplined") and move no pillar;
* negation: "the lead manager did not leave" on a fund whose manager stayed (neutral);
* hedges: "is reportedly considering a move, nothing confirmed" (a rumour, neutral);
* order in time: an early report of a departure corrected by a later note (neutral: the latest
  word stands), and a cleared inquiry is not a sanction;
* who a fact concerns: a company's document applies to every fund it runs; a note on another fund
  of the company ("concerned the co-manager of X, not this fund") moves nothing here.

**Phrasings held out.** Of each fund-level fact's phrasings, the last `HELD_OUT` per language, and
the document kind "board_minutes", appear only in the documents of funds that `heldout(fund_id)`
says are validation or test funds; training funds never see them. Company documents use the
phrasings training funds see (a company runs funds of every split).

>>> from fundgrpo.params import SyntheticParams
>>> from fundgrpo.data import synthetic
>>> p = SyntheticParams(n_funds=40, documents=True)
>>> facts = draw_facts(synthetic.universe(p), p)
>>> sorted(facts.columns)[:4], set(facts["people"].unique()) <= {-1, 0, 1}
(['company', 'events', 'fund_id', 'manager_change_month'], True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from fundgrpo.params import SyntheticParams

PILLARS = ("people", "process", "parent")
DOCUMENTED = 0.9  # the share of facts some document states (analysts also learn things in person)
HELD_OUT = 2  # phrasings per fact and language seen only in validation and test funds' documents
WINDOW = 36  # documents are dated within the last 36 months of the horizon
HELD_OUT_KIND = "board_minutes"

# Probabilities of each fact (per fund or per company) and of each trap (per fund).
FUND_FACTS = {"manager_change": 0.12, "team_turnover": 0.08, "team_strengthened": 0.10,
              "process_drift": 0.10, "process_disciplined": 0.15}  # fmt: skip
COMPANY_FACTS = {"sanction": 0.20, "ownership_change": 0.15, "strong_risk": 0.25}
TRAPS = {"negation": 0.10, "hedge": 0.08, "correction": 0.05, "other_fund": 0.06, "cleared_inquiry": 0.15}
EFFECT = {"manager_change": ("people", -1), "team_turnover": ("people", -1), "team_strengthened": ("people", 1),
          "process_drift": ("process", -1), "process_disciplined": ("process", 1),
          "sanction": ("parent", -1), "ownership_change": ("parent", -1), "strong_risk": ("parent", 1)}  # fmt: skip

EN_BUYERS = ("Atlas Financial", "Crescent Holdings", "Pembroke Group")
KR_BUYERS = ("대한금융지주", "한성홀딩스", "동방생명")

# ---------------------------------------------------------------- phrasings
# Fields: {fund} {company} {old} {new} {mgr} {other} {buyer} {month}. Per fact and language, the
# last HELD_OUT phrasings are held out of training funds.
FACT_TEXT: dict[str, dict[str, tuple[str, ...]]] = {
    "manager_change": {
        "en": (
            "{old} has stepped down as lead manager of {fund}; {new} takes over.",
            "Following the departure of {old}, {new} was appointed lead portfolio manager of the fund.",
            "We were told that {old} resigned in {month}; day-to-day management has passed to {new}.",
            "{old} left the firm this spring, and {new} now runs the portfolio.",
            "{new} replaced {old} at the helm of {fund} after {old}'s exit.",
            "Change of portfolio manager: {old} out, {new} in, effective {month}.",
        ),
        "ko": (
            "{fund}의 책임운용역 {old}이(가) 사임하고 {new}이(가) 후임으로 선임되었다.",
            "{old} 운용역의 퇴사에 따라 {new} 운용역이 책임운용을 맡게 되었다.",
            "{month}부터 {fund}의 운용은 {old} 대신 {new} 운용역이 담당한다.",
            "{old} 운용역이 회사를 떠났으며 현재 포트폴리오는 {new} 운용역이 운용하고 있다.",
            "운용역 교체: {old} 운용역이 물러나고 {new} 운용역이 새로 부임했다.",
            "{old} 운용역이 경쟁사로 자리를 옮기면서 {fund}의 운용역이 {new}(으)로 바뀌었다.",
        ),
    },
    "team_turnover": {
        "en": (
            "Three of the five analysts supporting {fund} left during the year.",
            "The team has thinned out: the deputy manager and two analysts resigned.",
            "Staff turnover on the desk was high this year, with most of the research team replaced.",
            "Half of the analysts who covered the portfolio a year ago are gone.",
            "Several senior analysts departed, leaving the manager with a largely new team.",
            "Attrition hit the investment team hard; only one analyst remains from last year.",
        ),
        "ko": (
            "{fund}을(를) 지원하던 애널리스트 5명 중 3명이 올해 퇴사했다.",
            "부책임운용역과 애널리스트 2명이 잇따라 사직해 운용팀이 크게 약해졌다.",
            "올해 운용팀 인력 이탈이 많아 리서치 인력 대부분이 교체되었다.",
            "1년 전 포트폴리오를 담당하던 애널리스트의 절반이 회사를 떠났다.",
            "선임 애널리스트 여러 명이 이직해 운용역은 사실상 새 팀과 일하고 있다.",
            "운용팀 이직률이 높아 작년부터 남아 있는 애널리스트는 한 명뿐이다.",
        ),
    },
    "team_strengthened": {
        "en": (
            "Two experienced analysts joined the team supporting {fund} this year.",
            "The firm hired a deputy manager with fifteen years of sector experience for the fund.",
            "The research bench was strengthened with three senior hires.",
            "New analysts with long track records have joined, deepening the team.",
            "The manager now has a deputy of many years' standing and two additional analysts.",
            "A seasoned co-manager came on board, adding depth behind the lead manager.",
        ),
        "ko": (
            "올해 {fund} 운용팀에 경력 애널리스트 2명이 합류했다.",
            "회사는 업종 경력 15년의 부책임운용역을 새로 영입했다.",
            "선임급 인력 3명을 충원해 리서치 역량이 강화되었다.",
            "오랜 경력의 애널리스트들이 합류하면서 운용팀의 층이 두터워졌다.",
            "책임운용역 아래 경력 많은 부운용역과 애널리스트 2명이 보강되었다.",
            "노련한 공동운용역이 합류해 책임운용역을 뒷받침하게 되었다.",
        ),
    },
    "process_drift": {
        "en": (
            "The portfolio has drifted from its stated value discipline toward large growth names.",
            "A third of current holdings fall outside the universe the process says the fund invests in.",
            "Turnover doubled and the fund no longer follows the approach set out in its prospectus.",
            "The manager's stated process and the actual holdings disagree.",
            "Positions now look unlike the strategy's documented style; the process appears to have slipped.",
            "Style analysis shows the fund wandering away from its mandate over the past year.",
        ),
        "ko": (
            "포트폴리오가 표방한 가치투자 원칙에서 벗어나 대형 성장주 위주로 바뀌었다.",
            "현재 보유 종목의 3분의 1이 운용 원칙상 투자 대상이 아닌 종목이다.",
            "회전율이 두 배로 늘었고 투자설명서에 적힌 운용 방식을 더 이상 따르지 않는다.",
            "운용역이 설명한 운용 프로세스와 실제 보유 종목이 일치하지 않는다.",
            "최근 포지션은 문서화된 전략 스타일과 달라 프로세스가 흔들린 것으로 보인다.",
            "스타일 분석 결과 지난 1년간 펀드가 운용 목적에서 이탈하고 있다.",
        ),
    },
    "process_disciplined": {
        "en": (
            "Our review confirmed a consistent, repeatable process: the holdings match the stated approach.",
            "Every position we examined was sourced and sized exactly as the process describes.",
            "The investment process is well documented and applied with discipline across the portfolio.",
            "Portfolio construction followed the written process throughout the period under review.",
            "Holdings-based analysis shows the strategy doing precisely what it says, year after year.",
            "The checks we ran found the process applied consistently, with no exceptions to the rules.",
        ),
        "ko": (
            "실사 결과 일관되고 반복 가능한 프로세스가 확인되었고 보유 종목이 표방한 전략과 일치했다.",
            "검토한 모든 종목이 프로세스에 적힌 대로 발굴되고 비중이 정해졌다.",
            "투자 프로세스가 잘 문서화되어 있고 포트폴리오 전반에 규율 있게 적용되고 있다.",
            "검토 기간 내내 포트폴리오 구성이 문서화된 프로세스를 따랐다.",
            "보유 종목 분석 결과 전략이 해마다 표방한 그대로 운용되고 있다.",
            "점검 결과 운용 원칙에 예외 없이 프로세스가 일관되게 적용되고 있었다.",
        ),
    },
    "sanction": {
        "en": (
            "The regulator fined {company} for failing to manage conflicts of interest in its fund range.",
            "{company} received a formal warning and a penalty from the financial regulator after an inspection.",
            "Regulators sanctioned {company} over breaches of its own trading controls.",
        ),
        "ko": (
            "금융감독원은 {company}에 이해상충 관리 소홀을 이유로 과태료를 부과했다.",
            "{company}은(는) 검사 결과 금융당국으로부터 기관경고와 과징금 처분을 받았다.",
            "금융당국은 내부 매매통제 위반을 이유로 {company}에 제재 조치를 내렸다.",
        ),
    },
    "ownership_change": {
        "en": (
            "{company} agreed to be acquired by {buyer}; plans for the investment teams are not yet clear.",
            "{buyer} completed its purchase of {company}, and a restructuring of the fund range is expected.",
            "The sale of {company} to {buyer} has been announced; senior staff retention is uncertain.",
        ),
        "ko": (
            "{company}은(는) {buyer}에 인수되기로 했으며 운용조직 개편 계획은 아직 불투명하다.",
            "{buyer}이(가) {company} 인수를 마무리했고 펀드 라인업 구조조정이 예상된다.",
            "{company}의 {buyer} 매각이 발표되었으며 핵심 인력의 잔류 여부는 불확실하다.",
        ),
    },
    "strong_risk": {
        "en": (
            "{company}'s risk team is independent of portfolio management and reports directly to the board.",
            "At {company}, risk limits are monitored daily by a separate risk function with veto power.",
            "{company} runs monthly liquidity stress tests through a risk unit that reports to the chief executive.",
        ),
        "ko": (
            "{company}의 리스크관리팀은 운용본부와 분리되어 대표이사 직속으로 보고한다.",
            "{company}은(는) 독립된 리스크관리 조직이 운용 한도를 매일 점검하며 거부권을 가진다.",
            "{company}은(는) 리스크관리부서가 유동성 스트레스 테스트를 월 1회 실시한다.",
        ),
    },
}
TRAP_TEXT: dict[str, dict[str, tuple[str, ...]]] = {
    "negation": {
        "en": ("Contrary to market talk, {mgr} did not leave and remains lead manager of {fund}.",
               "{mgr} has not stepped down; the rumoured departure never happened."),
        "ko": ("시장의 소문과 달리 {mgr} 운용역은 퇴사하지 않았으며 계속 책임운용을 맡는다.",
               "{mgr} 운용역의 사임설은 사실이 아닌 것으로 확인되었다."),
    },
    "hedge": {
        "en": ("{mgr} is reportedly considering a move, though nothing has been confirmed.",
               "There is speculation that {mgr} may leave; the firm declined to comment."),
        "ko": ("{mgr} 운용역의 이직설이 돌고 있으나 확인된 바는 없다.",
               "{mgr} 운용역이 회사를 떠날 수 있다는 관측이 있으나 회사는 답변을 거부했다."),
    },
    "correction_early": {
        "en": ("{mgr} is leaving {fund}, according to people familiar with the matter.",),
        "ko": ("업계에 따르면 {mgr} 운용역이 {fund}을(를) 떠날 예정이다.",),
    },
    "correction_late": {
        "en": ("Correction to our earlier note: {mgr} is not leaving {fund}; that report was wrong.",),
        "ko": ("정정: 앞선 보도와 달리 {mgr} 운용역은 {fund}을(를) 떠나지 않는다.",),
    },
    "other_fund": {
        "en": ("Update to our earlier note: the departure we reported concerned the co-manager of {other}, "
               "not of this fund.",),
        "ko": ("앞선 메모 정정: 보고한 퇴사는 이 펀드가 아니라 {other}의 공동운용역에 관한 것이었다.",),
    },
    "cleared_inquiry": {
        "en": ("The regulator closed its inquiry into {company}'s fee disclosures without finding any breach.",),
        "ko": ("금융당국은 {company}의 보수 공시에 대한 조사를 위반 사항 없이 종결했다.",),
    },
}  # fmt: skip
BOILERPLATE: dict[str, tuple[str, ...]] = {
    "en": (
        "Markets were volatile over the quarter as rate expectations shifted.",
        "We remain disciplined in our approach and focus on quality companies at reasonable prices.",
        "The team continues to look for opportunities where valuations are attractive.",
        "Performance was driven mainly by stock selection in financials and industrials.",
        "We expect volatility to persist and keep the portfolio balanced.",
        "The fund's largest positions were unchanged over the period.",
    ),
    "ko": (
        "금리 전망이 바뀌면서 분기 중 시장 변동성이 컸다.",
        "운용팀은 합리적인 가격의 우량 기업에 집중하는 원칙을 유지하고 있다.",
        "밸류에이션이 매력적인 기회를 계속 찾고 있다.",
        "성과는 주로 금융과 산업재 업종의 종목 선택에서 나왔다.",
        "변동성이 이어질 것으로 보고 포트폴리오를 균형 있게 유지하고 있다.",
        "기간 중 상위 보유 종목에는 변화가 없었다.",
    ),
}
KINDS = {"manager_change": ("news", "meeting_note"), "team_turnover": ("meeting_note",),
         "team_strengthened": ("meeting_note", "commentary"), "process_drift": ("meeting_note",),
         "process_disciplined": ("meeting_note",), "sanction": ("news",), "ownership_change": ("news",),
         "strong_risk": ("company_note",)}  # fmt: skip


@dataclass(frozen=True)
class Written:
    """One synthetic document before it becomes a row of documents.csv."""

    key_kind: str  # share_class | fund | company
    key: str
    date: str
    kind: str
    language: str
    text: str
    heldout: bool  # written in a phrasing or kind training funds never see
    fact: str = ""  # the fact or trap it states ("" for boilerplate)
    sentence: str = ""  # the sentence that states it, verbatim in `text`


def company_of(name: str, korean: bool) -> str:
    """The management company of a synthetic fund, from the house its name starts with.

    >>> company_of("Meridian Global Equity Core Fund A Acc", False), company_of("한빛 코리아 성장 주식 A", True)
    ('Meridian Asset Management', '한빛자산운용')
    """
    if korean:
        return f"{name.split()[0]}자산운용"
    house = name.split(" Global")[0].split(" Korea")[0].split(" US")[0].split(" Emerging")[0]
    house = house.split(" Bond")[0].split(" Balanced")[0]
    return f"{house} Asset Management"


def draw_facts(share_classes: pd.DataFrame, params: SyntheticParams) -> pd.DataFrame:
    """One row per fund: its company, its pillars (-1/0/+1), the facts and traps drawn (`events`,
    `;`-joined) and the month index of a manager change (-1 when none)."""
    rng = np.random.default_rng([params.seed, 101])
    funds = share_classes.drop_duplicates("fund_id").reset_index(drop=True)
    companies = [str(c) for c in funds["company"]]
    company_facts = {c: [f for f, p in COMPANY_FACTS.items() if rng.random() < p] for c in sorted(set(companies))}
    rows = []
    for i, fund in funds.iterrows():
        facts = [f for f, p in FUND_FACTS.items() if rng.random() < p]
        traps = [t for t, p in TRAPS.items() if t != "cleared_inquiry" and rng.random() < p]
        if "manager_change" in facts:  # a manager who left is not also rumoured to stay
            traps = [t for t in traps if t not in ("negation", "hedge", "correction")]
        events = facts + company_facts[companies[i]]
        pillars = dict.fromkeys(PILLARS, 0)
        for event in events:
            pillar, sign = EFFECT[event]
            pillars[pillar] += sign
        change = int(rng.integers(params.n_months - WINDOW, params.n_months - 3)) if "manager_change" in facts else -1
        rows.append(
            {
                "fund_id": fund["fund_id"],
                "company": companies[i],
                **{p: int(np.sign(v)) for p, v in pillars.items()},
                "events": ";".join(events + traps),
                "manager_change_month": change,
            }
        )
    return pd.DataFrame(rows)


def qualitative_score(facts: pd.DataFrame) -> pd.Series:
    """The analysts' view of the three pillars on the 0-100 scale of a percentile: 50 neutral,
    each pillar's -1/+1 moving it by 40/3 (all three lowering: 10, all raising: 90).

    >>> qualitative_score(pd.DataFrame({"people": [0, -1, 1], "process": [0, -1, 1], "parent": [0, -1, 0]})).tolist()
    [50.0, 10.0, 76.7]
    """
    return (50.0 + 40.0 * facts[list(PILLARS)].mean(axis=1)).round(1)


def _date(rng: np.random.Generator, months: list[str], month: int) -> str:
    return f"{months[month]}-{int(rng.integers(1, 29)):02d}"


def write_documents(
    share_classes: pd.DataFrame, facts: pd.DataFrame, params: SyntheticParams, heldout: Callable[[str], bool]
) -> pd.DataFrame:
    """documents.csv's rows: document_id, share_class_id, fund_id, company (one key set), date, kind,
    language, text, and the generator's own `heldout` flag (dropped from the public file)."""
    rng = np.random.default_rng([params.seed, 102])
    months = [str(p) for p in pd.period_range(params.start, periods=params.n_months, freq="M")]
    written = company_documents(facts, rng, months, params.n_months - WINDOW)
    written += fund_documents(share_classes, facts, rng, months, params.n_months - WINDOW, heldout)
    return pd.DataFrame(
        [
            {
                "document_id": f"DOC{i + 1:05d}",
                "share_class_id": "",
                "fund_id": w.key if w.key_kind == "fund" else "",
                "company": w.key if w.key_kind == "company" else "",
                "date": w.date,
                "kind": w.kind,
                "language": w.language,
                "text": w.text,
                "heldout": w.heldout,
                "fact": w.fact,
                "sentence": w.sentence,
            }
            for i, w in enumerate(sorted(written, key=lambda w: (w.date, w.key)))
        ]
    )


def _pick(rng: np.random.Generator, options: tuple[str, ...], allow_heldout: bool, held: int) -> tuple[str, bool]:
    """One phrasing of a fact, and whether it is one of the last `held` (held out of training funds)."""
    n = len(options) if allow_heldout else len(options) - held
    k = int(rng.integers(0, n))
    return options[k], k >= len(options) - held


def company_documents(facts: pd.DataFrame, rng: np.random.Generator, months: list[str], first: int) -> list[Written]:
    """Each company's documented events (news of an ownership change, a sanction ...) and the cleared
    inquiries that move nothing, dated within the last `WINDOW` months."""
    written: list[Written] = []
    for company, group in facts.groupby("company", sort=True):
        language = "ko" if str(company).endswith("자산운용") else "en"
        buyers = KR_BUYERS if language == "ko" else EN_BUYERS
        events = {e for events in group["events"] for e in str(events).split(";") if e in COMPANY_FACTS}
        for event in sorted(events):
            if rng.random() < DOCUMENTED:
                text, _ = _pick(rng, FACT_TEXT[event][language], False, 0)
                fields = {"company": company, "buyer": buyers[int(rng.integers(0, len(buyers)))]}
                kind = KINDS[event][0]
                when = _date(rng, months, int(rng.integers(first, len(months))))
                sentence = text.format(**fields)
                written.append(
                    Written(
                        "company",
                        str(company),
                        when,
                        kind,
                        language=language,
                        text=sentence,
                        heldout=False,
                        fact=event,
                        sentence=sentence,
                    )
                )
        if rng.random() < TRAPS["cleared_inquiry"]:
            text = TRAP_TEXT["cleared_inquiry"][language][0].format(company=company)
            when = _date(rng, months, int(rng.integers(first, len(months))))
            written.append(
                Written(
                    "company",
                    str(company),
                    when,
                    "news",
                    language=language,
                    text=text,
                    heldout=False,
                    fact="cleared_inquiry",
                    sentence=text,
                )
            )
    return written


def fund_documents(
    share_classes: pd.DataFrame,
    facts: pd.DataFrame,
    rng: np.random.Generator,
    months: list[str],
    first: int,
    heldout: Callable[[str], bool],
) -> list[Written]:
    """Each fund's documented facts (in a phrasing held out of training for validation and test funds,
    sometimes), its traps (negations, hedges, news of another fund, a report corrected later) and its
    boilerplate commentaries."""
    names = share_classes.drop_duplicates("fund_id").set_index("fund_id")["name"]
    managers = share_classes.drop_duplicates("fund_id").set_index("fund_id")["manager"]
    written: list[Written] = []
    for _, row in facts.iterrows():
        fund_id = str(row["fund_id"])
        language = "ko" if str(row["company"]).endswith("자산운용") else "en"
        open_ = heldout(fund_id)  # a validation or test fund: every phrasing and kind
        pool = KR_MANAGERS_POOL if language == "ko" else EN_MANAGERS_POOL
        mgr = str(managers[fund_id])
        old = next(m for m in pool[int(rng.integers(0, len(pool))) :] + pool if m != mgr)
        siblings = facts[(facts["company"] == row["company"]) & (facts["fund_id"] != fund_id)]["fund_id"]
        other = str(names[siblings.iloc[0]]) if len(siblings) else "another fund"
        fields = {"fund": str(names[fund_id]), "company": row["company"], "old": old, "new": mgr, "mgr": mgr,
                  "other": other}  # fmt: skip
        for event in [e for e in str(row["events"]).split(";") if e]:
            written += _fund_event(event, row, fields, rng, months=months, first=first, language=language, open_=open_)
        for _ in range(int(rng.integers(1, 3))):  # the fund's own commentaries: boilerplate
            body = " ".join(rng.choice(BOILERPLATE[language], size=2, replace=False))
            when = _date(rng, months, int(rng.integers(first, len(months))))
            written.append(Written("fund", fund_id, when, "commentary", language=language, text=body, heldout=False))
    return written


def _fund_event(
    event: str, row: pd.Series, fields: dict, rng: np.random.Generator, months: list[str], first: int,
    language: str, open_: bool,
) -> list[Written]:  # fmt: skip
    """The documents one fund event leaves (none for an undocumented fact or a company's event)."""
    fund_id, n_months = str(row["fund_id"]), len(months)
    if event in FUND_FACTS and rng.random() < DOCUMENTED:
        month = int(row["manager_change_month"]) if event == "manager_change" else None
        month = int(rng.integers(first, n_months)) if month is None else month
        fields["month"] = months[month]
        text, held = _pick(rng, FACT_TEXT[event][language], open_, HELD_OUT)
        kind = KINDS[event][int(rng.integers(0, len(KINDS[event])))]
        if open_ and rng.random() < 0.2:
            kind, held = HELD_OUT_KIND, True
        sentence = text.format(**fields)
        body = _surround(sentence, language, rng)
        when = _date(rng, months, month)
        return [
            Written(
                "fund", fund_id, when, kind, language=language, text=body, heldout=held, fact=event, sentence=sentence
            )
        ]
    if event in ("negation", "hedge", "other_fund"):
        sentence = TRAP_TEXT[event][language][int(rng.integers(0, len(TRAP_TEXT[event][language])))]
        sentence = sentence.format(**fields)
        body = _surround(sentence, language, rng)
        when = _date(rng, months, int(rng.integers(first, n_months)))
        return [
            Written(
                "fund",
                fund_id,
                when,
                "news",
                language=language,
                text=body,
                heldout=False,
                fact=event,
                sentence=sentence,
            )
        ]
    if event == "correction":
        month = int(rng.integers(first, n_months - 2))
        out = []
        for part, later in (("correction_early", 0), ("correction_late", 1 + int(rng.integers(0, 2)))):
            body = TRAP_TEXT[part][language][0].format(**fields)
            when = _date(rng, months, month + later)
            out.append(
                Written(
                    "fund", fund_id, when, "news", language=language, text=body, heldout=False, fact=part, sentence=body
                )
            )
        return out
    return []


HIDDEN = ("heldout", "fact", "sentence")  # the generator's columns of `write_documents`, not the public file's
TRAP_PILLAR = {"negation": "people", "hedge": "people", "correction_late": "people", "other_fund": "people",
               "cleared_inquiry": "parent"}  # fmt: skip


def judgements(facts: pd.DataFrame, docs: pd.DataFrame) -> pd.DataFrame:
    """The analysts' judgement of each pillar of each fund with the sentences it rests on (what a firm's
    written evaluations hold): fund_id, criterion, judgement, document_id, quote.

    A pillar a fact moved cites the documents of the facts that moved it; a pillar left neutral by
    facts that cancel cites them all; a neutral pillar with only a trap (a denied, hedged or corrected
    departure, news of another fund, a cleared inquiry) cites the trap's latest sentence, judged 0. A
    pillar no document speaks to (an undocumented fact) gets no row: its evaluation says "not assessed".
    """
    by_fund = docs[docs["fund_id"] != ""].groupby("fund_id")
    by_company = docs[docs["company"] != ""].groupby("company")
    rows = []
    for _, fund in facts.iterrows():
        own = by_fund.get_group(fund["fund_id"]) if fund["fund_id"] in by_fund.groups else docs.iloc[:0]
        theirs = by_company.get_group(fund["company"]) if fund["company"] in by_company.groups else docs.iloc[:0]
        pool = pd.concat([own, theirs]).sort_values("date")
        for pillar in PILLARS:
            moving = pool[pool["fact"].map(lambda f: f in EFFECT and EFFECT[f][0] == pillar)]
            sign = int(fund[pillar])
            if sign:
                cited = moving[moving["fact"].map(lambda f: EFFECT[f][1] == sign)]
            elif len(moving):
                cited = moving
            else:
                cited = pool[pool["fact"].map(lambda f: TRAP_PILLAR.get(f) == pillar)].tail(1)
            for _, doc in cited.iterrows():
                rows.append({"fund_id": fund["fund_id"], "criterion": pillar, "judgement": sign,
                             "document_id": doc["document_id"], "quote": doc["sentence"]})  # fmt: skip
    return pd.DataFrame(rows, columns=["fund_id", "criterion", "judgement", "document_id", "quote"])


def _surround(sentence: str, language: str, rng: np.random.Generator) -> str:
    """The fact's sentence among boilerplate: before, after, or alone."""
    filler = str(rng.choice(BOILERPLATE[language]))
    where = int(rng.integers(0, 3))
    return [f"{filler} {sentence}", f"{sentence} {filler}", sentence][where]


# The universe's lead managers (`synthetic` draws each fund's); a departed one is one of them or of a
# few who run none of its funds now
EN_MANAGERS = ("Alice Hart", "Ben Okafor", "Clara Moss", "David Reyes", "Emma Lindqvist", "Farid Nasser",
               "Grace Chen", "Hugo Baptiste", "Isla Murray", "James Patel")  # fmt: skip
KR_MANAGERS = ("김지훈", "이서연", "박민준", "최유진", "정하늘", "강도윤")
EN_MANAGERS_POOL = [*EN_MANAGERS, "Karen Voss", "Liam Doyle"]
KR_MANAGERS_POOL = [*KR_MANAGERS, "윤서준", "장예린"]


def files(
    share_classes: pd.DataFrame, facts: pd.DataFrame, params: SyntheticParams, heldout: Callable[[str], bool]
) -> dict[str, pd.DataFrame]:
    """The tables the generator writes beside funds.csv: documents.csv (public), judgements.csv (the
    analysts' pillar judgements with their citations: a label, like expert_grade) and qualitative.csv
    (the hidden facts, and whether a fund's documents use a phrasing held out of training)."""
    docs = write_documents(share_classes, facts, params, heldout)
    facts = facts.assign(heldout=facts["fund_id"].isin(set(docs.loc[docs["heldout"], "fund_id"])))
    return {
        "documents.csv": docs.drop(columns=list(HIDDEN)),
        "judgements.csv": judgements(facts, docs),
        "qualitative.csv": facts,
    }
