"""The tables and words the dashboard's pages show, built without Streamlit (each tested here): a
table's columns in the page's language, times and versions short enough for narrow columns, the
API's refusals in words, and the few tables a page builds from a record.
"""

from __future__ import annotations

import pandas as pd

from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.report import FundRow

# A table's columns as the page names them in its language (the labels' keys): the history tables'.
COLUMN_WORDS = {
    "version": "version", "model": "model", "confidence": "confidence", "expert": "expert",
    "evaluation_id": "evaluation_id", "at": "at", "model_version": "version", "grade": "grade",
    "share_class_id": "share_class", "analyst": "analyst", "decided_at": "decided_at", "decision_id": "decision_id",
    "reason": "reason",
}  # fmt: skip


def short_time(value) -> str | None:
    """A stored time to the minute, in UTC, for a narrow column.

    >>> short_time("2026-11-03T09:30:12.5+09:00"), short_time(None)
    ('2026-11-03 00:30', None)
    """
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return None
    at = pd.Timestamp(str(value))
    at = at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")
    return at.strftime("%Y-%m-%d %H:%M")


def short_version(value) -> str | None:
    """A model version as `vN` when it is a registered one; a folder keeps its last part.

    >>> short_version("models:/fund-evaluator/12"), short_version("/ws/models/policy"), short_version(None)
    ('v12', 'policy', None)
    """
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return None
    text = str(value).rstrip("/")
    last = text.rsplit("/", 1)[-1]
    return f"v{last}" if text.startswith("models:/") and last.isdigit() else last


def refusal_words(detail) -> str:
    """The API's refusal in words: its text as it is, or FastAPI's list of field errors as
    "field: message" (never the raw JSON).

    >>> refusal_words([{"type": "value_error", "loc": ["body", "reason"],
    ...                 "msg": "Value error, reason is empty: say why the grade is what it is", "input": " "}])
    'reason: reason is empty: say why the grade is what it is'
    >>> refusal_words("based_on: decided since")
    'based_on: decided since'
    """
    if isinstance(detail, list):
        said = []
        for e in detail:
            where = ".".join(str(x) for x in (e.get("loc") or [])[1:]) if isinstance(e, dict) else ""
            msg = str(e.get("msg", e) if isinstance(e, dict) else e).removeprefix("Value error, ")
            said.append(f"{where}: {msg}" if where else msg)
        return "; ".join(said)
    return str(detail)


def dashes_for_missing(table: pd.DataFrame) -> pd.DataFrame:
    """A table for reading: missing values as a dash, never "None" (the cells become text).

    >>> dashes_for_missing(pd.DataFrame({"a": [1, None]}))["a"].tolist()
    [1.0, '—']
    """
    return table.astype(object).where(table.notna(), "—")


BOOK_TEXT = ["grade", "decided_grade", "decided_by", "evaluated_at", "source", "model_version", "review"]


def book_view(shown: pd.DataFrame, states: dict[str, str]) -> pd.DataFrame:
    """The book as its page shows it: each state in the page's words (`states`), times to the minute,
    versions as vN, and a dash for every missing value of a text column (never a grey "None").

    >>> row = dict.fromkeys(BOOK_TEXT)
    >>> shown = pd.DataFrame([{**row, "state": "not evaluated", "confidence": None},
    ...                       {**row, "state": "evaluated", "grade": 4, "evaluated_at": "2026-12-03T21:07:00+00:00",
    ...                        "model_version": "models:/fund-evaluator/1", "source": "backtest v1", "review": ""}])
    >>> view = book_view(shown.astype({"grade": "Int64"}), {"not evaluated": "평가 전", "evaluated": "평가됨"})
    >>> view[["state", *BOOK_TEXT]].values.tolist()  # doctest: +NORMALIZE_WHITESPACE
    [['평가 전', '—', '—', '—', '—', '—', '—', '—'],
     ['평가됨', '4', '—', '—', '2026-12-03 21:07', 'backtest v1', 'v1', '']]
    """
    view = shown.assign(
        state=shown["state"].map(states),
        evaluated_at=shown["evaluated_at"].map(short_time),
        model_version=shown["model_version"].map(short_version),
    )
    return view.assign(**dashes_for_missing(view[BOOK_TEXT]).astype(str))


def worded(table: pd.DataFrame, words: dict[str, str]) -> pd.DataFrame:
    """A table with its columns named in the page's language (`COLUMN_WORDS` into the labels `words`).

    >>> list(worded(pd.DataFrame(columns=["version", "other"]), {"version": "모델 버전"}).columns)
    ['모델 버전', 'other']
    """
    return table.rename(columns={c: words.get(COLUMN_WORDS.get(c, ""), c) for c in table.columns})


