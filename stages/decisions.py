"""Stage `decisions`: analysts' decisions, the latest per share class, from the API's store into a
table DVC tracks (`decisions.out`). DVC runs it every time (`always_changed`): the store lives
outside DVC; when the table comes out the same, nothing after it reruns.

Nothing is lost: when the table already holds decisions the store does not (the store moved: another
URL, a deleted file), the stage stops and keeps the table; remove the table to start over from this store.

The stage reads params.yaml and calls `fundgrpo.data.analyst_labels`; the logic, and its documentation, live there.
"""

from __future__ import annotations

from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.data import analyst_labels
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        url = analyst_labels.store_url(p.decisions.store_url)
        analyst_labels.check_nothing_lost(Path(p.decisions.out), url)
        table = analyst_labels.export(url)
        with io.atomic_path(p.decisions.out) as tmp:
            table.to_csv(tmp, index=False)
        analysts = table["analyst"].nunique() if len(table) else 0
        print(f"decisions: {len(table)} share class(es) decided by {analysts} analyst(s) -> {p.decisions.out}")

    run_stage("decisions", body)


if __name__ == "__main__":
    main()
