"""Stored evaluations and analysts' decisions (SQLAlchemy Core): SQLite by default, PostgreSQL by URL.

A decision is an analyst's grade for a share class, answering one stored evaluation. Each decision
is a new row (the latest wins); the `heads` table holds each share class's latest decision id and is
updated with a compare-and-set, so two analysts deciding the same fund at once cannot both win:
the second is told who decided first (a conflict) and decides again on what it now sees. The
decision, its head and its audit row are written in one transaction, committed before the analyst
is answered: an acknowledged decision survives a server kill, and a half-written one never exists.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone


def stamp(at: datetime) -> str:
    """ISO 8601 with the time zone: SQLite hands back naive datetimes of what was written in UTC.

    >>> stamp(datetime(2026, 11, 26, 9, 30)), stamp(datetime(2026, 11, 26, 9, 30, tzinfo=timezone.utc))
    ('2026-11-26T09:30:00+00:00', '2026-11-26T09:30:00+00:00')
    """
    return (at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)).isoformat()


class Conflict(Exception):
    """Someone decided (or published) this share class since what the analyst saw."""

    def __init__(self, latest: dict | None) -> None:
        self.latest = latest
        who = f"decision {latest['id']} by {latest['analyst']} at {latest['created_at']}" if latest else "none yet"
        super().__init__(f"the latest decision is {who}")


class Store:
    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        self.sa = sa
        self.engine = sa.create_engine(url, future=True, pool_pre_ping=True)
        meta = sa.MetaData()
        now = lambda name: sa.Column(name, sa.DateTime(timezone=True), nullable=False)  # noqa: E731
        self.table = sa.Table(
            "evaluations",
            meta,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("share_class_id", sa.String(200), index=True, nullable=False),
            sa.Column("model_version", sa.String(200), nullable=False),
            now("created_at"),
            sa.Column("evaluation", sa.JSON, nullable=False),
        )
        self.decisions = sa.Table(
            "decisions",
            meta,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("share_class_id", sa.String(200), index=True, nullable=False),
            sa.Column("evaluation_id", sa.Integer, sa.ForeignKey("evaluations.id"), nullable=False),
            sa.Column("model_version", sa.String(200), nullable=False),
            sa.Column("old_grade", sa.Integer, nullable=True),  # None: the answer was invalid
            sa.Column("new_grade", sa.Integer, nullable=False),
            sa.Column("reason", sa.Text, nullable=False),
            sa.Column("analyst", sa.String(200), nullable=False),  # the key's name
            now("created_at"),
        )
        self.heads = sa.Table(
            "decision_heads",
            meta,
            sa.Column("share_class_id", sa.String(200), primary_key=True),
            sa.Column("decision_id", sa.Integer, nullable=False),
        )
        self.audit = sa.Table(
            "audit_log",
            meta,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            now("at"),
            sa.Column("actor", sa.String(200), nullable=False),
            sa.Column("action", sa.String(50), nullable=False),
            sa.Column("share_class_id", sa.String(200), nullable=True),
            sa.Column("detail", sa.Text, nullable=False),
        )
        # Published ratings: immutable versions per share class (a re-rating is a new version, a
        # withdrawal a new state); what a client reads, never the drafts above.
        self.ratings = sa.Table(
            "ratings",
            meta,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("share_class_id", sa.String(200), nullable=False),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("state", sa.String(20), nullable=False),  # published | withdrawn
            sa.Column("grade", sa.Integer, nullable=True),  # None when withdrawn
            sa.Column("evaluation_id", sa.Integer, sa.ForeignKey("evaluations.id"), nullable=True),
            sa.Column("model_version", sa.String(200), nullable=True),
            sa.Column("methodology", sa.String(300), nullable=False),
            sa.Column("reviewer", sa.String(200), nullable=False),
            sa.Column("reason", sa.Text, nullable=True),  # why the grade differs from the draft's, or the withdrawal
            sa.Column("published", sa.JSON, nullable=False),  # what the client reads: text, pillars, label
            now("created_at"),
            sa.UniqueConstraint("share_class_id", "version"),  # two reviewers at once: the second conflicts
        )
        meta.create_all(self.engine)

    # -- evaluations

    def add(self, evaluations: list[dict], version: str) -> list[int]:
        """Store each evaluation (`evaluation.as_json`); its id is set on it (`evaluation_id`) and returned."""
        now = datetime.now(timezone.utc)
        ids = []
        with self.engine.begin() as conn:
            for r in evaluations:  # one insert each: portable ids on SQLite and PostgreSQL
                done = conn.execute(
                    self.table.insert().values(
                        share_class_id=r["share_class_id"], model_version=version, created_at=now, evaluation=r
                    )
                )
                ids.append(done.inserted_primary_key[0])  # type: ignore[index]  # set by every insert
        for r, i in zip(evaluations, ids):
            r["evaluation_id"] = i
        return ids

    def _evaluation(self, row) -> dict:
        return {
            **row["evaluation"],
            "evaluation_id": row["id"],
            "model_version": row["model_version"],
            "created_at": stamp(row["created_at"]),
        }

    def latest(self, share_class_id: str) -> dict | None:
        t = self.table
        with self.engine.connect() as conn:
            q = self.sa.select(t).where(t.c.share_class_id == share_class_id).order_by(t.c.id.desc()).limit(1)
            row = conn.execute(q).mappings().first()
        return None if row is None else self._evaluation(row)

    def evaluation(self, evaluation_id: int) -> dict | None:
        t = self.table
        with self.engine.connect() as conn:
            row = conn.execute(self.sa.select(t).where(t.c.id == evaluation_id)).mappings().first()
        return None if row is None else self._evaluation(row)

    def undecided(self) -> list[dict]:
        """The latest evaluation of each share class, unless a decision answered it or a later one."""
        sa, t, d = self.sa, self.table, self.decisions
        newest = sa.select(sa.func.max(t.c.id)).group_by(t.c.share_class_id).scalar_subquery()
        decided = sa.select(d.c.id).where(d.c.share_class_id == t.c.share_class_id, d.c.evaluation_id >= t.c.id)
        h = self.heads
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.id.in_(newest), ~sa.exists(decided))).mappings().all()
            latest = sa.select(h.c.share_class_id, d.c.id, d.c.new_grade, d.c.model_version).join(
                d, d.c.id == h.c.decision_id
            )
            heads = {r[0]: r[1:] for r in conn.execute(latest).all()}
        # each with the latest decision on its share class (an older evaluation's): its id for
        # `based_on`, its grade and the version the analyst answered (review.queue reads them)
        none = (None, None, None)
        return [
            {**self._evaluation(r), **dict(zip(("decision_id", "decided_grade", "decided_version"),
                                               heads.get(r["share_class_id"], none)))}
            for r in rows
        ]  # fmt: skip

    # -- decisions

    def _decision(self, row) -> dict:
        return {**dict(row), "created_at": stamp(row["created_at"])}

    def latest_decision(self, share_class_id: str, conn=None) -> dict | None:
        d = self.decisions
        q = self.sa.select(d).where(d.c.share_class_id == share_class_id).order_by(d.c.id.desc()).limit(1)
        if conn is None:
            with self.engine.connect() as conn:
                row = conn.execute(q).mappings().first()
        else:
            row = conn.execute(q).mappings().first()
        return None if row is None else self._decision(row)

    def decide(self, evaluation: dict, new_grade: int, reason: str, analyst: str, based_on: int | None) -> dict:
        """Record a decision on `evaluation` if the latest decision on its share class is still
        `based_on` (None: none yet); else raise Conflict. Decision, head and audit row commit together."""
        sa, d, h = self.sa, self.decisions, self.heads
        scid = evaluation["share_class_id"]
        now = datetime.now(timezone.utc)
        row = {
            "share_class_id": scid,
            "evaluation_id": evaluation["evaluation_id"],
            "model_version": evaluation["model_version"],
            "old_grade": evaluation.get("grade"),
            "new_grade": new_grade,
            "reason": reason,
            "analyst": analyst,
            "created_at": now,
        }
        try:
            with self.engine.begin() as conn:
                new_id = conn.execute(d.insert().values(**row)).inserted_primary_key[0]  # type: ignore[index]
                if based_on is None:
                    conn.execute(h.insert().values(share_class_id=scid, decision_id=new_id))  # IntegrityError if taken
                else:
                    moved = conn.execute(
                        h.update()
                        .where(h.c.share_class_id == scid, h.c.decision_id == based_on)
                        .values(decision_id=new_id)
                    )
                    if moved.rowcount != 1:
                        raise Conflict(self.latest_decision(scid, conn))
                detail = {k: v for k, v in row.items() if k not in ("created_at", "share_class_id")}
                conn.execute(
                    self.audit.insert().values(
                        at=now, actor=analyst, action="decide", share_class_id=scid,
                        detail=json.dumps({"decision_id": new_id, **detail}),
                    )
                )  # fmt: skip
        except sa.exc.IntegrityError:  # another analyst's first decision won the race
            raise Conflict(self.latest_decision(scid)) from None
        return {**row, "id": new_id, "created_at": now.isoformat()}

    # -- published ratings

    def _rating(self, row) -> dict:
        keep = ("share_class_id", "version", "state", "grade", "model_version", "methodology", "reviewer")
        return {**{k: row[k] for k in keep}, **row["published"], "published_at": stamp(row["created_at"])}

    def publish(self, share_class_id: str, state: str, grade: int | None, evaluation: dict | None, methodology: str,
                reviewer: str, reason: str | None, published: dict) -> dict:  # fmt: skip
        """A new version of `share_class_id`'s rating (the next number), with its audit row, in one
        transaction; two reviewers publishing at once: one wins, the other gets `Conflict`."""
        sa, r = self.sa, self.ratings
        now = datetime.now(timezone.utc)
        try:
            with self.engine.begin() as conn:
                last = conn.execute(sa.select(sa.func.max(r.c.version)).where(r.c.share_class_id == share_class_id))
                version = (last.scalar() or 0) + 1
                row = {
                    "share_class_id": share_class_id, "version": version, "state": state, "grade": grade,
                    "evaluation_id": evaluation["evaluation_id"] if evaluation else None,
                    "model_version": evaluation["model_version"] if evaluation else None, "methodology": methodology,
                    "reviewer": reviewer, "reason": reason, "published": published, "created_at": now,
                }  # fmt: skip
                conn.execute(r.insert().values(**row))
                detail = {k: row[k] for k in ("version", "state", "grade", "evaluation_id", "reason")}
                conn.execute(
                    self.audit.insert().values(at=now, actor=reviewer, action=state, share_class_id=share_class_id,
                                               detail=json.dumps(detail))
                )  # fmt: skip
        except sa.exc.IntegrityError:
            raise Conflict(None) from None
        return self._rating(row)

    def rating_history(self, share_class_id: str) -> list[dict]:
        """Every version of a share class's published rating, oldest first."""
        r = self.ratings
        with self.engine.connect() as conn:
            rows = conn.execute(
                self.sa.select(r).where(r.c.share_class_id == share_class_id).order_by(r.c.version)
            ).mappings()
            return [self._rating(row) for row in rows]

    def latest_ratings(self, share_class_ids: set[str] | None) -> list[dict]:
        """The latest version of each share class's rating (of `share_class_ids`; None: all), by share class."""
        sa, r = self.sa, self.ratings
        newest = sa.select(r.c.share_class_id, sa.func.max(r.c.version).label("v")).group_by(r.c.share_class_id)
        if share_class_ids is not None:
            newest = newest.where(r.c.share_class_id.in_(sorted(share_class_ids)))
        n = newest.subquery()
        q = sa.select(r).join(n, (r.c.share_class_id == n.c.share_class_id) & (r.c.version == n.c.v))
        with self.engine.connect() as conn:
            return [self._rating(row) for row in conn.execute(q.order_by(r.c.share_class_id)).mappings()]

    def list_decisions(self, share_class_id: str | None = None) -> list[dict]:
        d = self.decisions
        q = self.sa.select(d).order_by(d.c.id)
        if share_class_id is not None:
            q = q.where(d.c.share_class_id == share_class_id)
        with self.engine.connect() as conn:
            return [self._decision(r) for r in conn.execute(q).mappings().all()]

    def log(self, actor: str, action: str, share_class_id: str | None, detail: dict) -> None:
        """An audit row for something refused or done outside a decision."""
        with self.engine.begin() as conn:
            conn.execute(
                self.audit.insert().values(
                    at=datetime.now(timezone.utc), actor=actor, action=action, share_class_id=share_class_id,
                    detail=json.dumps(detail, default=str),
                )
            )  # fmt: skip

    def audit_log(self) -> list[dict]:
        a = self.audit
        with self.engine.connect() as conn:
            rows = conn.execute(self.sa.select(a).order_by(a.c.id)).mappings().all()
        return [{**dict(r), "at": stamp(r["at"]), "detail": json.loads(r["detail"])} for r in rows]

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(self.sa.text("SELECT 1"))
            return True
        except Exception:  # noqa: BLE001 - readiness reports any database failure as not ready
            return False
