"""The dashboard's words, in the methodology's language (rubric.json `language`: en or ko)."""

from __future__ import annotations

from fundgrpo.evaluation.calibration import DecisionRule

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "title": "fund-grpo: evaluations",
        "funds": "Funds",
        "fund": "Fund",
        "backtest": "Backtest",
        "models": "Models",
        "drift": "Drift",
        "review": "Review queue",
        "version": "Model version",
        "workspace": "this workspace's last training run (not registered)",
        "figures_of": "Figures of {model} v{version} ({alias}); the API serves {serving}.",
        "figures_ws": "Figures of this workspace's last training run: {model} v{version} ({alias}); "
        "the API serves {serving}.",
        "no_champion": "no champion yet",
        "no_figures": "v{version} has no backtest logged with it (registered before the dashboard read them).",
        "no_run": "No training run on record yet (metrics/register.json): run `dvc repro` (or `make run`).",
        "name": "Name",
        "share_class": "Share class",
        "category": "Category",
        "expert": "Expert",
        "model": "Served grade",
        "rule": "Methodology",
        "gbm": "Gradient boosting",
        "confidence": "Confidence",
        "direction": "Model vs expert",
        "above": "above",
        "below": "below",
        "same": "same",
        "needs_analyst": "Needs an analyst",
        "search": "Search by name, category or share class",
        "categories": "Categories",
        "only_disagree": "only where model and expert disagree",
        "only_review": "only those that need an analyst",
        "shown_n": "{shown} of {total} tested share classes",
        "open_fund": "Select a row to open the fund's page; click a column's header to sort by it.",
        "sort": "Order",
        "sort_tested": "as tested",
        "sort_low": "least confident first",
        "sort_high": "most confident first",
        "sort_name": "by name",
        "pick_fund": "Share class",
        "vs_peers": "Against its peers ({peers} in {category})",
        "metric": "Metric",
        "value": "Value",
        "peer_median": "Peer median",
        "percentile": "Percentile in category (100 = best)",
        "verdict": "The methodology's verdict",
        "score": "score",
        "weight": "weight",
        "criterion": "Criterion",
        "grades": "Each evaluator's grade",
        "evaluator": "Evaluator",
        "grade": "Grade",
        "probabilities": "The served grade's probabilities",
        "reasoning": "Reasoning",
        "flags": "Flags",
        "history": "Grade history",
        "history_versions": "By model version (test backtest)",
        "history_store": "Evaluations and analysts' decisions (the API's store)",
        "not_tested": "Not among the tested share classes of this version: no grades to show.",
        "metrics": "Metrics",
        "confusion": "Confusion (expert ↓, predicted →)",
        "distribution": "Grade distribution",
        "rewards": "GRPO reward curves",
        "reliability": "Reliability: stated confidence against accuracy",
        "funds_n": "funds",
        "per_version": "Metrics per model version",
        "registered": "Registered",
        "aliases": "Aliases",
        "gate": "Gate passed",
        "reason": "Reason",
        "batch": "Batch",
        "date": "Date",
        "drift_verdict": "Verdict",
        "retrain": "Retrain",
        "feature_drift": "feature drift share",
        "migration": "rating migration",
        "over_time": "Drift and rating migration over time",
        "transitions": "Rating migration of {batch} (reference grade ↓, batch grade →)",
        "evidently": "Evidently report",
        "no_drift": "No monitoring run yet. Drop a batch into {incoming} and run the monitoring flow "
        "(`python -m flows.monitoring_flow`).",
        "none": "Nothing yet",
        "api_url": "API",
        "api_key": "Your API key (kept in this browser session only)",
        "load_queue": "Load the queue",
        "queue_n": "{n} evaluation(s) need an analyst",
        "why": "Why",
        "decide": "Decide",
        "new_grade": "Grade",
        "decision_reason": "Reason (required)",
        "submit": "Record the decision",
        "recorded": "Decision {id} recorded: {sid} → grade {grade}",
        "refused": "Refused ({status}): {detail}",
        "unreachable": "The API at {url} did not answer: {error}",
        "queue_help": "Decisions are written by the API with your key (scope `review`); this page keeps "
        "the key in this browser session's memory only.",
        "label_now": "Label now",
        "analyst": "analyst",
        "export": "export",
        "why_grade": "Why this grade",
        "accuracy": "Share graded as the expert did",
        "n_tested": "{n} test share classes",
        "served_title": "What the served grade is",
        "same_as_gbm": "same grade as GBM",
        "serves_lm": "the model's own probabilities",
        "serves_gbm": "the statistical model's probabilities (the model writes the evaluation)",
        "serves_stack": "the model's probabilities pooled with the statistical model's",
        "served_line": "Serves {what}: model {lm:.0%}, statistical model {gbm:.0%} of the belief; chosen on the "
        "validation funds (`{rule}`).",
        "served_test": "On the test funds the served grade equals the statistical model's (with its own rule) on "
        "{same:.0%}; it departs on {n}: right on {right}, the statistical model right on {gbm_right}.",
        "choose": "Choose",
        "invalid": "invalid answer",
        "misstated": "misstated",
        "misstated_verdict": "the verdict (not its grade's label)",
        "split_train": "training split",
        "split_validation": "validation split",
        "split_test": "test split",
        "book": "Book",
        "book_n": "{shown} of {total} share classes (the universe, and every fund the API or a batch scored)",
        "states": "Review state",
        "state_needs an analyst": "needs an analyst",
        "state_decided": "decided by an analyst",
        "state_evaluated": "evaluated",
        "state_not evaluated": "not evaluated yet",
        "in_universe": "In the universe",
        "latest": "Latest evaluation",
        "evaluated_at": "Evaluated",
        "source": "From",
        "decided": "Analyst's grade",
        "decided_by": "Decided by",
        "decided_line": "Decided by an analyst: grade {grade} ({by}). It needs no analyst now.",
        "whose_grade": "Whose grade",
        "story_line": "Text against grade: on {differ} test funds the evaluation's text was written for another grade "
        "than the one served, and {said} of them say so in their note; evaluations whose text contradicts their "
        "grade without saying so: {untold:.1%}.",
        "not_rated_line": "{n} test funds are not rated by the methodology (too little data): counted apart, "
        "graded by no evaluator.",
        "serves_now": "Grades served: {what}.",
        "evaluation_id": "Evaluation",
        "at": "At",
        "decision_id": "Decision",
        "decided_at": "Decided",
        "unknown_fund": "No share class `{id}` in the universe, the API's store or the batch evaluations. "
        "Search the Book for it.",
        "not_tested_here": "Not among this version's tested share classes: its latest evaluation and the "
        "methodology's verdict are shown; per-evaluator test grades exist for tested share classes only.",
        "no_evaluation": "No evaluation yet: score it through the API or `python -m fundgrpo.serving.batch`.",
        "legend": "valid_json: share of answers that could be read · exact: share graded as the expert did · "
        "within_one: within one grade · qwk: agreement with the expert counting how far off (1 = perfect) · "
        "spearman: rank agreement · score_mae: mean error of the 0-100 score · ece: how far stated confidence "
        "is from accuracy (0 = honest) · brier: error of the grade probabilities (lower is better) · "
        "exact_top70: exact on the 70 % it is surest of",
    },
    "ko": {
        "title": "fund-grpo: 펀드 평가",
        "funds": "펀드",
        "fund": "펀드 상세",
        "backtest": "백테스트",
        "models": "모델",
        "drift": "드리프트",
        "review": "검토 대기열",
        "version": "모델 버전",
        "workspace": "이 작업공간의 마지막 학습 실행 (미등록)",
        "figures_of": "표시된 수치: {model} v{version} ({alias}). API가 제공하는 모델: {serving}.",
        "figures_ws": "표시된 수치: 이 작업공간의 마지막 학습 실행 {model} v{version} ({alias}). "
        "API가 제공하는 모델: {serving}.",
        "no_champion": "챔피언 없음",
        "no_figures": "v{version}에는 함께 기록된 백테스트가 없습니다.",
        "no_run": "아직 학습 실행 기록이 없습니다 (metrics/register.json): `dvc repro`를 실행하세요.",
        "name": "펀드명",
        "share_class": "클래스 코드",
        "category": "유형",
        "expert": "전문가",
        "model": "제공 등급",
        "rule": "방법론",
        "gbm": "그래디언트 부스팅",
        "confidence": "확신도",
        "direction": "전문가 대비 모델",
        "above": "높음",
        "below": "낮음",
        "same": "같음",
        "needs_analyst": "애널리스트 검토 필요",
        "search": "펀드명, 유형 또는 클래스 코드 검색",
        "categories": "유형",
        "only_disagree": "모델과 전문가가 다른 펀드만",
        "only_review": "검토가 필요한 펀드만",
        "shown_n": "테스트 클래스 {total}개 중 {shown}개",
        "open_fund": "행을 선택하면 펀드 상세 페이지가 열립니다. 열 제목을 누르면 그 열로 정렬됩니다.",
        "sort": "정렬",
        "sort_tested": "테스트 순서",
        "sort_low": "확신도 낮은 순",
        "sort_high": "확신도 높은 순",
        "sort_name": "펀드명 순",
        "pick_fund": "클래스 코드",
        "vs_peers": "동일 유형 대비 ({category} {peers}개)",
        "metric": "지표",
        "value": "값",
        "peer_median": "유형 중앙값",
        "percentile": "유형 내 백분위 (100 = 최상)",
        "verdict": "방법론 판정",
        "score": "점수",
        "weight": "가중치",
        "criterion": "기준",
        "grades": "평가자별 등급",
        "evaluator": "평가자",
        "grade": "등급",
        "probabilities": "제공 등급의 확률",
        "reasoning": "근거",
        "flags": "표시",
        "history": "등급 이력",
        "history_versions": "모델 버전별 (테스트 백테스트)",
        "history_store": "평가 및 애널리스트 결정 (API 저장소)",
        "not_tested": "이 버전의 테스트 대상이 아닙니다: 표시할 등급이 없습니다.",
        "metrics": "지표",
        "confusion": "혼동 행렬 (전문가 ↓, 예측 →)",
        "distribution": "등급 분포",
        "rewards": "GRPO 보상 곡선",
        "reliability": "신뢰도: 확신도 대비 정확도",
        "funds_n": "펀드 수",
        "per_version": "모델 버전별 지표",
        "registered": "등록",
        "aliases": "별칭",
        "gate": "게이트 통과",
        "reason": "사유",
        "batch": "배치",
        "date": "날짜",
        "drift_verdict": "판정",
        "retrain": "재학습",
        "feature_drift": "피처 드리프트 비율",
        "migration": "등급 이동 비율",
        "over_time": "시간에 따른 드리프트와 등급 이동",
        "transitions": "{batch}의 등급 이동 (기준 등급 ↓, 배치 등급 →)",
        "evidently": "Evidently 리포트",
        "no_drift": "아직 모니터링 실행이 없습니다. {incoming}에 배치를 넣고 모니터링 플로를 실행하세요 "
        "(`python -m flows.monitoring_flow`).",
        "none": "아직 없음",
        "api_url": "API",
        "api_key": "API 키 (이 브라우저 세션에만 보관)",
        "load_queue": "대기열 불러오기",
        "queue_n": "애널리스트 검토가 필요한 평가 {n}건",
        "why": "사유",
        "decide": "결정",
        "new_grade": "등급",
        "decision_reason": "사유 (필수)",
        "submit": "결정 기록",
        "recorded": "결정 {id} 기록됨: {sid} → 등급 {grade}",
        "refused": "거부됨 ({status}): {detail}",
        "unreachable": "API {url} 응답 없음: {error}",
        "queue_help": "결정은 입력한 키(`review` 권한)로 API가 기록합니다. "
        "키는 이 브라우저 세션의 메모리에만 보관됩니다.",
        "label_now": "현재 라벨",
        "analyst": "애널리스트",
        "export": "원자료",
        "why_grade": "이 등급인 이유",
        "accuracy": "전문가와 같은 등급 비율",
        "n_tested": "테스트 클래스 {n}개",
        "served_title": "제공되는 등급의 출처",
        "same_as_gbm": "GBM과 같은 등급 비율",
        "serves_lm": "모델 자체의 확률",
        "serves_gbm": "통계 모델의 확률 (평가문은 모델이 작성)",
        "serves_stack": "모델의 확률과 통계 모델의 확률을 결합한 것",
        "served_line": "제공: {what}. 믿음의 비중은 모델 {lm:.0%}, 통계 모델 {gbm:.0%}; 검증 펀드로 선택 (`{rule}`).",
        "served_test": "테스트 펀드에서 제공 등급이 통계 모델(자체 규칙) 등급과 같은 비율 {same:.0%}; 다른 {n}건 중 "
        "모델이 맞힌 것 {right}건, 통계 모델이 맞힌 것 {gbm_right}건.",
        "choose": "선택하세요",
        "invalid": "무효 답변",
        "misstated": "잘못 기술된 기준",
        "misstated_verdict": "등급 판단 (등급의 명칭과 다름)",
        "split_train": "학습 분할",
        "split_validation": "검증 분할",
        "split_test": "테스트 분할",
        "book": "전체 펀드",
        "book_n": "전체 {total}개 중 {shown}개 클래스 (유니버스, 그리고 API나 배치가 평가한 모든 펀드)",
        "states": "검토 상태",
        "state_needs an analyst": "애널리스트 검토 필요",
        "state_decided": "애널리스트 결정됨",
        "state_evaluated": "평가됨",
        "state_not evaluated": "아직 평가 없음",
        "in_universe": "유니버스 포함",
        "latest": "최근 평가",
        "evaluated_at": "평가 시각",
        "source": "출처",
        "decided": "애널리스트 등급",
        "decided_by": "결정자",
        "decided_line": "애널리스트가 결정함: 등급 {grade} ({by}). 이제 검토가 필요하지 않습니다.",
        "whose_grade": "누구의 등급인가",
        "story_line": "평가 글과 등급: 테스트 펀드 {differ}건은 평가 글이 제공 등급과 다른 등급으로 "
        "쓰였고, 그중 {said}건이 메모로 이를 밝힙니다. 밝히지 않고 등급과 어긋나는 평가의 비율: {untold:.1%}.",
        "not_rated_line": "테스트 펀드 {n}건은 자료가 부족해 방법론이 평가하지 않습니다: 따로 세며, "
        "어떤 평가자도 등급을 주지 않습니다.",
        "serves_now": "제공 등급: {what}.",
        "evaluation_id": "평가",
        "at": "시각",
        "decision_id": "결정",
        "decided_at": "결정 시각",
        "unknown_fund": "유니버스, API 저장소, 배치 평가 어디에도 `{id}` 클래스가 없습니다. 전체 펀드에서 검색하세요.",
        "not_tested_here": "이 버전의 테스트 대상이 아닙니다: 최근 평가와 방법론 판정을 보여 줍니다. "
        "평가자별 테스트 등급은 테스트 대상 클래스에만 있습니다.",
        "no_evaluation": "아직 평가가 없습니다: API나 `python -m fundgrpo.serving.batch`로 평가하세요.",
        "legend": "valid_json: 읽을 수 있는 답의 비율 · exact: 전문가와 같은 등급 비율 · within_one: 한 등급 이내 · "
        "qwk: 얼마나 벗어났는지까지 센 전문가와의 일치도 (1 = 완벽) · spearman: 순위 일치도 · "
        "score_mae: 0-100 점수의 평균 오차 · ece: 밝힌 확신도와 실제 정확도의 차이 (0 = 정직) · "
        "brier: 등급 확률의 오차 (낮을수록 좋음) · exact_top70: 가장 확신하는 70 %에서의 정확도",
    },
}
# Evaluators in words a reader knows, the technique in brackets (the backtest's keys: grpo, sft, ...)
EVALUATORS = {
    "en": {
        "grpo": "Model (GRPO)",
        "sft": "Model before reinforcement learning (SFT)",
        "base": "Untrained base model",
        "rule": "Methodology (rule scorer)",
        "gbm": "Statistical model (GBM)",
        "gbm_rule": "Statistical model, validation-chosen rule (GBM)",
        "grpo_alone": "Model alone, its own probabilities (GRPO)",
        "grpo_stack": "Model pooled with the statistical model (stack)",
        "sft_served": "Model before reinforcement learning, validation-chosen rule (SFT)",
    },
    "ko": {
        "grpo": "모델 (GRPO)",
        "sft": "강화학습 전 모델 (SFT)",
        "base": "학습 전 기본 모델",
        "rule": "방법론 (규칙 채점)",
        "gbm": "통계 모델 (GBM)",
        "gbm_rule": "통계 모델, 검증 세트로 고른 규칙 (GBM)",
        "grpo_alone": "모델 단독, 자체 확률 (GRPO)",
        "grpo_stack": "모델과 통계 모델의 결합 (stack)",
        "sft_served": "강화학습 전 모델, 검증 세트로 고른 규칙 (SFT)",
    },
}


