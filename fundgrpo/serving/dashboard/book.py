"""The book: every share class the firm knows, with its latest evaluation, decision and review state.

Three sources, read only: the validated universe (`validate.out`), the API's store (its latest
evaluation of each share class and the analysts' decisions), and the batch command's and the monthly
evaluation flow's files under `evaluate.out_dir` (`.parquet`, `.csv`, `.jsonl`; the newest
evaluation of a share class wins across the store and the files). A share class scored by the API
or a batch but not in the universe is in the book too, marked new.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fundgrpo.data import analyst_labels
from fundgrpo.evaluation.report import FundRow
from fundgrpo.serving import review

COLUMNS = [
    "share_class_id", "name", "category", "in_universe", "grade", "confidence", "needs_analyst", "review",
    "reason", "evaluated_at", "model_version", "source", "decided_grade", "decided_by", "state",
    "reasoning", "grade_note", "probabilities",
]  # fmt: skip
STATES = ("needs an analyst", "decided", "evaluated", "not evaluated")
EVALUATION = ["share_class_id", "name", "category", "grade", "confidence", "needs_analyst", "review",
              "reason", "evaluated_at", "model_version", "source", "reasoning", "grade_note",
              "probabilities"]  # fmt: skip
# what the fund page shows of an evaluation beside its grade: the text, the note on whose grade it is, and
# the probabilities (grade as text -> probability) its chart draws


def stored_latest(url: str) -> pd.DataFrame:
    """The latest evaluation of each share class in the API's store (empty without a store; none is made)."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and (not parsed.database or not Path(parsed.database).exists()):
        return pd.DataFrame(columns=EVALUATION)
    engine = sa.create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("evaluations"):
                return pd.DataFrame(columns=EVALUATION)
            t = sa.Table("evaluations", sa.MetaData(), autoload_with=conn)
            newest = sa.select(sa.func.max(t.c.id)).group_by(t.c.share_class_id).scalar_subquery()
            rows = conn.execute(sa.select(t).where(t.c.id.in_(newest))).mappings().all()
    finally:
        engine.dispose()
    out = []
    for r in rows:
        e = r["evaluation"] if isinstance(r["evaluation"], dict) else json.loads(r["evaluation"])
        at = pd.Timestamp(r["created_at"])
        out.append(
            {
                "share_class_id": str(r["share_class_id"]),
                "name": e.get("name"),
                "category": e.get("category"),
                "grade": e.get("grade"),
                "confidence": e.get("confidence"),
                "needs_analyst": bool(e.get("needs_analyst")),
                "review": "; ".join(e.get("review") or []),
                "reason": e.get("reason"),  # an invalid answer's: what the fund lacks, or the parser's word
                "evaluated_at": (at if at.tzinfo else at.tz_localize("UTC")).isoformat(),
                "model_version": r["model_version"],
                "source": "API",
                "reasoning": e.get("reasoning"),
                "grade_note": e.get("grade_note"),
                "probabilities": e.get("probabilities"),
            }
        )
    return pd.DataFrame(out, columns=EVALUATION)