def latest_table(entry: dict, t: dict[str, str]) -> pd.DataFrame:
    """A share class's latest evaluation and decision (its row of the book) as two columns of words.

    >>> t = {k: k for k in ("model", "confidence", "states", "decided", "decided_by", "evaluated_at", "source",
    ...                     "version", "why", "reason", "state_decided")}
    >>> latest_table({"grade": 3, "state": "decided", "decided_grade": 4}, t).iloc[:4, 1].tolist()
    ['3', '—', 'state_decided', '4']
    """
    shown = {
        t["model"]: entry.get("grade"),
        t["confidence"]: entry.get("confidence"),
        t["states"]: t[f"state_{entry['state']}"],
        t["decided"]: entry.get("decided_grade"),
        t["decided_by"]: entry.get("decided_by"),
        t["evaluated_at"]: entry.get("evaluated_at"),
        t["source"]: entry.get("source"),
        t["version"]: entry.get("model_version"),
        t["why"]: entry.get("review"),
        t["reason"]: entry.get("reason"),
    }
    clean = {k: ("—" if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA else str(v))
             for k, v in shown.items()}  # fmt: skip
    return pd.DataFrame({"": list(clean), " ": list(clean.values())})


def grades_table(row: FundRow, t: dict[str, str], names: dict[str, str]) -> pd.DataFrame:
    """A tested share class's grade by each evaluator (`names`: the evaluators in words), the expert's first;
    not the untrained base, which no analyst weighs.

    >>> t = {"evaluator": "E", "expert": "Expert", "grade": "G", "confidence": "C"}
    >>> from fundgrpo.evaluation.report import FundRow, Graded
    >>> row = FundRow("A", "F", "Bond", 3, graded={"grpo": Graded(4, True, 0.6)})
    >>> grades_table(row, t, {"grpo": "Served"})["G"].tolist()
    [3, 4]
    """
    grades = [{t["evaluator"]: t["expert"], t["grade"]: row.expert_grade, t["confidence"]: None}]
    for key in ("grpo", "sft", "rule", "gbm"):
        if key in row.graded:
            g = row.graded[key]
            grades.append({t["evaluator"]: names[key], t["grade"]: g.grade, t["confidence"]: g.confidence})
    return pd.DataFrame(grades).astype({t["grade"]: "Int64"})


def queue_table(items: list[dict], names: dict[str, str], t: dict[str, str], labels: list[str]) -> pd.DataFrame:
    """The review queue as the page lists it: each item's share class, name (the universe's when the
    evaluation has none), grades, the label it trains with now (`labels`, in words) and why it is there."""
    return pd.DataFrame(
        [
            {
                t["share_class"]: e["share_class_id"],
                t["name"]: e.get("name") or names.get(e["share_class_id"], ""),
                t["model"]: e.get("grade"),
                t["confidence"]: e.get("confidence"),
                t["rule"]: e.get("rule_grade"),
                t["gbm"]: (e.get("evidence") or {}).get("gbm_grade"),
                t["label_now"]: label,
                t["why"]: "; ".join(e.get("why", [])),
            }
            for e, label in zip(items, labels)
        ]
    )


def served_lines(rule: DecisionRule | None, served: dict | None, t: dict[str, str]) -> list[str]:
    """What the served grade is (the decision rule's source, weights and name) and, from the backtest
    (`served`, `contest.served`'s block), how often it is gradient boosting's and who was right where it
    departs; nothing for a version registered before the choice was logged.

    >>> t = {"served_line": "{what}: {lm}/{gbm} ({rule})", "serves_stack": "stack", "served_test": "{same} {n}"}
    >>> served_lines(DecisionRule("stack", confidence="pooled", pool=(1.0, 1.0), chosen="s"), None, t)
    ['stack: 0.5/0.5 (s)']
    >>> served_lines(None, None, t)
    []
    """
    if rule is None and not served:
        return []
    w = rule.weights if rule else (served or {}).get("weights") or {}
    what = t.get(f"serves_{rule.serves if rule else (served or {}).get('serves')}", "?")
    name = (rule.chosen if rule else None) or (served or {}).get("chosen")
    lm, gbm = w.get("language_model", 1.0), w.get("gradient_boosting", 0.0)
    out = [t["served_line"].format(what=what, lm=lm, gbm=gbm, rule=name)]
    if served and served.get("equal_to_gbm_rule") is not None:
        d = served["departures"]
        out.append(
            t["served_test"].format(
                same=served["equal_to_gbm_rule"], n=d["n"], right=d["right"], gbm_right=d["gbm_right"]
            )
        )
    return out