# The embedded universe's categories (params.synthetic.categories) in the page's language; a firm's own
# category names are shown as its data gives them.
CATEGORIES = {
    "ko": {
        "Global Equity": "글로벌 주식", "Korea Equity": "국내 주식", "US Large-Cap": "미국 대형주",
        "Emerging Markets": "신흥국 주식", "Bond Aggregate": "종합 채권", "Balanced": "혼합형",
    },
}  # fmt: skip


def category_words(category, language: str):
    """A category as the page names it.

    >>> category_words("Korea Equity", "ko"), category_words("Korea Equity", "en"), category_words("UK Equity", "ko")
    ('국내 주식', 'Korea Equity', 'UK Equity')
    """
    return CATEGORIES.get(language, {}).get(category, category) if isinstance(category, str) else category


def served_name(rule: DecisionRule | None, language: str) -> str:
    """The served evaluator named for what it serves (a rule that serves gradient boosting alone is
    not "the model"); the registered versions before rules were logged (None): the model.

    >>> served_name(DecisionRule("gbm", confidence="gbm"), "en")
    'Served: gradient boosting alone'
    >>> served_name(DecisionRule("stack", confidence="pooled", pool=(1, 3)), "en")
    'Served: model 25% + gradient boosting 75%'

    >>> served_name(None, "ko")
    '제공 등급: 모델 (GRPO)'
    """
    if rule is None:
        return {"en": "Served: the model (GRPO)", "ko": "제공 등급: 모델 (GRPO)"}[language]
    lm, gbm = rule.weights["language_model"], rule.weights["gradient_boosting"]
    words = {
        "en": {
            "gbm": "Served: gradient boosting alone",
            "stack": f"Served: model {lm:.0%} + gradient boosting {gbm:.0%}",
            "lm": "Served: the model (GRPO)",
        },
        "ko": {
            "gbm": "제공 등급: 그래디언트 부스팅 단독",
            "stack": f"제공 등급: 모델 {lm:.0%} + 그래디언트 부스팅 {gbm:.0%}",
            "lm": "제공 등급: 모델 (GRPO)",
        },
    }
    return words[language][rule.serves]


