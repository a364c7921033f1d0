"""Compact prompts carry the same evidence as full ones, in English and Korean."""

from __future__ import annotations

from fundgrpo.methodology import prompts
from fundgrpo.methodology.compiler import parse

METHODOLOGY = parse(
    {
        "name": "펀드 품질 등급",
        "language": "ko",
        "criteria": [
            {"id": "s", "metric": "sharpe_3y", "label": "샤프지수", "weight": 0.6},
            {"id": "c", "metric": "ongoing_cost", "label": "총보수", "weight": 0.4, "higher_is_better": False},
        ],
        "grades": [{"grade": g, "min": 20 * (g - 1), "max": 20 * g} for g in range(1, 6)],
    }
)
EVIDENCE = {"s": prompts.CriterionEvidence(81.4, 0.8, 0.5), "c": prompts.CriterionEvidence(float("nan"), 1.2, 0.9)}


def test_compact_korean_prompt_states_every_percentile_and_weight():
    system, user = prompts.build_messages(
        METHODOLOGY, prompts.FundHeading("한국 주식 펀드", "Korea Equity", 12), EVIDENCE, "compact"
    )
    assert system["content"] == "사내 방법론으로 펀드를 평가합니다. JSON으로만 답하세요."
    assert user["content"].splitlines() == [
        "펀드 품질 등급. 유형: Korea Equity (비교 펀드 12개).",
        "유형 내 백분위(100 = 최고), 가중치:",
        "샤프지수 81 (60%)",
        "총보수 자료 없음 (40%)",
        'JSON: {"reasoning": "...", "score": 0-100, "grade": 1-5}',
    ]
    full = prompts.build_messages(METHODOLOGY, prompts.FundHeading("한국 주식 펀드", "Korea Equity", 12), EVIDENCE)[1][
        "content"
    ]
    assert "백분위 81" in full and len(user["content"]) < len(full)
