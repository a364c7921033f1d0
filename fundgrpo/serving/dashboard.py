"""The analysts' dashboard: server-rendered pages over what the pipeline wrote (no JavaScript).

    python -m fundgrpo.serving.dashboard [--host 127.0.0.1] [--port 8501]      # then open http://127.0.0.1:8501

Pages: `/funds` (model grade vs expert vs rule scorer vs gradient boosting with the reasoning,
filtered by category and disagreement: reports/backtest/predictions.jsonl), `/backtest`
(metrics/backtest.json and confusion matrices from plots/confusion_*.json), `/models` (MLflow:
versions, aliases, gate decisions and reasons over time), `/drift` (monitoring/reports/*/*/summary.json
with the retrain decisions; links to Evidently's HTML). Labels follow the methodology's language
(English or Korean). Read-only; it binds to loopback by default: put it behind the firm's
single sign-on before exposing it.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fundgrpo.cli import offline
from fundgrpo.params import EvaluateParams, load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving import review

LABELS = {
    "en": {
        "funds": "Funds",
        "backtest": "Backtest",
        "models": "Models",
        "drift": "Drift",
        "fund": "Fund",
        "category": "Category",
        "expert": "Expert",
        "model": "Model",
        "rule": "Rule scorer",
        "gbm": "Gradient boosting",
        "reasoning": "Reasoning",
        "all": "all",
        "disagree": "model and expert disagree",
        "filter": "Filter",
        "evaluator": "Evaluator",
        "version": "Version",
        "aliases": "Aliases",
        "created": "Registered",
        "gate": "Gate",
        "reason": "Reason",
        "batch": "Batch",
        "date": "Date",
        "verdict": "Verdict",
        "retrain": "Retrain",
        "report": "Report",
        "none": "Nothing yet",
        "predicted": "predicted",
        "title": "fund-grpo: evaluations",
        "figures_of": "Figures of {model} v{version} ({alias}), the last training run; the API serves {serving}.",
        "no_run": "No training run on record yet (metrics/register.json): run `dvc repro`.",
        "confidence": "Confidence",
        "review": "needs an analyst",
        "review_only": "only those that need an analyst",
        "sort": "Sort",
        "sort_none": "as tested",
        "sort_low": "least confident first",
        "sort_high": "most confident first",
        "shown": "Evidence (* in the model's prompt)",
        "methodology": "methodology",
        "statistical": "statistical model",
        "trust": "How far the confidence can be trusted",
        "coverage": "exact on the most confident",
    },
    "ko": {
        "funds": "펀드",
        "backtest": "백테스트",
        "models": "모델",
        "drift": "드리프트",
        "fund": "펀드",
        "category": "유형",
        "expert": "전문가",
        "model": "모델",
        "rule": "규칙 점수",
        "gbm": "그래디언트 부스팅",
        "reasoning": "근거",
        "all": "전체",
        "disagree": "모델과 전문가 불일치",
        "filter": "필터",
        "evaluator": "평가자",
        "version": "버전",
        "aliases": "별칭",
        "created": "등록",
        "gate": "게이트",
        "reason": "사유",
        "batch": "배치",
        "date": "날짜",
        "verdict": "판정",
        "retrain": "재학습",
        "report": "리포트",
        "none": "아직 없음",
        "predicted": "예측",
        "title": "fund-grpo: 펀드 평가",
        "figures_of": "표시된 수치: {model} v{version} ({alias}), 마지막 학습 실행. API가 제공하는 모델: {serving}.",
        "no_run": "아직 학습 실행 기록이 없습니다 (metrics/register.json): `dvc repro`를 실행하세요.",
        "confidence": "확신도",
        "review": "애널리스트 검토 필요",
        "review_only": "검토가 필요한 펀드만",
        "sort": "정렬",
        "sort_none": "테스트 순서",
        "sort_low": "확신도 낮은 순",
        "sort_high": "확신도 높은 순",
        "shown": "근거 (* 모델 프롬프트에 포함)",
        "methodology": "방법론",
        "statistical": "통계 모델",
        "trust": "확신도의 신뢰성",
        "coverage": "확신도 상위 펀드의 정확도",
    },
}
STYLE = (
    "body{font-family:system-ui,'Noto Sans KR','Nanum Gothic','Apple SD Gothic Neo','Malgun Gothic',sans-serif;"
    "margin:1.5rem;color:#222}nav a{margin-right:1rem}\n"
    "table{border-collapse:collapse;margin:.8rem 0}"
    "td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}\n"
    "th{background:#f3f3f3}.off{background:#fde8e8}.cm td{text-align:center;min-width:2.5rem}"
    ".review{font-weight:600;color:#a40000}"
    ".shown{font-size:.85rem;color:#555}.shown.warn{color:#a40000;font-weight:600}"
)
EVALUATORS = {"grpo": "GRPO", "sft": "SFT", "base": "base", "rule": "rule", "gbm": "GBM"}


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


class Data:
    """What the pages read, from the workspace at `root`."""

    def __init__(self, root: Path) -> None:

        self.root = root
        self.params = load_params(root / "params.yaml")

    def language(self) -> str:
        rubric = self.root / self.params.methodology.out_dir / "rubric.json"
        lang = json.loads(rubric.read_text(encoding="utf-8")).get("language", "en") if rubric.exists() else "en"
        return lang if lang in LABELS else "en"

    def predictions(self) -> list[dict]:
        path = self.root / self.params.backtest.report_dir / "predictions.jsonl"
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []

    def backtest(self) -> dict | None:
        path = self.root / self.params.backtest.metrics
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def confusion(self, name: str) -> list[dict]:
        path = self.root / self.params.backtest.plots_dir / f"confusion_{name}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []

    def versions(self) -> list[dict]:
        from mlflow import MlflowClient

        uri = mlflow_registry.local_uri(mlflow_registry.tracking_uri(self.params.register), self.root)
        if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).exists():
            return []
        client = MlflowClient(tracking_uri=uri)
        name = self.params.register.model_name
        versions = client.search_model_versions(f"name='{name}'")
        if not versions:
            return []
        # search results leave aliases empty: the registered model holds alias -> version
        aliases = client.get_registered_model(name).aliases or {}
        out = []
        for v in versions:
            tags = client.get_run(v.run_id).data.tags if v.run_id else {}
            held = sorted(a for a, number in aliases.items() if str(number) == str(v.version))
            out.append(
                {
                    "version": int(v.version),
                    "aliases": held,
                    "created": v.creation_timestamp,
                    "passed": tags.get("gate.passed"),
                    "promote": tags.get("gate.promote"),
                    "reason": tags.get("gate.reason", ""),
                }
            )
        return sorted(out, key=lambda r: r["version"], reverse=True)

    def drift(self) -> list[dict]:
        base = self.root / self.params.monitor.report_dir
        rows = []
        for summary in sorted(base.glob("*/*/summary.json"), reverse=True):
            s = json.loads(summary.read_text(encoding="utf-8"))
            rows.append({**s, "folder": summary.parent.relative_to(self.root).as_posix()})
        return rows


def shown_line(data: Data) -> str:
    """Which model version the figures are of (the last training run's, which the gate may have
    refused) and which one the API serves, so no page passes a challenger's figures as the champion's."""
    t = LABELS[data.language()]
    path = data.root / data.params.register.decision
    if not path.exists():
        return f'<p class="shown">{_e(t["no_run"])}</p>'
    d = json.loads(path.read_text(encoding="utf-8"))
    try:
        champion = next((v["version"] for v in data.versions() if "champion" in v["aliases"]), None)
    except Exception:  # noqa: BLE001 - a registry that cannot be read: say so rather than fail the page
        champion = "?"
    serving = "no champion yet" if champion is None else f"champion v{champion}"
    warn = " warn" if str(champion) != str(d.get("version")) else ""
    line = t["figures_of"].format(
        model=d.get("model_name", ""), version=d.get("version"), alias=d.get("alias"), serving=serving
    )
    return f'<p class="shown{warn}">{_e(line)}</p>'


def page(data: Data, title: str, body: str) -> str:
    t = LABELS[data.language()]
    nav = "".join(f'<a href="/{p}">{_e(t[p])}</a>' for p in ("funds", "backtest", "models", "drift"))
    return (
        f'<!doctype html><html lang="{data.language()}"><head><meta charset="utf-8">'
        f"<title>{_e(title)} · {_e(t['title'])}</title>"
        f"<style>{STYLE}</style></head><body><nav>{nav}</nav>{shown_line(data)}<h1>{_e(title)}</h1>{body}</body></html>"
    )


SORTS = ("", "low", "high")


def needs_review(row: dict, rule: EvaluateParams) -> bool:
    """A tested fund an analyst should look at, by the review queue's rule (fundgrpo/serving/review.py):
    the policy's answer invalid, less sure than `evaluate.review_below`, or `evaluate.disagree_by`
    grades from the methodology's or gradient boosting's.

    >>> rule = EvaluateParams(review_below=0.5, disagree_by=2)
    >>> needs_review({"grpo_valid": True, "grpo_grade": 3, "grpo_confidence": 0.4}, rule)
    True
    >>> needs_review({"grpo_valid": True, "grpo_grade": 3, "grpo_confidence": 0.9, "rule_grade": 1}, rule)
    True
    >>> needs_review({"grpo_valid": True, "grpo_grade": 3, "grpo_confidence": 0.9, "gbm_grade": 2}, rule)
    False
    """
    evaluation = {
        "grade": row.get("grpo_grade") if row.get("grpo_valid", True) else None,
        "valid": row.get("grpo_valid", True),
        "confidence": row.get("grpo_confidence"),
        "rule_grade": row.get("rule_grade"),
        "gbm_grade": row.get("gbm_grade"),
    }
    return bool(review.why(evaluation, rule))


def funds_page(data: Data, category: str = "", disagree: bool = False, review: bool = False, sort: str = "") -> str:
    t = LABELS[data.language()]
    rule = data.params.evaluate
    threshold = rule.review_below
    rows = data.predictions()
    categories = sorted({r["category"] for r in rows})
    shown = [
        r
        for r in rows
        if (not category or r["category"] == category)
        and (not disagree or r.get("grpo_grade") != r["expert_grade"])
        and (not review or needs_review(r, rule))
    ]
    if sort in ("low", "high"):
        shown = sorted(shown, key=lambda r: r.get("grpo_confidence") or 0.0, reverse=sort == "high")
    options = "".join(
        f'<option value="{_e(c)}"{" selected" if c == category else ""}>{_e(c)}</option>' for c in categories
    )
    sorts = "".join(
        f'<option value="{k}"{" selected" if k == sort else ""}>{_e(t["sort_" + (k or "none")])}</option>'
        for k in SORTS
    )
    form = (
        f'<form method="get">{_e(t["category"])} '
        f'<select name="category"><option value="">{_e(t["all"])}</option>{options}</select> '
        f'<label><input type="checkbox" name="disagree" value="1"{" checked" if disagree else ""}> '
        f"{_e(t['disagree'])}</label> "
        f'<label><input type="checkbox" name="review" value="1"{" checked" if review else ""}> '
        f"{_e(t['review_only'])} (&lt; {threshold:g})</label> "
        f'{_e(t["sort"])} <select name="sort">{sorts}</select> '
        f'<button type="submit">{_e(t["filter"])}</button></form>'
    )
    if not rows:
        return page(data, t["funds"], form + f"<p>{_e(t['none'])}</p>")
    head = "".join(
        f"<th>{_e(t[k])}</th>"
        for k in ("fund", "category", "expert", "model", "confidence", "shown", "rule", "gbm", "reasoning")
    )
    body = []
    for r in shown:
        try:
            reasoning = json.loads(r.get("grpo_text") or "{}").get("reasoning", "")
        except (json.JSONDecodeError, AttributeError):
            reasoning = ""
        off = ' class="off"' if r.get("grpo_grade") != r["expert_grade"] else ""
        confidence = r.get("grpo_confidence")
        flag = f' <span class="review">{_e(t["review"])}</span>' if needs_review(r, rule) else ""
        evidence = f"{_e(t['methodology'])} {_e(r.get('rule_grade'))}"
        if r.get("gbm_grade") is not None:
            evidence += (
                f"; {_e(t['statistical'])} {_e(r['gbm_grade'])} ({round(100 * (r.get('gbm_confidence') or 0))}%)"
            )
        body.append(
            f"<tr{off}><td>{_e(r['share_class_id'])}</td><td>{_e(r['category'])}</td><td>{_e(r['expert_grade'])}</td>"
            f"<td>{_e(r.get('grpo_grade'))}</td>"
            f"<td>{'' if confidence is None else f'{confidence:.2f}'}{flag}</td><td>{evidence}</td>"
            f"<td>{_e(r.get('rule_grade'))}</td><td>{_e(r.get('gbm_grade'))}</td><td>{_e(reasoning)}</td></tr>"
        )
    count = f"<p>{len(shown)} / {len(rows)}</p>"
    return page(data, t["funds"], form + count + f"<table><tr>{head}</tr>{''.join(body)}</table>")


def confusion_table(pairs: list[dict]) -> str:
    # grades in order, then "invalid" (an answer with no grade)
    grades = sorted(
        {p["expert"] for p in pairs} | {p["predicted"] for p in pairs}, key=lambda g: (isinstance(g, str), g)
    )
    counts = {(e, q): 0 for e in grades for q in grades}
    for p in pairs:
        counts[(p["expert"], p["predicted"])] += 1
    top = max(counts.values()) or 1
    head = "".join(f"<th>{g}</th>" for g in grades)
    rows = "".join(
        f"<tr><th>{e}</th>"
        + "".join(
            f'<td style="background:rgba(31,119,180,{counts[(e, q)] / top:.2f})">{counts[(e, q)]}</td>' for q in grades
        )
        + "</tr>"
        for e in grades
    )
    return f'<table class="cm"><tr><th>↓ / →</th>{head}</tr>{rows}</table>'


def backtest_page(data: Data) -> str:
    t = LABELS[data.language()]
    result = data.backtest()
    if result is None:
        return page(data, t["backtest"], f"<p>{_e(t['none'])}</p>")
    keys = ("valid_json", "exact", "within_one", "qwk", "spearman", "score_mae")
    head = f"<th>{_e(t['evaluator'])}</th>" + "".join(f"<th>{k}</th>" for k in keys)
    rows = "".join(
        f"<tr><td>{_e(EVALUATORS.get(name, name))}</td>" + "".join(f"<td>{_e(m.get(k))}</td>" for k in keys) + "</tr>"
        for name, m in result["models"].items()
    )
    matrices = "".join(
        f"<h2>{_e(EVALUATORS.get(n, n))}</h2><p>{_e(t['expert'])} ↓, {_e(t['predicted'])} →</p>"
        f"{confusion_table(data.confusion(n))}"
        for n in result["models"]
        if data.confusion(n)
    )
    trust_keys = ("ece", "brier", "confidence_mean", "exact_top50", "exact_top70", "exact_top90")
    trusted = [(n, m["trust"]) for n, m in result["models"].items() if m.get("trust")]
    trust = ""
    if trusted:
        trust = (
            f"<h2>{_e(t['trust'])}</h2><table><tr><th>{_e(t['evaluator'])}</th>"
            + "".join(f"<th>{k}</th>" for k in trust_keys)
            + "</tr>"
            + "".join(
                f"<tr><td>{_e(EVALUATORS.get(n, n))}</td>"
                + "".join(f"<td>{_e(m.get(k))}</td>" for k in trust_keys)
                + "</tr>"
                for n, m in trusted
            )
            + "</table>"
        )
    return page(
        data,
        t["backtest"],
        f"<p>{result['n_funds']} test share classes</p><table><tr>{head}</tr>{rows}</table>{trust}{matrices}",
    )


def models_page(data: Data) -> str:

    t = LABELS[data.language()]
    versions = data.versions()
    if not versions:
        return page(data, t["models"], f"<p>{_e(t['none'])}</p>")
    head = "".join(f"<th>{_e(t[k])}</th>" for k in ("version", "aliases", "created", "gate", "reason"))
    rows = "".join(
        f"<tr><td>{v['version']}</td><td>{_e(', '.join(v['aliases']))}</td>"
        f"<td>{datetime.fromtimestamp(v['created'] / 1000, timezone.utc):%Y-%m-%d %H:%M}</td>"
        f"<td>{_e(v['passed'])}</td><td>{_e(v['reason'])}</td></tr>"
        for v in versions
    )
    return page(data, t["models"], f"<table><tr>{head}</tr>{rows}</table>")


def drift_page(data: Data) -> str:
    t = LABELS[data.language()]
    rows = data.drift()
    if not rows:
        return page(data, t["drift"], f"<p>{_e(t['none'])}</p>")
    head = "".join(f"<th>{_e(t[k])}</th>" for k in ("date", "batch", "verdict", "reason", "retrain", "report"))
    body = "".join(
        f"<tr><td>{_e(r.get('date'))}</td><td>{_e(r.get('batch'))}</td>"
        f"<td>{_e(r.get('verdict'))}</td><td>{_e(r.get('reason'))}</td>"
        f"<td>{_e((r.get('retrain') or {}).get('status'))}</td>"
        f'<td><a href="/reports/{_e(r["folder"])}/drift.html">drift.html</a></td></tr>'
        for r in rows
    )
    return page(data, t["drift"], f"<table><tr>{head}</tr>{body}</table>")


def create_app(root: Path = Path(".")):
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

    data = Data(Path(root).resolve())
    app = FastAPI(title="fund-grpo dashboard", docs_url=None, redoc_url=None)

    @app.get("/", include_in_schema=False)
    def home():
        return RedirectResponse("/funds")

    @app.get("/funds", response_class=HTMLResponse)
    def funds(category: str = "", disagree: bool = False, review: bool = False, sort: str = ""):
        if sort not in SORTS:
            raise HTTPException(422, f"sort must be one of {list(SORTS)}, got {sort!r}")
        return funds_page(data, category, disagree, review, sort)

    @app.get("/backtest", response_class=HTMLResponse)
    def backtest():
        return backtest_page(data)

    @app.get("/models", response_class=HTMLResponse)
    def models():
        return models_page(data)

    @app.get("/drift", response_class=HTMLResponse)
    def drift():
        return drift_page(data)

    @app.get("/reports/{path:path}")
    def report(path: str):
        base = (data.root / data.params.monitor.report_dir).resolve()
        target = (data.root / path).resolve()
        if not target.is_file() or base not in target.parents:
            raise HTTPException(404, "no such report")
        return FileResponse(target)

    return app


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    ap = argparse.ArgumentParser(
        prog="python -m fundgrpo.serving.dashboard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8501)
    args = ap.parse_args(argv)
    offline()
    uvicorn.run(create_app(Path(".")), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
