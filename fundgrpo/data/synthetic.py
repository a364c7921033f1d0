"""A seeded SYNTHETIC fund universe: made-up funds, returns and analyst grades.

Nothing here is real data. It exists so the whole pipeline (ingest -> validate
-> train -> backtest) runs offline and reproducibly, with a label that is a
known (hidden) function of the features plus some analyst noise.

Model, per month t (decimals):

    benchmark[t, c] = rf/12 + beta_c * market[t] + category[t, c]
    gross[t, f]     = benchmark[t, c(f)] + alpha_f/12 + idio_f * z[t, f]
    net[t, s]       = gross[t, fund(s)] - fee_s/12

Share classes of a fund share the gross return and differ only by fee.
Each random component has its own seeded stream drawn month-major, so a longer
horizon (`simulate(params, n_months=96)`) repeats the first months exactly and
a `Regime` can shift only the months after its `start`.

>>> funds, returns = generate(SyntheticParams(n_funds=12, n_months=48))
>>> list(returns.columns)
['share_class_id', 'month', 'return', 'benchmark_return']
>>> bool(funds["expert_grade"].dropna().between(1, 5).all())
True
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fundgrpo.data import navmetrics, synthetic_documents
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.data.peers import percentile_within
from fundgrpo.io import atomic_path
from fundgrpo.params import SyntheticParams

RISK_FREE_RATE = 0.02  # annual; the same default as ReturnsSourceParams.risk_free_rate
MARKET_PREMIUM = 0.06  # annual excess return of the market factor
MARKET_VOL = 0.15  # annual
LATE_LAUNCH_SHARE = 0.30  # launched after the start: no 5-year history
YOUNG_SHARE = 0.05  # launched within the last 3 years: unrated, like real rating agencies
SQRT12 = np.sqrt(12.0)

# Random streams: one per component, so changing one never shifts another.
_UNIVERSE, _MARKET, _CATEGORY, _IDIO, _ANALYST = range(5)


@dataclass(frozen=True)
class CategoryModel:
    """How a category's funds behave (annual decimals; fee in % a year)."""

    beta: float
    vol: float  # category factor volatility
    premium: float  # category factor drift
    idio_vol: float  # typical fund-specific volatility
    skill: float  # std of fund alpha
    fee: float  # typical retail-class ongoing cost, %


CATEGORY_MODELS: dict[str, CategoryModel] = {
    "Global Equity": CategoryModel(1.00, 0.04, 0.000, 0.030, 0.020, 0.95),
    "Korea Equity": CategoryModel(0.90, 0.14, -0.010, 0.050, 0.030, 1.10),
    "US Large-Cap": CategoryModel(1.05, 0.03, 0.010, 0.025, 0.015, 0.80),
    "Emerging Markets": CategoryModel(1.10, 0.10, -0.005, 0.050, 0.030, 1.30),
    "Bond Aggregate": CategoryModel(0.05, 0.04, 0.005, 0.008, 0.005, 0.45),
    "Balanced": CategoryModel(0.55, 0.03, 0.005, 0.020, 0.012, 0.85),
}
DEFAULT_MODEL = CategoryModel(1.00, 0.06, 0.000, 0.035, 0.020, 1.00)  # any other category name

CLASS_FEE_FACTORS = (1.00, 0.55, 0.30)  # retail, institutional, clean/platform
EN_CLASSES = ("A Acc", "I Acc", "X Acc")
KR_CLASSES = ("A", "C", "S")
EN_HOUSES = (
    "Northbridge",
    "Aldermoor",
    "Castlegate",
    "Harrow & Lane",
    "Meridian",
    "Oakridge",
    "Silverfield",
    "Thamesbury",
)
EN_STYLES = ("Growth", "Value", "Income", "Core", "Opportunities", "Select")
KR_HOUSES = ("한빛", "미래로", "새솔", "누리", "다온", "한결", "푸른", "가온")
KR_STYLES = ("성장", "가치", "배당", "중소형", "대표", "인덱스")

