"""Stage `generate`: write the SYNTHETIC fund universe (funds.csv, returns.csv).

    python -m stages.generate            # reads params.yaml, section `synthetic`
"""

from __future__ import annotations

import sys

import pandas as pd

from fundgrpo import synthetic
from fundgrpo.cli import stage_help
from fundgrpo.params import SyntheticParams, load_params


def run(params: SyntheticParams) -> dict[str, pd.DataFrame]:
    """The generated frames: {"funds": attributes + grades, "returns": long monthly series}.

    >>> frames = run(SyntheticParams(n_funds=6, n_months=40))
    >>> sorted(frames)
    ['funds', 'returns']
    """
    funds, returns = synthetic.generate(params)
    return {"funds": funds, "returns": returns}


def main(argv: list[str] | None = None) -> int:
    """Optional arguments are profile files overlaid on params.yaml."""
    argv = sys.argv[1:] if argv is None else argv
    stage_help("generate", argv)
    params = load_params("params.yaml", *argv).synthetic
    frames = run(params)
    out_dir = synthetic.write(params, (frames["funds"], frames["returns"]))
    funds = frames["funds"]
    print(
        f"generate: {len(funds)} share classes, {funds['fund_id'].nunique()} funds, "
        f"{len(frames['returns'])} monthly returns -> {out_dir} (synthetic)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
