"""The analysts' dashboard in a real headless browser (Chromium from the OS packages):
each page loaded from a running server over the trained tiny repo, its rendered DOM checked,
a screenshot kept under reports/screenshots/."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fundgrpo.params import EvaluateParams
from fundgrpo.serving import dashboard
from tests.support import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
SHOTS = REPO / "reports" / "screenshots"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install chromium")


def serve(root: Path):
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(dashboard.create_app(root), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.1)
    return server, thread, f"http://127.0.0.1:{port}"


def browse(url: str, shot: str) -> str:
    """The DOM Chromium rendered for `url`; a screenshot of it under reports/screenshots/."""
    flags = [
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ]
    SHOTS.mkdir(parents=True, exist_ok=True)
    subprocess.run([*flags, f"--screenshot={SHOTS / shot}", url], capture_output=True, timeout=120)
    done = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_page_renders_in_a_browser(trained):
    root, _ = trained
    server, thread, base = serve(root)
    try:
        funds = browse(f"{base}/funds", "funds.png")
        rows = [json.loads(line) for line in (root / "reports/backtest/predictions.jsonl").read_text().splitlines()]
        assert f"{len(rows)} / {len(rows)}" in funds and "Rule scorer" in funds and rows[0]["share_class_id"] in funds
        # every page says whose figures it shows, and what the API serves
        decision = json.loads((root / "metrics/register.json").read_text())
        assert f"Figures of fund-evaluator v{decision['version']} ({decision['alias']})" in funds
        assert "the API serves" in funds
        category = rows[0]["category"]
        filtered = browse(f"{base}/funds?category={category.replace(' ', '%20')}&disagree=1", "funds_filtered.png")
        expected = sum(1 for r in rows if r["category"] == category and r["grpo_grade"] != r["expert_grade"])
        assert f"{expected} / {len(rows)}" in filtered
        # confidence: the least sure first, only those that need an analyst, the evidence shown
        review = [r for r in rows if dashboard.needs_review(r, EvaluateParams())]
        queue = browse(f"{base}/funds?review=1&sort=low", "funds_review.png")
        assert f"{len(review)} / {len(rows)}" in queue and "Evidence (* in the model" in queue
        ordered = sorted(review, key=lambda r: r.get("grpo_confidence") or 0.0)
        if len(ordered) > 1:
            positions = [queue.index(f"<td>{r['share_class_id']}</td>") for r in (ordered[0], ordered[-1])]
            assert positions[0] < positions[1]
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(f"{base}/funds?sort=sideways", timeout=30)
        assert bad.value.code == 422
        backtest = browse(f"{base}/backtest", "backtest.png")
        assert "qwk" in backtest and "GRPO" in backtest and 'class="cm"' in backtest
        models = browse(f"{base}/models", "models.png")
        decision = json.loads((root / "metrics/register.json").read_text())
        assert f"<td>{decision['version']}</td>" in models and decision["alias"] in models
        drift = browse(f"{base}/drift", "drift.png")
        assert "<h1>Drift</h1>" in drift
        assert (SHOTS / "funds.png").stat().st_size > 1000
    finally:
        server.should_exit = True
        thread.join(10)


def test_korean_methodology_gives_korean_labels(trained, tmp_path):
    """A workspace whose methodology is Korean, with one monitoring report: Korean labels throughout."""
    root, _ = trained
    ws = tmp_path / "ws"
    for rel in ("params.yaml", "data/schema", "metrics/backtest.json", "reports/backtest/predictions.jsonl", "plots"):
        src, dst = root / rel, ws / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    rubric = json.loads((ws / "data/schema/rubric.json").read_text())
    (ws / "data/schema/rubric.json").write_text(json.dumps({**rubric, "language": "ko"}, ensure_ascii=False))
    report = ws / "monitoring/reports/2026-11-23/batch-2026-11"
    report.mkdir(parents=True)
    (report / "summary.json").write_text(
        json.dumps(
            {
                "batch": "batch-2026-11",
                "date": "2026-11-23",
                "verdict": "drift",
                "reason": "5 of 9 features drifted",
                "retrain": {"status": "registered"},
            }
        )
    )
    (report / "drift.html").write_text("<html><body>Evidently report</body></html>")
    server, thread, base = serve(ws)
    try:
        funds = browse(f"{base}/funds", "funds_ko.png")
        assert "펀드" in funds and "규칙 점수" in funds and "전문가" in funds
        drift = browse(f"{base}/drift", "drift_ko.png")
        assert "드리프트" in drift and "5 of 9 features drifted" in drift and "registered" in drift
        assert "Evidently report" in browse(
            f"{base}/reports/monitoring/reports/2026-11-23/batch-2026-11/drift.html", "drift_report.png"
        )
        assert "아직 없음" in browse(f"{base}/models", "models_ko.png")  # no registry in this workspace
    finally:
        server.should_exit = True
        thread.join(10)
