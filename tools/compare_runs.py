"""One table of the DVC experiments and their MLflow runs (fundgrpo/registry/sweeps.py).

    python tools/compare_runs.py [--names EXP ...] [--out reports/sweeps]

Rows: the current commit (the baseline) and its experiments from `dvc exp show --json`;
columns: the swept params, train reward, the GRPO policy's backtest, the gate decision,
and the MLflow run (matched by its `dvc.exp_name` tag). Prints markdown; writes
comparison.md and comparison.csv under --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fundgrpo.registry import sweeps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("."), help="the repository (default: here)")
    ap.add_argument("--names", nargs="*", help="only these experiments (the baseline row stays)")
    ap.add_argument("--out", type=Path, default=Path("reports/sweeps"))
    args = ap.parse_args()
    table = sweeps.compare(args.root.absolute(), args.names)
    print(sweeps.write(table, args.root / args.out))
    print(f"\nwritten: {args.root / args.out / 'comparison.md'}, comparison.csv")


if __name__ == "__main__":
    main()
