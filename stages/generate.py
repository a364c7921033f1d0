"""Stage `generate`: write the SYNTHETIC fund universe (funds.csv, returns.csv) to `synthetic.out_dir`.

    python -m stages.generate            # reads params.yaml, section `synthetic`

Declared in synthetic/dvc.yaml, not in the main dvc.yaml: DVC runs it only when the
configured source (`ingest.path`) is its output, i.e. for the embedded default.
"""

from __future__ import annotations

from fundgrpo.cli import run_stage
from fundgrpo.data import synthetic
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        params = load_params().synthetic
        funds, returns = synthetic.generate(params)
        out_dir = synthetic.write(params, (funds, returns))
        print(
            f"generate: {len(funds)} share classes, {funds['fund_id'].nunique()} funds, "
            f"{len(returns)} monthly returns -> {out_dir} (synthetic)"
        )

    run_stage("generate", body)


if __name__ == "__main__":
    main()
