"""The canonical fund table: one row per share class.

Every source (screener export, NAV/return series, synthetic universe) is mapped
to these columns by `stages.ingest`. Units: returns, volatility, drawdown and
tracking error in percent (15.4 = 15.4 %), annualised; ratios plain; costs in
percent a year; fund size in millions of the fund currency; tenure and age in years.
The table a user maps an export to, with what reads each column: docs/columns.md
(generated from here by `python tools/canonical_columns.py`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "id" | "text" | "number" | "grade"
    low: float | None = None  # plausible range, checked by validation
    high: float | None = None
    description: str = ""
    unit: str = ""  # as the canonical table holds it (a profile's `ingest.scale` converts to it)


COLUMNS: tuple[Column, ...] = (
    Column("share_class_id", "id", description="unique row id (share class)"),
    Column("fund_id", "id", description="fund; share classes of one fund share it"),
    Column("name", "text", description="the share class's name (checked when a scored row's id is known)"),
    Column("category", "text", description="peer group"),
    Column("company", "text", description="the management company (its documents apply to every fund it runs)"),
    Column("return_1y", "number", -100, 1000, "annualised total return, 1 year", "%"),
    Column("return_3y", "number", -100, 1000, "annualised total return, 3 years", "%"),
    Column("return_5y", "number", -100, 1000, "annualised total return, 5 years", "%"),
    Column("return_10y", "number", -100, 1000, "annualised total return, 10 years", "%"),
    Column("volatility_3y", "number", 0, 300, "annualised standard deviation, 3 years", "%"),
    Column("sharpe_3y", "number", -20, 20, "Sharpe ratio, 3 years", "ratio"),
    Column("sortino_3y", "number", -50, 50, "Sortino ratio, 3 years", "ratio"),
    Column("max_drawdown_3y", "number", -100, 0, "maximum drawdown, 3 years (0 or below)", "%"),
    Column("tracking_error_3y", "number", 0, 300, "tracking error vs benchmark, 3 years", "%"),
    Column("information_ratio_3y", "number", -20, 20, "information ratio, 3 years", "ratio"),
    # Derived in ingest (fundgrpo/data/riskadjusted.py) where the return and volatility exist:
    # Morningstar's MRAR(2), return penalised by variance; 5y/10y use the 3-year volatility.
    Column("mrar_3y", "number", -100, 1000, "risk-adjusted return MRAR(2), 3 years (derived)", "%"),
    Column("mrar_5y", "number", -100, 1000, "risk-adjusted return MRAR(2), 5 years (derived, 3-year volatility)", "%"),
    Column(
        "mrar_10y", "number", -100, 1000, "risk-adjusted return MRAR(2), 10 years (derived, 3-year volatility)", "%"
    ),
    Column("alpha_3y", "number", -100, 100, "alpha, 3 years", "%"),
    Column("beta_3y", "number", -10, 10, "beta, 3 years", "ratio"),
    Column("r2_3y", "number", 0, 100, "R squared, 3 years", "%"),
    Column("ongoing_cost", "number", 0, 15, "ongoing charge (total expense ratio)", "% a year"),
    Column("fund_size", "number", 0, 1e9, "fund size (assets under management)", "millions of the fund currency"),
    Column("manager_tenure", "number", 0, 80, "the lead manager's tenure on the fund", "years"),
    Column("fund_age", "number", 0, 200, "time since the share class launched", "years"),
    Column(
        "risk_level",
        "number",
        1,
        7,
        "the fund's risk class as its documents state it (SRI / SRRI 1-7, a Korean "
        "investment risk grade 1-6): map it as the export numbers it",
        "class",
    ),  # fmt: skip
    Column("expert_grade", "grade", 1, 5, "the analysts' grade (label)", "grade"),
    Column("expert_score", "number", 0, 100, "the analysts' score, if they give one", "0-100"),
)

BY_NAME = {c.name: c for c in COLUMNS}
ID_COLUMNS = ("share_class_id", "fund_id")
NUMERIC = tuple(c.name for c in COLUMNS if c.kind in ("number", "grade"))
LABELS = ("expert_grade", "expert_score")
