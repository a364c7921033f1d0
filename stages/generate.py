"""Stage `generate`: write the SYNTHETIC fund universe (funds.csv, returns.csv) to `synthetic.out_dir`.

    python -m stages.generate            # reads params.yaml, section `synthetic`

With `synthetic.documents`, also documents.csv and the hidden qualitative facts (qualitative.csv);
the phrasings held out of training follow `prepare`'s split.
Declared in synthetic/dvc.yaml, not in the main dvc.yaml: DVC runs it only when the
configured source (`ingest.path`) is its output, i.e. for the embedded default.
"""

from __future__ import annotations

import pandas as pd

from fundgrpo.cli import run_stage
from fundgrpo.data import synthetic, synthetic_documents
from fundgrpo.methodology.splits import split_of
from fundgrpo.params import Params, load_params


def documents(p: Params) -> dict[str, pd.DataFrame]:
    """documents.csv, judgements.csv and qualitative.csv (`synthetic_documents.files`), or none."""
    facts = synthetic.qualitative_facts(p.synthetic)
    if facts is None:
        return {}
    heldout = lambda fund: split_of(fund, p.prepare) != "train"  # noqa: E731
    return synthetic_documents.files(synthetic.universe(p.synthetic), facts, p.synthetic, heldout)


def main() -> None:
    def body() -> None:
        p = load_params()
        funds, returns = synthetic.generate(p.synthetic)
        extra = documents(p)
        out_dir = synthetic.write(p.synthetic, (funds, returns), extra=extra)
        docs = f", {len(extra['documents.csv'])} documents" if extra else ""
        print(
            f"generate: {len(funds)} share classes, {funds['fund_id'].nunique()} funds, "
            f"{len(returns)} monthly returns{docs} -> {out_dir} (synthetic)"
        )

    run_stage("generate", body)


if __name__ == "__main__":
    main()