# The PUBLISHED rule (methodology/default.yaml): within-category percentile, weight, higher is better.
GRADE_RULE: dict[str, tuple[float, bool]] = {
    "sharpe_3y": (0.35, True),
    "return_3y": (0.20, True),
    "max_drawdown_3y": (0.15, True),  # closer to 0 is better
    "ongoing_cost": (0.20, False),
    "information_ratio_3y": (0.10, True),
}
# The analysts' HIDDEN judgement, which the published rule only approximates (as with real
# analysts: Morningstar's stars agree with a rule proxy 63 % of the time on the shared export).
# They also weigh the manager's tenure (a "people" pillar); the methodology shows tenure in the
# prompt as context but does not score it, so a model can learn what the rule scorer cannot.
# Measured on the default universe (1,444 rated share classes, noise included): the rule scorer
# agrees with these grades on 44 % exactly, QWK 0.725.
TENURE_WEIGHT = 0.35
JUDGEMENT: dict[str, tuple[float, bool]] = {
    **{col: (w * (1 - TENURE_WEIGHT), higher) for col, (w, higher) in GRADE_RULE.items()},
    "manager_tenure": (TENURE_WEIGHT, True),
}
GRADE_CUTS = (10.0, 32.5, 67.5, 90.0)  # score cut-offs: 10/22.5/35/22.5/10 % of funds


@dataclass(frozen=True)
class Regime:
    """A shift applied from month index `start` (0-based on the simulated axis) on.

    Small on purpose: enough to simulate drift (a volatility spike, a category
    collapse, fee cuts) for monitoring.
    """

    start: int = 0
    vol_multiplier: float = 1.0  # scales every random shock
    category_shock: dict[str, float] = field(default_factory=dict)  # category -> monthly return shift
    fee_cut: float = 0.0  # share of every fee removed (0.2 = fees 20 % lower)


def _rng(params: SyntheticParams, stream: int) -> np.random.Generator:
    return np.random.default_rng([params.seed, stream])


def _model(category: str) -> CategoryModel:
    return CATEGORY_MODELS.get(category, DEFAULT_MODEL)


def month_labels(start: str, n_months: int) -> list[str]:
    """'YYYY-MM' labels of the time axis.

    >>> month_labels("2019-11", 3)
    ['2019-11', '2019-12', '2020-01']
    """
    return [str(p) for p in pd.period_range(start, periods=n_months, freq="M")]


# ------------------------------------------------------------------ universe


def _fund_names(categories: np.ndarray, rng: np.random.Generator) -> list[str]:
    """A distinct base name per fund (Korean for Korea Equity, English otherwise)."""
    pools: dict[str, list[tuple[str, str]]] = {}
    used: dict[str, int] = {}
    names = []
    for cat in categories:
        korean = cat == "Korea Equity"
        if cat not in pools:
            houses, styles = (KR_HOUSES, KR_STYLES) if korean else (EN_HOUSES, EN_STYLES)
            combos = list(itertools.product(houses, styles))
            pools[cat] = [combos[i] for i in rng.permutation(len(combos))]
            used[cat] = 0
        house, style = pools[cat][used[cat] % len(pools[cat])]
        round_ = used[cat] // len(pools[cat])  # past the pool: number the repeats
        used[cat] += 1
        base = f"{house} 코리아 {style} 주식" if korean else f"{house} {cat} {style} Fund"
        names.append(base if round_ == 0 else f"{base} {round_ + 1}")
    return names


def _launches(n_funds: int, n_months: int, rng: np.random.Generator) -> np.ndarray:
    """Launch month index per fund: most at the start, some later, a few young."""
    u = rng.random(n_funds)
    late = rng.integers(1, max(2, n_months - 36), n_funds)  # still 3 years of history
    young = rng.integers(max(1, n_months - 35), max(2, n_months - 12), n_funds)  # < 3 years
    return np.where(u < YOUNG_SHARE, young, np.where(u < YOUNG_SHARE + LATE_LAUNCH_SHARE, late, 0))


