"""research/seeds.md is generated from the collected runs, and its GRPO − SFT figures on what each
model wrote (misstated claims, completeness, stated confidence, departures) are what the per-fund
files say, with intervals over funds and seeds."""

import runpy

import numpy as np
import pytest

from tests.support import REPO

BENCH = REPO / "benchmarks" / "contest"
SEEDS = runpy.run_path(str(BENCH / "seeds.py"))


@pytest.mark.research
def test_the_committed_page_is_what_the_collected_runs_generate():
    page, _ = SEEDS["report"]()
    assert page == SEEDS["PAGE"].read_text(encoding="utf-8"), "run `python benchmarks/contest/seeds.py report`"


def run(seed: int, grpo_wrong: int) -> dict:
    """40 funds (two share classes each); SFT misstates one claim in four, GRPO `grpo_wrong` of 80 claims;
    GRPO departs from the suggested grade on 10 funds, right on 7."""
    funds = []
    for i in range(40):
        expert = 4 if i < 7 else (2 if i < 10 else 3)
        shown, grpo = 3, 4 if i < 10 else 3  # GRPO departs on the first 10, right on 7
        funds.append(
            {
                "share_class_id": f"s{i}", "fund_id": f"f{i // 2}", "expert_grade": expert, "shown_grade": shown,
                "grpo_grade": grpo, "grpo_written_grade": grpo, "sft_grade": shown,
                "grpo_claims": 2, "grpo_misstated": int(i < grpo_wrong), "grpo_complete": True, "grpo_stated": 0.8,
                "sft_claims": 2, "sft_misstated": int(i % 2 == 0), "sft_complete": i % 4 != 0,
                "sft_stated": 0.4 if i % 2 else 0.6,
            }
        )  # fmt: skip
    return {"summary": {"seed": seed, "n_funds": 40, "test_fingerprint": "x"}, "funds": funds}


def test_grpo_against_sft_on_what_each_wrote():
    runs = [run(s, w) for s, w in enumerate((1, 2, 0))]
    found = SEEDS["figures"](runs)["faithful"]
    misstated = found["misstated"]
    assert misstated["grpo"]["mean"] == pytest.approx(np.mean([1 / 80, 2 / 80, 0]))
    assert misstated["sft"]["mean"] == pytest.approx(20 / 80)
    d = misstated["difference"]
    assert d["lo"] <= d["mean"] <= d["hi"] < 0  # GRPO below SFT, clear of zero
    assert found["complete"]["grpo"]["mean"] == 1.0 and found["complete"]["sft"]["mean"] == 0.75
    assert found["departure_precision"]["grpo"]["mean"] == pytest.approx(0.7)
    assert found["departures"]["grpo"]["mean"] == pytest.approx(10 / 40)
    # the stated confidence against being right: GRPO says 0.8 and is right on 37 of 40
    assert found["stated_brier"]["grpo"]["mean"] == pytest.approx((37 * 0.2**2 + 3 * 0.8**2) / 40)
    # ... and says 0.8 for every fund: a spread of 0, where SFT's 0.4 and 0.6 spread by 0.1
    spread = found["stated_spread"]
    assert spread["grpo"]["mean"] == 0 and spread["sft"]["mean"] == pytest.approx(0.1)
    assert spread["difference"]["hi"] < 0 and spread["difference"]["mean"] == pytest.approx(-0.1)
    lines = "\n".join(SEEDS["faithful_lines"](found))
    assert "misstated claims ≤ 2 % of GRPO's" in lines and "**met**" in lines
    assert "departure precision above 50 %: **met** (0.700)" in lines
    assert "the stated confidence's spread over funds 0.000" in lines
