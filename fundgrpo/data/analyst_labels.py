"""Analysts' decisions as labels: the latest decision per share class, read from the API's store
(SQLite by default, PostgreSQL by URL), written as a table DVC tracks, and laid over the export's
expert grades where the pipeline reads them (`evidence`, `prepare`).

The store is read, never written or created here: no store yet means no decisions. Each decision in
the store is whole (written in one transaction with its head and audit row), so the table never
holds a half-written one. The split is by fund id (fundgrpo/methodology/splits.py), so a decided
fund stays in its split: a decision on a test fund changes its label, not the test set.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pandas as pd

from fundgrpo.cli import StageError

COLUMNS = [
    "share_class_id",
    "grade",
    "analyst",
    "decided_at",
    "decision_id",
    "evaluation_id",
    "model_version",
    "reason",
]


def store_url(configured: str, root: Path | None = None) -> str:
    """FUNDGRPO_DB_URL in the environment wins (as for the API, which writes the decisions); a
    relative SQLite path is taken under `root`, by default the DVC workspace: `DVC_ROOT` when
    DVC sets it (`dvc exp run --queue` and `--temp` run stages in a copy under .dvc/tmp/exps/,
    where the store, which DVC does not track, is absent), else the current directory.

    >>> store_url("sqlite:///evaluations.db", Path("/ws"))
    'sqlite:////ws/evaluations.db'
    """
    url = os.environ.get("FUNDGRPO_DB_URL") or configured
    root = Path(os.environ.get("DVC_ROOT") or ".") if root is None else root
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return f"sqlite:///{(root / url[len('sqlite:///') :]).absolute()}"
    return url


def printable_url(url: str) -> str:
    import sqlalchemy as sa

    return sa.engine.make_url(url).render_as_string(hide_password=True)


def export(url: str) -> pd.DataFrame:
    """The latest decision of each share class in the store at `url` (empty when there is none)."""
    return _query(url, latest_only=True)


def _query(url: str, latest_only: bool) -> pd.DataFrame:
    import sqlalchemy as sa

    empty = pd.DataFrame(columns=COLUMNS)
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and (not parsed.database or not Path(parsed.database).exists()):
        return empty  # no API has run here: nothing decided (and no empty database made)
    engine = sa.create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("decisions"):
                return empty
            d = sa.Table("decisions", sa.MetaData(), autoload_with=conn)
            q = sa.select(d).order_by(d.c.share_class_id, d.c.id)
            if latest_only:
                q = q.where(d.c.id.in_(sa.select(sa.func.max(d.c.id)).group_by(d.c.share_class_id).scalar_subquery()))
            rows = conn.execute(q).mappings().all()
    except sa.exc.OperationalError as err:
        raise StageError(
            f"decisions: the store at {printable_url(url)} is unreachable ({str(err).splitlines()[0][:160]}); "
            "start it or set decisions.store_url / FUNDGRPO_DB_URL"
        ) from None
    finally:
        engine.dispose()
    return pd.DataFrame(
        [
            {
                "share_class_id": r["share_class_id"],
                "grade": int(r["new_grade"]),
                "analyst": r["analyst"],
                "decided_at": pd.Timestamp(r["created_at"]).isoformat(),
                "decision_id": int(r["id"]),
                "evaluation_id": int(r["evaluation_id"]),
                "model_version": r["model_version"],
                "reason": r["reason"],
            }
            for r in rows
        ],
        columns=COLUMNS,
    )


def missing_from_store(previous: pd.DataFrame, url: str) -> pd.DataFrame:
    """The rows of an earlier export (`previous`) whose decision the store at `url` does not hold
    (matched on decision id, share class and time, so another store's decision 7 is not ours).

    The store only grows: a decision the last export had and the store lacks means the store moved
    (another URL, a deleted or replaced file), and exporting would drop those labels.
    """
    if previous.empty:
        return previous
    held = export_all(url)
    key = ["decision_id", "share_class_id", "decided_at"]

    def keys(table: pd.DataFrame) -> list[tuple]:
        ids, classes = table["decision_id"].astype(int), table["share_class_id"].astype(str)
        return list(zip(ids, classes, table["decided_at"].astype(str)))

    have = set(keys(held))
    lost = [k not in have for k in keys(previous)]
    return previous.loc[lost, key + ["grade", "analyst"]]


def check_nothing_lost(table: Path, url: str) -> None:
    """A StageError when the decisions table at `table` holds decisions the store at `url` lacks:
    exporting would wipe those labels (the table is kept; the message names the way out)."""
    if not table.exists():
        return
    try:
        previous = read(table)
    except (StageError, ValueError) as err:  # edited by hand, cut short: never overwritten unseen
        raise StageError(
            f"decisions: {table} cannot be read as the decisions table ({str(err).splitlines()[0][:200]}); "
            "it is kept: restore it from git or DVC, or remove it to export afresh from the store"
        ) from None
    lost = missing_from_store(previous, url)
    if len(lost):
        first = lost.iloc[0]
        raise StageError(
            f"decisions: {table} holds {len(lost)} decision(s) the store at {printable_url(url)} does not "
            f"(first: decision {first['decision_id']} on {first['share_class_id']!r} by {first['analyst']}, "
            f"grade {first['grade']}); the table is kept. Point decisions.store_url (or FUNDGRPO_DB_URL) at "
            "the store that holds them, or remove the table to start over from this store"
        )


def decisions_since(url: str, when: datetime) -> int:
    """How many decisions the store at `url` holds made after `when` (0 when there is no store)."""
    table = export_all(url)
    if table.empty:
        return 0
    return int((pd.to_datetime(table["decided_at"], utc=True) > pd.Timestamp(when)).sum())


def export_all(url: str) -> pd.DataFrame:
    """Every decision in the store (each a row; a share class decided twice appears twice)."""
    return _query(url, latest_only=False)


def read(path: str | Path) -> pd.DataFrame:
    """The decisions table as the stage wrote it; a missing file is a clear error."""
    path = Path(path)
    if not path.exists():
        raise StageError(f"{path}: no decisions table; run `dvc repro decisions` (it is empty when none were made)")
    table = pd.read_csv(path, dtype={"share_class_id": str})
    missing = sorted(set(COLUMNS) - set(table.columns))
    if missing:
        raise StageError(f"{path}: columns {missing} missing; run `dvc repro decisions` again")
    return table


def apply(funds: pd.DataFrame, decisions: pd.DataFrame, grades: list[int], source: str = "decisions") -> pd.DataFrame:
    """`funds` with each decided share class's expert grade replaced by the analyst's, and the
    provenance of every grade: `label_source` ("export", "analyst" or None when unlabelled) and
    `label_decision_id`. Decisions on share classes outside `funds` change nothing.

    >>> funds = pd.DataFrame({"share_class_id": ["A", "B", "C"], "expert_grade": [3, None, 2]})
    >>> d = pd.DataFrame({"share_class_id": ["B", "Z"], "grade": [4, 1], "decision_id": [7, 8]})
    >>> out = apply(funds, d, [1, 2, 3, 4, 5])
    >>> out[["expert_grade", "label_source", "label_decision_id"]].values.tolist()
    [[3.0, 'export', <NA>], [4.0, 'analyst', 7], [2.0, 'export', <NA>]]
    """
    bad = decisions[~decisions["grade"].isin(grades)]
    if len(bad):
        row = bad.index[0] + 2  # the header is line 1
        raise StageError(
            f"{source}: line {row}, share class {bad['share_class_id'].iloc[0]!r}: grade {bad['grade'].iloc[0]} "
            f"is not a grade of the methodology {grades}"
        )
    out = funds.copy()
    by_id = decisions.set_index("share_class_id")
    ids = out["share_class_id"].astype(str)
    decided = ids.isin(by_id.index)
    source_col = pd.Series(None, index=out.index, dtype=object)
    source_col[out["expert_grade"].notna()] = "export"
    source_col[decided] = "analyst"
    out.loc[decided, "expert_grade"] = ids[decided].map(by_id["grade"]).astype(float).to_numpy()
    out["label_source"] = source_col
    out["label_decision_id"] = pd.Series(pd.NA, index=out.index, dtype="Int64")
    out.loc[decided, "label_decision_id"] = ids[decided].map(by_id["decision_id"]).astype(int).to_numpy()
    return out