# The peer metrics in words (fundgrpo/data/canonical.py's columns), per language
METRICS = {
    "en": {
        "return_1y": "1-year return (%)", "return_3y": "3-year return (%)", "return_5y": "5-year return (%)",
        "volatility_3y": "3-year volatility (%)", "sharpe_3y": "3-year Sharpe ratio",
        "sortino_3y": "3-year Sortino ratio",
        "max_drawdown_3y": "3-year maximum drawdown (%)", "tracking_error_3y": "3-year tracking error (%)",
        "information_ratio_3y": "3-year information ratio", "mrar_3y": "3-year risk-adjusted return (%)",
        "mrar_5y": "5-year risk-adjusted return (%)", "ongoing_cost": "Ongoing cost (% a year)",
        "fund_size": "Fund size (millions)", "manager_tenure": "Manager tenure (years)",
    },
    "ko": {
        "return_1y": "1년 수익률 (%)", "return_3y": "3년 수익률 (%)", "return_5y": "5년 수익률 (%)",
        "volatility_3y": "3년 변동성 (%)", "sharpe_3y": "3년 샤프 비율", "sortino_3y": "3년 소르티노 비율",
        "max_drawdown_3y": "3년 최대 낙폭 (%)", "tracking_error_3y": "3년 추적 오차 (%)",
        "information_ratio_3y": "3년 정보 비율", "mrar_3y": "3년 위험조정 수익률 (%)",
        "mrar_5y": "5년 위험조정 수익률 (%)", "ongoing_cost": "총보수 (연 %)",
        "fund_size": "펀드 규모 (백만)", "manager_tenure": "운용역 재임 기간 (년)",
    },
}  # fmt: skip