def batch_latest(folder: Path) -> pd.DataFrame:
    """The latest evaluation of each share class in the batch files under `folder` (the batch
    command's and the evaluation flow's outputs); a file's rows date from its `evaluated_at`
    column, or from the file's time when it has none (files written before the column)."""
    frames = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".parquet", ".csv", ".jsonl")):
        try:
            table = _read(path)
        except Exception:  # noqa: BLE001 - a file that is not an evaluations table is not in the book
            continue
        if not {"share_class_id", "grade"} <= set(table.columns):
            continue
        when = pd.Timestamp(path.stat().st_mtime, unit="s", tz="UTC").isoformat(timespec="seconds")
        at = table["evaluated_at"] if "evaluated_at" in table else pd.Series(when, index=table.index)
        frames.append(
            pd.DataFrame(
                {
                    "share_class_id": table["share_class_id"].astype(str),
                    "name": table.get("name"),
                    "category": table.get("category"),
                    "grade": table["grade"],
                    "confidence": table.get("confidence"),
                    "needs_analyst": table.get("needs_analyst", pd.Series(False, index=table.index)).astype(bool),
                    "review": table.get("review", pd.Series("", index=table.index)).fillna("").astype(str),
                    "reason": table.get("reason"),
                    "evaluated_at": at.fillna(when).astype(str),
                    "model_version": table.get("model"),
                    "source": f"batch {path.relative_to(folder).as_posix()}",
                    "reasoning": table.get("reasoning"),
                    "grade_note": table.get("grade_note"),
                    "probabilities": probabilities(table),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=EVALUATION)
    every = pd.concat(frames, ignore_index=True)
    order = every["evaluated_at"].map(_utc)
    return every.loc[order.sort_values().index].groupby("share_class_id", as_index=False).tail(1)


def probabilities(table: pd.DataFrame) -> pd.Series:
    """A batch file's grade probabilities (columns p_<grade>) as one {grade: probability} per row, None
    where the row has none (an invalid answer, a fund not rated).

    >>> probabilities(pd.DataFrame({"p_1": [0.25, None], "p_2": [0.75, None]})).tolist()
    [{'1': 0.25, '2': 0.75}, None]
    """
    columns = [c for c in table.columns if str(c).startswith("p_") and str(c)[2:].isdigit()]
    out = []
    for _, row in table[columns].iterrows():
        found = {c[2:]: float(row[c]) for c in columns if pd.notna(row[c])}
        out.append(found or None)
    return pd.Series(out, index=table.index, dtype=object)


def _read(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".csv":
        return pd.read_csv(path, dtype={"share_class_id": str})
    return pd.read_json(path, lines=True, dtype={"share_class_id": str})


def assemble(
    universe: pd.DataFrame,
    stored: pd.DataFrame,
    batch: pd.DataFrame,
    decisions: pd.DataFrame,
    tested: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per share class in any source: its latest evaluation (the newest of the store's, the
    batch files' and, with `tested`, the shown version's backtest of its test funds, dated when the
    version was made), its latest decision, and its state: needs an analyst (the newest evaluation
    says so and no decision came after it), decided, evaluated, or not evaluated.

    >>> universe = pd.DataFrame({"share_class_id": ["A", "B", "C"], "name": ["Alpha", "Beta", "Gamma"],
    ...                          "category": ["Korea Equity"] * 3})
    >>> stored = pd.DataFrame([{"share_class_id": "A", "grade": 3, "confidence": 0.3, "needs_analyst": True,
    ...     "review": "confidence 0.30 below 0.50", "evaluated_at": "2026-11-02T00:00:00+00:00", "source": "API"},
    ...     {"share_class_id": "N", "name": "New", "category": "Bond", "grade": 4, "needs_analyst": True,
    ...      "review": "new to the universe", "evaluated_at": "2026-11-02T00:00:00+00:00", "source": "API"}])
    >>> batch = pd.DataFrame([{"share_class_id": "A", "grade": 2, "needs_analyst": False, "review": "",
    ...     "evaluated_at": "2026-11-01T00:00:00+00:00", "source": "batch x.csv"}])
    >>> decided = pd.DataFrame([{"share_class_id": "B", "grade": 5, "analyst": "ana",
    ...     "decided_at": "2026-11-03T00:00:00+00:00"}])
    >>> book = assemble(universe, stored, batch, decided).set_index("share_class_id")
    >>> int(book.loc["A", "grade"]), book.loc["A", "source"], book.loc["A", "state"]  # the store's is newer
    (3, 'API', 'needs an analyst')
    >>> int(book.loc["B", "decided_grade"]), book.loc["B", "decided_by"], book.loc["B", "state"], book.loc["C", "state"]
    (5, 'ana', 'decided', 'not evaluated')
    >>> book.loc["N", "name"], bool(book.loc["N", "in_universe"]), book.loc["N", "state"]
    ('New', False, 'needs an analyst')
    """
    sources = [f for f in (stored, batch, tested) if f is not None and len(f)]
    evaluated = pd.concat(sources, ignore_index=True) if sources else pd.DataFrame(columns=EVALUATION)
    if len(evaluated):
        order = evaluated["evaluated_at"].map(_utc)
        evaluated = evaluated.loc[order.sort_values().index].groupby("share_class_id", as_index=False).tail(1)
    base = universe.reindex(columns=["share_class_id", "name", "category"]).astype({"share_class_id": str})
    base["in_universe"] = True
    rows = base.merge(evaluated, on="share_class_id", how="outer", suffixes=("", "_evaluated"))
    for column in ("name", "category"):  # a new share class is named by its evaluation
        rows[column] = rows[column].fillna(rows.pop(f"{column}_evaluated"))
    rows["in_universe"] = rows["in_universe"].eq(True)
    latest = decisions.reindex(columns=["share_class_id", "grade", "analyst", "decided_at"]).astype(
        {"share_class_id": str}
    )
    latest = latest.rename(columns={"grade": "decided_grade", "analyst": "decided_by"})
    rows = rows.merge(latest, on="share_class_id", how="left")
    rows["state"] = [_state(r) for r in rows.to_dict("records")]
    for column in ("grade", "decided_grade"):
        rows[column] = pd.to_numeric(rows[column], errors="coerce").astype("Int64")  # 3, not 3.0
    return (
        rows.reindex(columns=COLUMNS).sort_values(["name", "share_class_id"], na_position="last").reset_index(drop=True)
    )


def _utc(text: str) -> pd.Timestamp:
    """A stored time as UTC (SQLite hands back times written in UTC without their zone).

    >>> str(_utc("2026-11-03T00:00:00")), str(_utc("2026-11-03T09:00:00+09:00"))
    ('2026-11-03 00:00:00+00:00', '2026-11-03 00:00:00+00:00')
    """
    at = pd.Timestamp(text)
    return at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")


def _state(row: dict) -> str:
    evaluated, decided = row.get("evaluated_at"), row.get("decided_at")
    after = isinstance(decided, str) and (not isinstance(evaluated, str) or _utc(decided) >= _utc(evaluated))
    if after:
        return "decided"
    if not isinstance(evaluated, str):
        return "decided" if isinstance(decided, str) else "not evaluated"
    return "needs an analyst" if row.get("needs_analyst") is True else "evaluated"


def needs_review(row: FundRow, rule) -> bool:
    """A tested fund an analyst should look at, by the review queue's rule (fundgrpo/serving/review.py).

    >>> from fundgrpo.params import EvaluateParams
    >>> from fundgrpo.evaluation.report import Graded
    >>> rule = EvaluateParams(review_below=0.5, disagree_by=2)
    >>> def row(**graded): return FundRow("A", "F", "Bond", 3, graded={"grpo": Graded(3, True, 0.9), **graded})
    >>> needs_review(row(grpo=Graded(3, True, 0.4)), rule), needs_review(row(rule=Graded(1)), rule)
    (True, True)
    >>> needs_review(row(gbm=Graded(2)), rule)
    False
    """
    served, methodology, gbm = (row.graded.get(k) for k in ("grpo", "rule", "gbm"))
    case = review.Case(
        row.share_class_id,
        grade=served.grade if served and served.valid else None,
        valid=served.valid if served else True,
        confidence=served.confidence if served else None,
        rule_grade=methodology.grade if methodology else None,
        gbm_grade=gbm.grade if gbm else None,
    )
    return bool(review.review_reasons(case, rule))


def backtest_evaluations(predictions: list[FundRow], when: str, version: str, rule) -> pd.DataFrame:
    """The shown version's backtest evaluations of its test funds, as the book holds evaluations
    (`book.EVALUATION`): a fund the Funds page grades is never "not evaluated" in the book. `when`:
    when the version was made; `version`: its name (`vN`, or the workspace's run).

    >>> from fundgrpo.params import EvaluateParams
    >>> rows = [FundRow.of({"share_class_id": "A", "fund_id": "F", "category": "Bond", "expert_grade": 4,
    ...          "grpo_grade": 4, "grpo_valid": True, "grpo_confidence": 0.9, "grpo_probs": [0.0, 0.0, 0.1, 0.9, 0.0],
    ...          "grpo_text": '{"grade": 4, "score": 80, "reasoning": "Above average."}'})]
    >>> e = backtest_evaluations(rows, "2026-11-03T00:00:00+00:00", "v2", EvaluateParams()).iloc[0]
    >>> int(e["grade"]), e["reasoning"], e["source"], e["probabilities"]["4"]
    (4, 'Above average.', 'backtest v2', 0.9)
    """
    out = []
    for r in predictions:
        try:
            answer = json.loads(r.served.text or "{}")
        except json.JSONDecodeError:
            answer = {}
        probs = r.served.probs
        out.append(
            {
                "share_class_id": str(r.share_class_id),
                "category": r.category,
                "grade": r.served.grade,
                "confidence": r.served.confidence,
                "needs_analyst": needs_review(r, rule),
                "review": "",
                "reason": r.served.reason,
                "evaluated_at": when,
                "model_version": version,
                "source": f"backtest {version}",
                "reasoning": answer.get("reasoning") if isinstance(answer, dict) else None,
                "grade_note": None,
                "probabilities": {str(i + 1): p for i, p in enumerate(probs)} if probs else None,
            }
        )
    return pd.DataFrame(out, columns=EVALUATION)


def search(book: pd.DataFrame, text: str = "", categories: list[str] | None = None, states: list[str] | None = None):
    """Rows whose name, category or share class contains `text` (any case), in `categories` and `states`.

    >>> b = pd.DataFrame({"share_class_id": ["K1", "U1"], "name": ["한국 성장", "UK Income"],
    ...                   "category": ["Korea Equity", "UK Equity"], "state": ["evaluated", "decided"]})
    >>> search(b, "korea")["share_class_id"].tolist(), search(b, "u1")["share_class_id"].tolist()
    (['K1'], ['U1'])
    >>> search(b, "", states=["decided"])["share_class_id"].tolist()
    ['U1']
    """
    keep = pd.Series(True, index=book.index)
    if text.strip():
        needle = text.strip().casefold()
        fields = ["name", "category", "share_class_id"] + (["category_data"] if "category_data" in book else [])
        hay = book[fields].fillna("").astype(str)
        keep &= hay.apply(lambda col: col.str.casefold().str.contains(needle, regex=False)).any(axis=1)
    if categories:
        keep &= book["category"].isin(categories)
    if states:
        keep &= book["state"].isin(states)
    return book[keep]


def sources(store_url: str, evaluations_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(the store's latest evaluations, the batch files' latest, the latest decisions) of a workspace."""
    return stored_latest(store_url), batch_latest(evaluations_dir), analyst_labels.export(store_url)


def read(
    universe: pd.DataFrame, store_url: str, evaluations_dir: Path, tested: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The book of a workspace (see the module docstring)."""
    return assemble(universe, *sources(store_url, evaluations_dir), tested)