def universe(params: SyntheticParams) -> pd.DataFrame:
    """One row per share class, with the hidden simulation inputs (`alpha`, `idio_vol`, `launch`).

    >>> u = universe(SyntheticParams(n_funds=6, max_share_classes=2))
    >>> int(u.groupby("fund_id")["category"].nunique().max())  # classes share the fund's category
    1
    """
    rng = _rng(params, _UNIVERSE)
    n = params.n_funds
    cats = np.array([params.categories[i % len(params.categories)] for i in range(n)])
    cats = cats[rng.permutation(n)]  # balanced category sizes, random order
    models = [_model(c) for c in cats]
    n_classes = rng.integers(1, params.max_share_classes + 1, n)
    launch = _launches(n, params.n_months, rng)
    alpha = rng.normal(0.0, [m.skill for m in models])
    idio = np.array([m.idio_vol for m in models]) * rng.lognormal(0.0, 0.3, n)
    base_fee = np.array([m.fee for m in models]) * rng.lognormal(0.0, 0.25, n)
    size = np.round(rng.lognormal(np.log(300.0), 1.2, n), 1)
    age_years = (params.n_months - launch) / 12.0
    tenure = np.round(rng.uniform(0.2, 1.0, n) * np.minimum(age_years, 20.0) + 0.1, 1)
    manager_pick = rng.random(n)
    names = _fund_names(cats, rng)

    rows = []
    for i in range(n):
        korean = cats[i] == "Korea Equity"
        managers = synthetic_documents.KR_MANAGERS if korean else synthetic_documents.EN_MANAGERS
        labels = KR_CLASSES if korean else EN_CLASSES
        for k in range(int(n_classes[i])):
            factor = CLASS_FEE_FACTORS[k % len(CLASS_FEE_FACTORS)]
            label = labels[k % len(labels)] + ("" if k < len(labels) else f"{k // len(labels) + 1}")
            rows.append(
                {
                    "share_class_id": f"SYN{i + 1:04d}{chr(ord('A') + k)}",
                    "fund_id": f"SYNF{i + 1:04d}",
                    "name": f"{names[i]} {label}",
                    "category": cats[i],
                    "manager": managers[int(manager_pick[i] * len(managers))],
                    "company": synthetic_documents.company_of(names[i], korean),
                    "launch": int(launch[i]),
                    "ongoing_cost": round(float(base_fee[i]) * factor, 2),
                    "fund_size": float(size[i]),
                    "manager_tenure": float(tenure[i]),
                    "alpha": float(alpha[i]),
                    "idio_vol": float(idio[i]),
                }
            )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------- returns


