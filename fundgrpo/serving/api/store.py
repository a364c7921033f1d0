"""Stored evaluations."""

from __future__ import annotations

from datetime import datetime, timezone


class Store:
    """Evaluations in a database (SQLAlchemy Core): SQLite by default, PostgreSQL by URL."""

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        self.sa = sa
        self.engine = sa.create_engine(url, future=True, pool_pre_ping=True)
        meta = sa.MetaData()
        self.table = sa.Table(
            "evaluations",
            meta,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("share_class_id", sa.String(200), index=True, nullable=False),
            sa.Column("model_version", sa.String(200), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("evaluation", sa.JSON, nullable=False),
        )
        meta.create_all(self.engine)

    def add(self, rows: list[dict], version: str) -> None:
        now = datetime.now(timezone.utc)
        with self.engine.begin() as conn:
            conn.execute(
                self.table.insert(),
                [
                    {
                        "share_class_id": r["share_class_id"],
                        "model_version": version,
                        "created_at": now,
                        "evaluation": r,
                    }
                    for r in rows
                ],
            )

    def latest(self, share_class_id: str) -> dict | None:
        t = self.table
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    self.sa.select(t).where(t.c.share_class_id == share_class_id).order_by(t.c.id.desc()).limit(1)
                )
                .mappings()
                .first()
            )
        if row is None:
            return None
        return {**row["evaluation"], "model_version": row["model_version"], "created_at": row["created_at"].isoformat()}

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(self.sa.text("SELECT 1"))
            return True
        except Exception:  # noqa: BLE001 - readiness reports any database failure as not ready
            return False
