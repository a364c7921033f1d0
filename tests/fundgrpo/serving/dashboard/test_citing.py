"""The fund page's qualitative half in a browser: under a methodology with pillars, each pillar's
judgement beside the fund's documents, the quoted sentence highlighted where it was found, a quote the
documents do not hold served as not assessed, a document's markup shown as text, and a fund without
documents said to be unassessed. On the trained tiny repo's figures with the documents methodology
laid over them; English and Korean."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from selenium.webdriver.common.by import By

from fundgrpo.io import write_json
from fundgrpo.methodology import compiler
from fundgrpo.methodology.citations import NO_DOCUMENTS, NOT_FOUND, SAID_NOT_ASSESSED
from fundgrpo.serving.dashboard.citing import WORDS
from tests import support
from tests.fundgrpo.serving.dashboard.test_pages import Page, dashboard
from tests.support import REPO

pytestmark = pytest.mark.skipif(not support.has_browser(), reason=support.NO_BROWSER)

TEXT = {
    "en": ("Q3 meeting note. The lead manager resigned in May and was replaced by her deputy. <b>bold</b>",
           "The lead manager resigned in May and was replaced by her deputy."),
    "ko": ("3분기 미팅 노트. 책임운용역이 5월에 퇴사했고 부책임운용역이 자리를 이었다. <b>bold</b>",
           "책임운용역이 5월에 퇴사했고 부책임운용역이 자리를 이었다."),
}  # fmt: skip


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_fund_page_shows_each_pillar_beside_its_highlighted_citation(trained, tmp_path, language):
    root, _ = trained
    ws = tmp_path / "ws"
    for rel in ("params.yaml", "data/validated", "data/prepared", "metrics", "reports/backtest", "plots"):
        src, dst = root / rel, ws / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    compiled = compiler.compile_file(REPO / "methodology/documents.yaml")
    for name, obj in compiled.items():
        write_json({**obj, "language": language} if name == "rubric" else obj, ws / "data/schema" / f"{name}.json")

    rows = [json.loads(line) for line in (ws / "reports/backtest/predictions.jsonl").read_text().splitlines()]
    cited, bare = rows[0]["share_class_id"], rows[1]["share_class_id"]
    text, quote = TEXT[language]
    pillars = {
        "people": {"judgement": -1, "evidence": [{"document": 1, "sentence": 2}]},  # D1's, the quote
        "process": {"judgement": 1, "evidence": [{"document": 1, "sentence": 9}]},  # a sentence D1 lacks
        "parent": {"judgement": "not assessed", "evidence": []},
    }
    answer = {"pillars": pillars, "grade": 3, "score": 50, "reasoning": "Average."}
    rows[0].update(grpo_text=json.dumps(answer, ensure_ascii=False))
    rows[1].update(grpo_text=json.dumps(answer, ensure_ascii=False))
    (ws / "reports/backtest/predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for path in (ws / "data/prepared").glob("*.jsonl"):  # the documents each prompt showed
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for r in records:
            r["documents"] = json.dumps({"D1": text} if r["share_class_id"] == cited else {}, ensure_ascii=False)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    docs = pd.DataFrame([{"document_id": "D1", "key_kind": "share_class", "key": cited, "date": "2024-06-30",
                          "kind": "meeting_note", "language": language, "text": text, "source": "t"}])  # fmt: skip
    (ws / "data/canonical").mkdir(parents=True)
    docs.to_parquet(ws / "data/canonical/documents.parquet")

    w = WORDS[language]
    with dashboard(ws) as base:
        page = Page("1500,1800")
        try:
            body = page.open(f"{base}/fund?id={cited}", w["documents"])
            marks = page.wait_css("div.fund-document mark")
            assert [m.text for m in marks] == [quote]  # the verified quote only, where it was found
            assert "<b>bold</b>" in body  # the document's markup is text, never rendered
            assert not page.driver.find_elements(By.CSS_SELECTOR, "div.fund-document b:not(small b)")
            assert "2024-06-30" in body and "meeting_note" in body
            page.wait_grid_text(f"{w['not_assessed']} ({w[NOT_FOUND]})")  # judged on words no document holds
            page.wait_grid_text(f"{w['not_assessed']} ({w[SAID_NOT_ASSESSED]})")
            page.wait_grid_text(quote)
            page.shot(f"dashboard_fund_pillars_{language}.png")

            body = page.open(f"{base}/fund?id={bare}", w["title"])
            body = page.wait_text(w["no_documents"])
            page.wait_grid_text(f"{w['not_assessed']} ({w[NO_DOCUMENTS]})")  # never guessed without documents
            assert not page.driver.find_elements(By.CSS_SELECTOR, "div.fund-document")
        finally:
            page.quit()
