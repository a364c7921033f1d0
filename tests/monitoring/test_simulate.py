"""The simulated market's time axis: later batches, regime shifts, and the demo's drift verdicts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from fundgrpo.data import ingestion as ingest
from fundgrpo.data import navmetrics, synthetic
from fundgrpo.params import IngestParams, MonitorParams, SyntheticParams
from monitoring import drift, simulate

TINY = SyntheticParams(n_funds=60, max_share_classes=2, n_months=48)  # profiles/tiny.yaml
DEFAULT = SyntheticParams(n_funds=1000, max_share_classes=2, n_months=72)  # params.yaml


def reference(params: SyntheticParams, root: Path) -> pd.DataFrame:
    """The training reference as the pipeline builds it: generate, then ingest the returns source."""
    synthetic.write(replace(params, out_dir="data/raw/synthetic"), root=root)
    return ingest.run(IngestParams(), root)[0]


def test_a_later_batch_continues_the_same_market():
    batch = synthetic.later_batch(TINY, 6)
    funds, returns = synthetic.generate(TINY, TINY.n_months + 6)
    assert batch["share_class_id"].tolist() == funds["share_class_id"].tolist()
    assert set(batch["as_of"]) == {synthetic.month_labels(TINY.start, TINY.n_months + 6)[-1]}
    # metrics over the trailing windows that end at the new month, grades by the hidden rule
    metrics = navmetrics.compute_long(returns, risk_free_rate=synthetic.RISK_FREE_RATE)
    got = batch.set_index("share_class_id")
    pd.testing.assert_series_equal(got["sharpe_3y"], metrics["sharpe_3y"], check_names=False)
    assert got["expert_grade"].tolist() == funds.set_index("share_class_id")["expert_grade"].tolist()
    assert set(batch.columns) >= {"share_class_id", "fund_id", "category", "return_1y", "ongoing_cost", "expert_grade"}


def test_regimes_move_what_they_say():
    base = synthetic.later_batch(TINY, 6).set_index("share_class_id")

    def later(name: str) -> pd.DataFrame:
        return synthetic.later_batch(TINY, 6, synthetic.regime_preset(name, TINY.n_months)).set_index("share_class_id")

    assert later("vol_spike")["volatility_3y"].median() > 1.15 * base["volatility_3y"].median()  # 6 of 36 months at 3x
    assert (later("fee_cut")["ongoing_cost"] / base["ongoing_cost"]).round(1).eq(0.6).all()
    em = base["category"] == "Emerging Markets"
    collapsed = later("category_collapse")
    assert (collapsed.loc[em, "return_1y"] < base.loc[em, "return_1y"] - 20).all()
    pd.testing.assert_series_equal(collapsed.loc[~em, "return_1y"], base.loc[~em, "return_1y"])
    with pytest.raises(ValueError, match="unknown regime 'crash'"):
        synthetic.regime_preset("crash", 48)
    with pytest.raises(ValueError, match="at least 1"):
        synthetic.later_batch(TINY, 0)


@pytest.mark.parametrize("universe", [TINY, DEFAULT], ids=["tiny", "default"])
def test_the_demo_no_drift_then_drift(tmp_path, universe):
    """The documented demo: a batch in a calm market does not drift, a volatility spike does."""
    ref = reference(universe, tmp_path)
    calm = drift.data_drift(ref, synthetic.later_batch(universe, 6), MonitorParams(), tmp_path / "calm")
    spike = drift.data_drift(
        ref,
        synthetic.later_batch(universe, 6, synthetic.regime_preset("vol_spike", universe.n_months)),
        MonitorParams(),
        tmp_path / "spike",
    )
    assert calm.verdict is False and spike.verdict is True
    assert {"volatility_3y", "tracking_error_3y"} <= set(spike.drifted)


def test_cli_drops_a_batch_into_the_watched_folder(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("synthetic: {n_funds: 12, n_months: 40}\n")
    assert (
        simulate.main(["--months", "3", "--regime", "fee_cut", "--out", str(tmp_path / "in"), "--params", str(params)])
        == 0
    )
    written = tmp_path / "in" / "batch-2022-07-fee_cut.csv"
    assert written.exists() and "(synthetic)" in capsys.readouterr().out
    table = ingest.run(IngestParams(source="table", path=str(written)), tmp_path)[0]  # a valid table source
    assert len(table) == len(pd.read_csv(written))
    assert (
        simulate.main(
            ["--regime", "category_collapse", "--category", "Gold", "--params", str(params), "--out", str(tmp_path)]
        )
        == 1
    )
    assert "'Gold' is not a synthetic category" in capsys.readouterr().err
    assert simulate.main(["--months", "0", "--params", str(params), "--out", str(tmp_path)]) == 1
    with pytest.raises(SystemExit):
        simulate.main(["--regime", "crash"])
