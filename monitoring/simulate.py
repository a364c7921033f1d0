"""Drop a later SYNTHETIC batch into the watched folder, optionally under a regime shift.

    python -m monitoring.simulate --months 6 --regime none --out data/incoming/
    python -m monitoring.simulate --months 6 --regime vol_spike --out data/incoming/

The batch is the synthetic universe of params.yaml (`synthetic`), `--months` after its
horizon, as a screener-style CSV in canonical column names: batch-YYYY-MM.csv
(batch-YYYY-MM-<regime>.csv under a regime). Regimes start right after the horizon:
  none               the market just goes on (same seeded streams)
  vol_spike          every shock three times larger
  category_collapse  one category (--category) loses ~6 % a month
  fee_cut            fees 40 % lower across the market
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from fundgrpo import io
from fundgrpo.data import synthetic
from fundgrpo.params import SyntheticParams, load_params


def make_batch(
    params: SyntheticParams, months: int, regime: str, category: str = "Emerging Markets"
) -> tuple[str, pd.DataFrame]:
    """(file name, batch) for `months` after the horizon under the named regime."""
    if regime == "category_collapse" and category not in params.categories:
        raise ValueError(f"--category {category!r} is not a synthetic category; known: {list(params.categories)}")
    table = synthetic.later_batch(params, months, synthetic.regime_preset(regime, params.n_months, category))
    suffix = "" if regime == "none" else f"-{regime}"
    return f"batch-{table['as_of'].iloc[0]}{suffix}.csv", table


def write(table: pd.DataFrame, path: Path) -> Path:
    """Write the CSV atomically: the watched folder never shows a half-written batch."""
    with io.atomic_path(path) as tmp:
        table.to_csv(tmp, index=False, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--months", type=int, default=6, help="months after the synthetic horizon (default 6)")
    parser.add_argument("--regime", choices=synthetic.REGIMES, default="none")
    parser.add_argument(
        "--category", default="Emerging Markets", help="the category that collapses (category_collapse)"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder (default: monitor.incoming_dir)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    params = load_params(args.params)
    try:
        name, table = make_batch(params.synthetic, args.months, args.regime, args.category)
    except ValueError as err:
        print(f"simulate failed: {err}", file=sys.stderr)
        return 1
    path = write(table, (args.out or Path(params.monitor.incoming_dir)) / name)
    labelled = int(table["expert_grade"].notna().sum())
    print(
        f"simulate: {len(table)} share classes as of {table['as_of'].iloc[0]}, regime {args.regime}, "
        f"{labelled} rated -> {path} (synthetic)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
