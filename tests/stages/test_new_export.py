"""A new user's export, by configuration alone: another agency's 1-5 stars with `0` for unrated,
`-` for missing numbers, scheme names repeated across plans and no id column (the shape of an
Indian mutual-fund export). A profile is applied, `dvc repro baseline` runs ingest, validate,
schema, prepare and the rule-only evaluation, and editing the export reruns ingest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from fundgrpo.io import copy_project
from tests.support import REPO, run

PLANS = ("Direct Plan - Growth", "Regular Plan - Growth")
CATEGORIES = ("Large Cap", "Mid Cap", "Flexi Cap")

PROFILE = {
    "ingest": {
        "source": "table",
        "path": "exports/india_funds.csv",
        "na_values": ["-"],
        "unrated": ["0"],
        "share_class_id_generate": True,
        "fund_id_from": ["Scheme Name"],
        "fund_id_strip": [r"\s*-\s*(direct|regular)\b.*$"],
        "column_map": {
            "name": "Scheme Name",
            "category": "Category",
            "return_1y": "1Y Return",
            "return_3y": "3Y Return",
            "return_5y": "5Y Return",
            "sharpe_3y": "Sharpe",
            "max_drawdown_3y": "Max Drawdown",
            "information_ratio_3y": "Info Ratio",
            "ongoing_cost": "Expense Ratio",
            "expert_grade": "rating",
        },
    },
    "validate": {"min_rows": 50, "null_budget": {"return_5y": 0.3, "sharpe_3y": 0.1}, "min_labelled_share": 0.7},
    "baseline": {"max_iter": 40, "learning_rate": [0.1], "max_leaf_nodes": [7], "min_samples_leaf": 5},
}


def export(n_schemes: int = 60, seed: int = 0) -> str:
    """The CSV text: two plans per scheme (the Regular plan costs more), the rating the category
    quintile of a Sharpe-led composite, `0` for about one rating in ten, `-` in some cells, and
    a scheme listed twice under one name (two options the export does not tell apart)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_schemes):
        sharpe, ret3, dd, ir = rng.normal(0.8, 0.4), rng.normal(12, 5), -abs(rng.normal(20, 6)), rng.normal(0, 0.5)
        for plan in PLANS + ((PLANS[0],) if s == 0 else ()):
            cost = rng.uniform(0.3, 1.0) + (1.0 if plan.startswith("Regular") else 0.0)
            rows.append(
                {
                    "Scheme Name": f"Scheme {s:02d} Fund - {plan}",
                    "Category": CATEGORIES[s % 3],
                    "1Y Return": rng.normal(15, 8),
                    "3Y Return": ret3,
                    "5Y Return": rng.normal(11, 4),
                    "Sharpe": sharpe,
                    "Max Drawdown": dd,
                    "Info Ratio": ir,
                    "Expense Ratio": cost,
                }
            )
    df = pd.DataFrame(rows)
    composite = (
        0.35 * df.groupby("Category")["Sharpe"].rank(pct=True)
        + 0.2 * df.groupby("Category")["3Y Return"].rank(pct=True)
        + 0.2 * df.groupby("Category")["Expense Ratio"].rank(pct=True, ascending=False)
        + 0.15 * df.groupby("Category")["Max Drawdown"].rank(pct=True)
        + 0.1 * df.groupby("Category")["Info Ratio"].rank(pct=True)
    )
    df["rating"] = np.ceil(composite.groupby(df["Category"]).rank(pct=True) * 5).clip(1, 5).astype(int)
    df.loc[rng.random(len(df)) < 0.1, "rating"] = 0
    text = df.round(3).astype(object)
    text.loc[rng.random(len(df)) < 0.15, "5Y Return"] = "-"
    text.loc[[3, 17], "Sharpe"] = "-"
    return text.to_csv(index=False)


def test_new_export_by_profile_alone(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    copy_project(REPO, root)
    (root / "exports").mkdir()
    (root / "exports/india_funds.csv").write_text(export(), encoding="utf-8")
    (root / "profiles/india.yaml").write_text(yaml.safe_dump(PROFILE, sort_keys=False), encoding="utf-8")
    run(["git", "init", "-q"], root)
    run([sys.executable, "-m", "fundgrpo.profiles", "apply", "india"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "india"], root)

    done = run([sys.executable, "-m", "dvc", "repro", "baseline"], root, timeout=600)
    ran = [line for line in done.stdout.splitlines() if line.startswith("Running stage")]
    upstream = {"batches", "ingest", "validate", "methodology", "decisions", "evidence", "prepare", "baseline"}
    assert {r.split("'")[1] for r in ran} == upstream, done.stdout
    assert not (root / "data/raw/synthetic").exists()  # the synthetic generator did not run for a real source
    assert "121 rows, 60 funds" in done.stdout and "unrated, counted unlabelled" in done.stdout

    table = pd.read_parquet(root / "data/validated/funds.parquet")
    assert table["share_class_id"].is_unique and len(table) == 121  # the repeated name stayed two share classes
    assert table.groupby("fund_id")["share_class_id"].count().max() == 3  # plans of a scheme are one fund
    assert set(table["expert_grade"].dropna()) <= {1, 2, 3, 4, 5}  # 0 never became a grade
    assert table["return_5y"].isna().sum() > 0  # "-" is missing, not an error

    baseline = json.loads((root / "metrics/baseline.json").read_text())
    assert baseline["rule"]["qwk"] > 0.5 and 0 <= baseline["exact"] <= 1  # rule scorer and GBM vs the experts
    assert json.loads((root / "metrics/prepare.json").read_text())["unlabelled_rows_excluded"] > 0

    # editing the export reruns ingest and what follows; an untouched export reruns nothing (but the
    # decisions export, always run: it reads the API's store, outside DVC)
    untouched = run([sys.executable, "-m", "dvc", "repro", "baseline"], root).stdout
    assert [line for line in untouched.splitlines() if line.startswith("Running stage")] == [
        "Running stage 'decisions':"
    ]
    (root / "exports/india_funds.csv").write_text(export(seed=1), encoding="utf-8")
    again = run([sys.executable, "-m", "dvc", "repro", "baseline"], root, timeout=600).stdout
    assert "Running stage 'ingest'" in again and "Running stage 'baseline'" in again