def _regime_arrays(
    regime: Regime | None, n_months: int, categories: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-month shock scale, per-month-and-category shift, per-month fee factor."""
    scale = np.ones(n_months)
    shift = np.zeros((n_months, len(categories)))
    fee_factor = np.ones(n_months)
    if regime is not None:
        after = np.arange(n_months) >= regime.start
        scale[after] = regime.vol_multiplier
        fee_factor[after] = 1.0 - regime.fee_cut
        for j, cat in enumerate(categories):
            shift[after, j] = regime.category_shock.get(cat, 0.0)
    return scale, shift, fee_factor


def simulate(
    params: SyntheticParams,
    n_months: int | None = None,
    regime: Regime | None = None,
    share_classes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Long monthly returns: share_class_id, month, return, benchmark_return (decimals).

    `share_classes` defaults to `universe(params)`; rows start at each launch.

    >>> p = SyntheticParams(n_funds=4, n_months=24)
    >>> a, b = simulate(p), simulate(p, n_months=30)
    >>> bool(np.allclose(a["return"], b[b["month"] <= a["month"].max()]["return"]))
    True
    """
    n_months = params.n_months if n_months is None else n_months
    sc = universe(params) if share_classes is None else share_classes
    cats = params.categories
    cat_index = {c: j for j, c in enumerate(cats)}
    models = [_model(c) for c in cats]
    scale, shift, fee_factor = _regime_arrays(regime, n_months, cats)

    market = MARKET_PREMIUM / 12 + MARKET_VOL / SQRT12 * _rng(params, _MARKET).standard_normal(n_months) * scale
    z_cat = _rng(params, _CATEGORY).standard_normal((n_months, len(cats)))
    category = (
        np.array([m.premium for m in models]) / 12
        + np.array([m.vol for m in models]) / SQRT12 * z_cat * scale[:, None]
        + shift
    )
    benchmark = RISK_FREE_RATE / 12 + np.outer(market, [m.beta for m in models]) + category  # months x cats

    funds = sc.drop_duplicates("fund_id").reset_index(drop=True)
    z_fund = _rng(params, _IDIO).standard_normal((n_months, len(funds)))
    fund_cat = funds["category"].map(cat_index).to_numpy()
    gross = (
        benchmark[:, fund_cat]
        + funds["alpha"].to_numpy() / 12
        + funds["idio_vol"].to_numpy() / SQRT12 * z_fund * scale[:, None]
    )  # months x funds

    fund_col = sc["fund_id"].map({f: i for i, f in enumerate(funds["fund_id"])}).to_numpy()
    fees = np.outer(fee_factor, sc["ongoing_cost"].to_numpy() / 100.0)  # months x classes
    net = gross[:, fund_col] - fees / 12
    bench = benchmark[:, sc["category"].map(cat_index).to_numpy()]

    months = np.array(month_labels(params.start, n_months))
    live = np.arange(n_months)[:, None] >= sc["launch"].to_numpy()[None, :]
    cls_idx, month_idx = np.nonzero(live.T)  # class-major, so each series is contiguous
    return pd.DataFrame(
        {
            "share_class_id": sc["share_class_id"].to_numpy()[cls_idx],
            "month": months[month_idx],
            # Rounded so the CSV holds exactly what the grades were computed from.
            "return": np.round(net[month_idx, cls_idx], 8),
            "benchmark_return": np.round(bench[month_idx, cls_idx], 8),
        }
    )


# -------------------------------------------------------------------- grades


def grade_from_score(score: pd.Series) -> pd.Series:
    """Grade 1..5 from a 0-100 score by the `GRADE_CUTS` (NaN stays missing).

    >>> grade_from_score(pd.Series([0.0, 10.0, 50.0, 89.9, 90.0, np.nan])).tolist()
    [1, 2, 3, 4, 5, <NA>]
    """
    grade = pd.Series(np.searchsorted(GRADE_CUTS, score.to_numpy(), side="right") + 1, index=score.index)
    return grade.astype("Int64").mask(score.isna())


def hidden_grades(
    table: pd.DataFrame,
    analyst_noise: float,
    rng: np.random.Generator,
    qualitative: pd.Series | None = None,
    qualitative_weight: float = 0.0,
) -> pd.DataFrame:
    """expert_score and expert_grade from the analysts' hidden `JUDGEMENT`, then analyst noise
    on the grade.

    `table` needs `category` and the `JUDGEMENT` columns. Rows without a 3-year
    history (return_3y NaN) stay unrated. `qualitative` (0-100 per row, 50 neutral: the pillars
    the documents carry) takes `qualitative_weight` of the composite.
    """
    rated = table["return_3y"].notna()
    pct = pd.DataFrame({col: percentile_within(table[rated], col, higher) for col, (_, higher) in JUDGEMENT.items()})
    weights = pd.Series({col: w for col, (w, _) in JUDGEMENT.items()})
    # Weighted mean over the components a row has (renormalised weights).
    composite = (pct * weights).sum(axis=1, min_count=1) / pct.notna().mul(weights).sum(axis=1)
    if qualitative is not None:
        composite = (1.0 - qualitative_weight) * composite + qualitative_weight * qualitative[rated]
    frame = pd.DataFrame({"category": table.loc[rated, "category"], "composite": composite})
    score = percentile_within(frame, "composite").reindex(table.index)
    grade = grade_from_score(score)
    flip = pd.Series(rng.random(len(table)) < analyst_noise, index=table.index)
    step = pd.Series(rng.choice([-1, 1], len(table)), index=table.index)
    noisy = (grade + step.where(flip, 0)).clip(1, 5)
    return pd.DataFrame({"expert_grade": noisy.astype("Int64"), "expert_score": score.round(1)})


# -------------------------------------------------------------------- public


PUBLIC_COLUMNS = (
    "share_class_id",
    "fund_id",
    "name",
    "category",
    "manager",
    "company",
    "launch_month",
    "ongoing_cost",
    "fund_size",
    "manager_tenure",
    "expert_grade",
    "expert_score",
)


def qualitative_facts(params: SyntheticParams, share_classes: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The funds' hidden qualitative facts (`synthetic_documents.draw_facts`), or None when the
    universe has no documents (`params.documents` false)."""
    if not params.documents:
        return None
    return synthetic_documents.draw_facts(universe(params) if share_classes is None else share_classes, params)


def generate(
    params: SyntheticParams, n_months: int | None = None, regime: Regime | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(funds, returns): the attributes table with the analysts' grades, and long monthly returns.

    Grades are computed from the last 3 years of the simulated axis; with a
    regime's `fee_cut` in force at the end, `ongoing_cost` is the cut fee.
    """
    n_months = params.n_months if n_months is None else n_months
    sc = universe(params)
    facts = qualitative_facts(params, sc)
    if facts is not None:  # a manager who took over lately has a short tenure
        change = sc["fund_id"].map(facts.set_index("fund_id")["manager_change_month"])
        sc["manager_tenure"] = sc["manager_tenure"].where(change < 0, ((params.n_months - change) / 12).round(1))
    returns = simulate(params, n_months, regime, sc)
    metrics = navmetrics.compute_long(returns, risk_free_rate=RISK_FREE_RATE)

    funds = sc.copy()
    if regime is not None and regime.start < n_months:
        funds["ongoing_cost"] = (funds["ongoing_cost"] * (1.0 - regime.fee_cut)).round(2)
    months = month_labels(params.start, n_months)
    funds["launch_month"] = [months[min(i, n_months - 1)] for i in funds["launch"]]
    table = funds.join(metrics, on="share_class_id")
    qualitative = None
    if facts is not None:
        scores = synthetic_documents.qualitative_score(facts).set_axis(facts["fund_id"])
        qualitative = funds["fund_id"].map(scores)
    labels = hidden_grades(table, params.analyst_noise, _rng(params, _ANALYST), qualitative, params.qualitative_weight)
    funds = pd.concat([funds, labels], axis=1)
    return funds[list(PUBLIC_COLUMNS)], returns


def write(
    params: SyntheticParams,
    frames: tuple[pd.DataFrame, pd.DataFrame] | None = None,
    root: Path = Path("."),
    extra: dict[str, pd.DataFrame] | None = None,
) -> Path:
    """Write funds.csv and returns.csv (UTF-8), and any `extra` tables by file name (documents.csv,
    qualitative.csv), into `params.out_dir`, all or none.

    Generates the frames unless given. Returns the output directory.
    """
    funds, returns = generate(params) if frames is None else frames
    out_dir = root / params.out_dir
    with atomic_path(out_dir) as tmp:  # the directory is swapped in as a whole
        tmp.mkdir()
        funds.to_csv(tmp / "funds.csv", index=False, encoding="utf-8")
        returns.to_csv(tmp / "returns.csv", index=False, encoding="utf-8")
        for name, frame in (extra or {}).items():
            frame.to_csv(tmp / name, index=False, encoding="utf-8")
    return out_dir


# ------------------------------------------------------- later batches (monitoring)


REGIMES = ("none", "vol_spike", "category_collapse", "fee_cut")


def regime_preset(name: str, start: int, category: str = "Emerging Markets") -> Regime | None:
    """A named market regime for the monitoring demo, in force from month index `start`.

    >>> regime_preset("vol_spike", 72).vol_multiplier
    3.0
    >>> regime_preset("none", 72) is None
    True
    """
    if name == "none":
        return None
    if name == "vol_spike":  # every shock three times larger: risk metrics jump
        return Regime(start=start, vol_multiplier=3.0)
    if name == "category_collapse":  # one category loses ~6 % a month
        return Regime(start=start, category_shock={category: -0.06})
    if name == "fee_cut":  # fees 40 % lower across the market
        return Regime(start=start, fee_cut=0.4)
    raise ValueError(f"unknown regime {name!r}; known: {list(REGIMES)}")


def later_batch(params: SyntheticParams, months_ahead: int, regime: Regime | None = None) -> pd.DataFrame:
    """A screener-style snapshot of the universe `months_ahead` months after the horizon.

    The horizon is extended (earlier months repeat exactly, so without a regime the
    market just goes on), metrics are recomputed over the trailing windows ending at
    the new month, and the analysts grade by the same hidden rule. Columns are
    canonical names plus `as_of` (the new month), one row per share class.

    >>> p = SyntheticParams(n_funds=12, n_months=48)
    >>> b = later_batch(p, 6)
    >>> b["as_of"].iloc[0], int(b["share_class_id"].is_unique)
    ('2023-06', 1)
    """

    if months_ahead < 1:
        raise ValueError(f"months_ahead must be at least 1, got {months_ahead}")
    funds, returns = generate(params, params.n_months + months_ahead, regime)
    metrics = navmetrics.compute_long(returns, risk_free_rate=RISK_FREE_RATE)
    table = funds.join(metrics, on="share_class_id")
    table["as_of"] = metrics.attrs["as_of"]
    return table[[c.name for c in COLUMNS if c.name in table.columns] + ["as_of"]].reset_index(drop=True)
