"""The dashboard as an analyst uses it: `python -m fundgrpo.serving.dashboard` (Streamlit) over the
trained tiny repo, driven in headless Chromium (selenium): search, open a fund from its row, every
page's charts drawn, the version it shows named, Korean labels, and a decision made through the API
from the review page. Screenshots land in reports/screenshots/."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from fundgrpo.methodology.compiler import load_methodology
from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.keys import add_key
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store
from fundgrpo.serving.dashboard.labels import LABELS, category_words
from tests import support
from tests.support import REPO

SHOTS = REPO / "reports" / "screenshots"
pytestmark = pytest.mark.skipif(not support.has_browser(), reason=support.NO_BROWSER)


@contextmanager
def dashboard(root: Path, env: dict | None = None):
    """The dashboard as documented, in `root`; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environ = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}  # the workspace's own registry
    proc = subprocess.Popen(
        [sys.executable, "-m", "fundgrpo.serving.dashboard", "--port", str(port)],
        cwd=root,
        env={**environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            try:
                urllib.request.urlopen(f"{base}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        log = proc.communicate(timeout=30)[0]
    assert "use_container_width" not in log, log[-2000:]  # no deprecated arguments flooding the server's log


class Page:
    """One browser on the dashboard, with waits for what Streamlit renders after its scripts run."""

    def __init__(self, size: str = "1400,1600"):
        self.driver = support.browser(size)

    def open(self, url: str, until: str | tuple[str, ...]) -> str:
        self.driver.get(url)
        return self.wait_text(until)

    def wait_text(self, text: str | tuple[str, ...], timeout: float = 90) -> str:
        """The page's text once it shows `text` (or any of several) and its script has finished. A
        text the sidebar also shows (a page's title is its link's) does not say the page has drawn."""
        any_of = (text,) if isinstance(text, str) else text
        try:  # the text, and the script finished (no running indicator)
            WebDriverWait(self.driver, timeout).until(
                lambda d: (
                    any(t in d.find_element(By.TAG_NAME, "body").text for t in any_of)
                    and not d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
                )
            )
        except TimeoutException:
            self.fail_on_exception()
            body = self.driver.find_element(By.TAG_NAME, "body").text
            raise AssertionError(f"{text!r} not shown in {timeout} s at {self.driver.current_url}:\n{body[:3000]}")
        self.fail_on_exception()
        return self.driver.find_element(By.TAG_NAME, "body").text

    def wait_css(self, css: str, count: int = 1, timeout: float = 90) -> list:

        try:
            WebDriverWait(self.driver, timeout).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, css)) >= count)
        except TimeoutException:
            self.fail_on_exception()
            found = len(self.driver.find_elements(By.CSS_SELECTOR, css))
            raise AssertionError(f"{count} x {css!r} expected, {found} found at {self.driver.current_url}")
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait_grid_text(self, text: str, timeout: float = 90) -> None:
        """Wait until a table (Streamlit draws it on a canvas) holds `text` in its accessible cells."""

        def cells(d) -> str:
            return " ".join(
                g.get_attribute("textContent") for g in d.find_elements(By.CSS_SELECTOR, "[data-testid=stDataFrame]")
            )

        try:
            WebDriverWait(self.driver, timeout).until(lambda d: text in cells(d))
        except TimeoutException:
            raise AssertionError(f"{text!r} in no table at {self.driver.current_url}: {cells(self.driver)[:2000]}")

    def fail_on_exception(self) -> None:

        shown = self.driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        assert not shown, shown[0].text[:3000]

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        time.sleep(1)  # charts finish drawing
        self.driver.save_screenshot(str(SHOTS / name))

    def choose(self, label: str, option: str) -> None:
        """Pick `option` in the selectbox labelled `label`."""

        def labelled():
            boxes = self.driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSelectbox"]')
            return {b.find_element(By.CSS_SELECTOR, '[data-testid="stWidgetLabel"]').text.strip(): b for b in boxes}

        deadline = time.monotonic() + 60
        while label not in labelled():
            assert time.monotonic() < deadline, f"no selectbox {label!r} among {list(labelled())}"
            time.sleep(0.3)
        box = labelled()[label]
        box.find_element(By.CSS_SELECTOR, "input").click()
        options = self.wait_css('[role="option"]')
        next(o for o in options if o.text.strip() == option).click()

    def type_into(self, css: str, text: str) -> None:
        """Replace what the field at `css` holds with `text`, then Enter (Streamlit reruns on it)."""

        field = self.wait_css(css)[0]
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(Keys.DELETE)
        field.send_keys(text, Keys.ENTER)

    def quit(self) -> None:
        self.driver.quit()


def test_an_analyst_searches_opens_a_fund_and_reads_every_page(trained):

    root, _ = trained
    rows = [json.loads(line) for line in (root / "reports/backtest/predictions.jsonl").read_text().splitlines()]
    funds = pd.read_parquet(root / "data/validated/funds.parquet").set_index("share_class_id")
    versions = support.versions(root)
    client = support.mlflow_client(root)
    aliases = client.get_registered_model("fund-evaluator").aliases  # alias -> version
    champion = aliases.get("champion")
    shown = int(champion or max(versions))  # the champion's figures, else the newest version's
    serving = f"serves champion v{champion}" if champion else "serves no champion yet"
    with dashboard(root) as base:
        page = Page()
        try:
            # every page names the version it shows: the champion's by default
            text = page.open(base, f"of {len(rows)} tested share classes")
            assert f"Figures of fund-evaluator v{shown} (" in text and serving in text
            page.wait_css('[data-testid="glide-cell-2-0"]')  # the grid's accessible cells: names, not ids only
            page.shot("dashboard_funds.png")

            # ordered by name: the first row is the first name
            next(b for b in page.wait_css("button") if b.text.strip() == "by name").click()
            names = sorted(str(funds.loc[r["share_class_id"], "name"]) for r in rows)
            WebDriverWait(page.driver, 60).until(
                lambda d: (
                    d.find_element(By.CSS_SELECTOR, '[data-testid="glide-cell-2-0"]').get_attribute("innerText")
                    == names[0]
                )
            )

            next(b for b in page.wait_css("button") if b.text.strip() == "as tested").click()

            # search by a fund's name, in any case: the count follows, the row opens the fund's page
            target = rows[0]["share_class_id"]
            name = funds.loc[target, "name"]
            expected = sum(name.casefold() in str(funds.loc[r["share_class_id"], "name"]).casefold() for r in rows)
            box = page.wait_css('[data-testid="stTextInput"] input')[0]
            box.send_keys(name.upper(), Keys.ENTER)
            page.wait_text(f"{expected} of {len(rows)} tested share classes")
            # the grid redraws its cells after the script has finished: wait for them, as for the order above
            WebDriverWait(page.driver, 60).until(
                lambda d: (
                    d.find_element(By.CSS_SELECTOR, '[data-testid="glide-cell-2-0"]').get_attribute("innerText") == name
                )
            )
            for _ in range(3):  # the first row's selection box; a click while the grid redraws can be lost
                grid = page.wait_css('[data-testid="stDataFrame"] canvas')[0]
                w, h = grid.size["width"], grid.size["height"]
                ActionChains(page.driver).move_to_element_with_offset(
                    grid, -w // 2 + 18, -h // 2 + 54
                ).click().perform()
                try:
                    WebDriverWait(page.driver, 15).until(lambda d: "/fund?" in d.current_url)
                    break
                except TimeoutException:
                    continue
            # Streamlit draws the page top to bottom: wait for each section, not just the first (the
            # text once read before "Reasoning" and "Grade history" were drawn)
            for section in ("Each evaluator's grade", "The methodology's verdict", "Against its peers", "Reasoning",
                            "Grade history"):  # fmt: skip
                text = page.wait_text(section)
            assert f"/fund?id={target}" in page.driver.current_url and name in text
            page.wait_css(".vega-embed", 1 + bool(rows[0].get("grpo_probs")))  # percentiles among peers, probabilities
            page.shot("dashboard_fund.png")

            text = page.open(f"{base}/backtest", "Confusion")
            assert f"{len(rows)} test share classes" in text
            page.wait_grid_text("GRPO")
            page.wait_grid_text("GBM")
            page.wait_css(".vega-embed", 6)  # four heatmaps, the distribution, reliability (+ rewards)
            assert "GRPO reward curves" in text
            page.shot("dashboard_backtest.png")

            page.open(f"{base}/models", "Metrics per model version")
            for alias in aliases:  # the table's cells: in the grid's accessible table, not the visible text
                page.wait_grid_text(alias)
            page.wait_grid_text("qwk")
            page.wait_css(".vega-embed")
            page.shot("dashboard_models.png")

            page.open(f"{base}/drift", ("Drop a batch into data/incoming", "over time"))  # not "Drift": the link's

            # any version by choice (the URL keeps it); an unknown one falls back to the champion
            for v in versions:
                text = page.open(f"{base}/backtest?version={v}", f"Figures of fund-evaluator v{v} (")
                assert serving in text
            page.open(f"{base}/backtest?version=999", f"Figures of fund-evaluator v{shown} (")
            # a careless or hostile link: an unknown share class says so (never another fund), nothing is run
            text = page.open(f"{base}/fund?id=%3Cscript%3Ealert(1)%3C%2Fscript%3E", "No share class")
            assert "<script>alert(1)</script> in the universe" in text and "Each evaluator's grade" not in text
            # a training fund (not tested) opens its own page, not another fund's
            trained_id = next(i for i in funds.index if i not in {r["share_class_id"] for r in rows})
            text = page.open(f"{base}/fund?id={trained_id}", "Not among this version's tested share classes")
            assert str(funds.loc[trained_id, "name"]) in text and "The methodology's verdict" in text
        finally:
            page.quit()


def test_korean_labels_drift_over_time_and_a_workspace_without_registry(trained, tmp_path):
    """A Korean methodology's workspace with two monitored batches and no registry: Korean words,
    the drift chart and a batch's rating migration, and the line saying these are the workspace's figures."""
    root, _ = trained
    ws = tmp_path / "ws"
    for rel in (
        "params.yaml",
        "data/schema",
        "data/validated",
        "data/prepared",
        "metrics",
        "reports/backtest",
        "plots",
    ):
        src, dst = root / rel, ws / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    rubric = json.loads((ws / "data/schema/rubric.json").read_text())
    (ws / "data/schema/rubric.json").write_text(json.dumps({**rubric, "language": "ko"}, ensure_ascii=False))
    for date, share, migration, verdict in (("2026-10-01", 0.1, 0.05, "no drift"), ("2026-11-01", 0.6, 0.3, "drift")):
        folder = ws / "monitoring/reports" / date / f"batch-{date[:7]}"
        folder.mkdir(parents=True)
        summary = {
            "batch": folder.name,
            "date": date,
            "verdict": verdict,
            "reason": f"{share} of the features drifted",
            "data_drift": {"share": share},
            "prediction_drift": {"migration": migration, "transitions": {"3": {"3": 20, "4": 5}, "2": {"2": 9}}},
            "retrain": {"status": "done" if verdict == "drift" else "not needed"},
        }
        (folder / "summary.json").write_text(json.dumps(summary))
        (folder / "drift.html").write_text("<html><body><h2>Evidently report</h2></body></html>")
    with dashboard(ws) as base:
        page = Page()
        try:
            text = page.open(base, "테스트 클래스")
            assert "펀드" in text and "이 작업공간의 마지막 학습 실행" in text and "챔피언 없음" in text
            page.wait_css('[data-testid="glide-cell-2-0"]')
            page.shot("dashboard_funds_ko.png")
            text = page.open(f"{base}/drift", "시간에 따른 드리프트와 등급 이동")
            assert "batch-2026-11" in text and "드리프트" in text
            page.wait_css(".vega-embed", 2)  # over time; the latest batch's migration
            page.shot("dashboard_drift_ko.png")
        finally:
            page.quit()


@pytest.mark.parametrize("language", ["en", "ko"])
def test_an_analyst_decides_from_the_review_page_through_the_api_with_their_key(trained, tmp_path, language):
    from tests.fundgrpo.serving.test_api import workspace_view

    root, _ = trained
    t = LABELS[language]
    shown_root = root
    if language == "ko":  # the same workspace, its methodology in Korean
        shown_root = workspace_view(root, tmp_path / "ws", own=("data",))
        rubric = json.loads((shown_root / "data/schema/rubric.json").read_text())
        (shown_root / "data/schema/rubric.json").write_text(
            json.dumps({**rubric, "language": "ko"}, ensure_ascii=False)
        )
    refused = t["refused"].format(status="{status}", detail="X").split(": X")[0]  # "Refused ({status})"
    recorded = t["recorded"].split("{id}")[1]  # " recorded: {sid} → grade {grade}"
    keys = tmp_path / "keys.json"
    made = {
        n: add_key(keys, n, s) for n, s in (("desk", ["evaluate"]), ("viewer", ["read"]), ("ana", ["read", "review"]))
    }
    store_url = f"sqlite:///{tmp_path}/store.db"
    settings = ApiSettings(keys_file=keys, db_url=store_url, model=str(root / "models/policy"), alias_check_s=0.0)
    test = [json.loads(line) for line in (root / "data/prepared/test.jsonl").read_text().splitlines()]
    reference = pd.read_parquet(root / "data/validated/funds.parquet").set_index("share_class_id", drop=False)
    server, api = support.serve(create_app(root, settings))
    reason = "Costs are the worst of its peers." if language == "en" else "보수가 동일 유형에서 가장 높습니다."
    try:
        funds = [support.canonical(reference.loc[r["share_class_id"]]) for r in test[:4]]
        support.call(api, "/v1/evaluations", made["desk"], {"funds": funds})
        queue = support.call(api, "/v1/review-queue", made["viewer"])["items"]
        assert len(queue) >= 2, "the tiny model is unsure (or invalid) on these"
        target = queue[0]["share_class_id"]
        with dashboard(shown_root, {"FUNDGRPO_API_URL": api}) as base:
            page = Page()
            try:
                page.open(f"{base}/review", t["review"])
                page.type_into('input[type="password"]', "not-a-key")
                page.wait_text(refused.format(status=401))
                page.type_into('input[type="password"]', made["viewer"])
                text = page.wait_text(t["queue_n"].format(n=len(queue)))
                assert made["viewer"] not in page.driver.current_url
                page.choose(t["new_grade"], "5")
                page.wait_css('[data-testid="stTextArea"] textarea')[0].send_keys(reason)
                page.wait_css('[data-testid="stFormSubmitButton"] button')[0].click()
                text = page.wait_text(refused.format(status=403))
                assert "review" in text
                page.type_into('input[type="password"]', made["ana"])
                page.wait_text(t["queue_n"].format(n=len(queue)))
                # a reason of spaces: refused in words naming the field, never the API's raw list of errors
                area = page.wait_css('[data-testid="stTextArea"] textarea')[0]
                area.send_keys(Keys.CONTROL, "a")
                area.send_keys(Keys.DELETE)
                area.send_keys("   ")
                page.wait_css('[data-testid="stFormSubmitButton"] button')[0].click()
                text = page.wait_text(refused.format(status=422))
                assert "reason: reason is empty: say why the grade is what it is" in text and '"type"' not in text
                area = page.wait_css('[data-testid="stTextArea"] textarea')[0]
                area.send_keys(Keys.CONTROL, "a")
                area.send_keys(Keys.DELETE)
                area.send_keys(reason)
                page.choose(t["new_grade"], "5")
                page.wait_css('[data-testid="stFormSubmitButton"] button')[0].click()
                page.wait_text(recorded.format(sid=target, grade=5).strip())
                # the decided one has left (the page reruns once more to show the next fund's form)
                text = page.wait_text(t["queue_n"].format(n=len(queue) - 1))
                assert recorded.format(sid=target, grade=5).strip() in text
                # the next fund's form starts afresh: no reason carried over, the grade from the model's
                # (its methodology's when the answer is invalid), never silently grade 1
                following = queue[1]
                start = following["grade"] or following["rule_grade"] or following["evidence"]["gbm_grade"]

                # read afresh on every poll: a rerun replaces the elements (stale references under load)
                def form(d) -> tuple[str, str]:
                    area = d.find_element(By.CSS_SELECTOR, '[data-testid="stTextArea"] textarea')
                    box = next(b for b in d.find_elements(By.CSS_SELECTOR, '[data-testid="stSelectbox"]')
                               if b.text == t["new_grade"])  # fmt: skip
                    grade = box.find_element(By.CSS_SELECTOR, "input").get_attribute("value")
                    return area.get_attribute("value"), grade

                settled = (StaleElementReferenceException, StopIteration, NoSuchElementException)
                try:
                    wait = WebDriverWait(page.driver, 30, ignored_exceptions=settled)
                    wait.until(lambda d: form(d) == ("", str(start)))
                except TimeoutException:
                    raise AssertionError(f"the next form shows {form(page.driver)}, not ('', {str(start)!r})") from None
                # the queue shows what the API's page shows: gradient boosting's grade, the label now
                page.wait_grid_text(t["gbm"])
                page.wait_grid_text(t["label_now"])
                page.shot(f"dashboard_review_{language}.png")
            finally:
                page.quit()
    finally:
        server.should_exit = True
    [decision] = Store(store_url).list_decisions(target)
    assert (decision["analyst"], decision["new_grade"], decision["reason"]) == ("ana", 5, reason)
    audit = [(a["actor"], a["action"], a["detail"].get("status")) for a in Store(store_url).audit_log()]
    assert ("viewer", "refused", None) in audit  # the viewer's decision, refused for its scope, is audited
    assert [a for a in audit if a[:2] == ("ana", "refused")] == [("ana", "refused", 422)]  # the empty reason


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_book_finds_every_fund_and_a_contradicted_grade_says_why(trained, tmp_path, language):
    """The book lists the universe and every fund the API or a batch scored, searchable by name,
    category and share class; each opens its page, an unknown id says so. A grade its own
    probabilities do not put first is explained in words beside its chart. English and Korean."""
    root, _ = trained
    ws = tmp_path / "ws"
    for rel in (
        "params.yaml",
        "data/schema",
        "data/validated",
        "data/prepared",
        "metrics",
        "reports/backtest",
        "plots",
    ):
        src, dst = root / rel, ws / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    rubric = json.loads((ws / "data/schema/rubric.json").read_text())
    (ws / "data/schema/rubric.json").write_text(json.dumps({**rubric, "language": language}, ensure_ascii=False))
    # the served rule of a calibrated model: the expected grade through validation cut-points
    fit = {"method": "score", "confidence": "token", "grade_from": "expected", "cutpoints": [2.05, 2.67, 3.44, 4.01]}
    (ws / "models").mkdir()
    (ws / "models/calibration.json").write_text(json.dumps(fit))
    path = ws / "reports/backtest/predictions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    contradicted = rows[0]["share_class_id"]
    rows[0].update(grpo_grade=1, grpo_valid=True, grpo_probs=[0.3, 0.63, 0.05, 0.01, 0.01], grpo_expected_grade=2.03,
                   grpo_confidence=0.3)  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # a batch's evaluations (a fund new to the universe among them) and the API's store
    funds = pd.read_parquet(ws / "data/validated/funds.parquet")
    tested = {r["share_class_id"] for r in rows}
    korea = funds[(funds["category"] == "Korea Equity") & ~funds["share_class_id"].isin(tested)].iloc[0]
    other = funds[funds["category"] != "Korea Equity"].iloc[0]
    batch = pd.DataFrame([
        {"share_class_id": "NEW-1", "name": "Fresh Start Fund", "category": "Korea Equity", "grade": 4,
         "confidence": 0.7, "needs_analyst": True, "review": "new to the universe", "model": "models:/m/1",
         "evaluated_at": "2026-11-20T08:00:00+00:00"},
        {"share_class_id": "NEW-2", "name": "Young Fund", "category": "Korea Equity", "grade": None,
         "confidence": None, "needs_analyst": True, "model": "models:/m/1", "evaluated_at": "2026-11-20T08:00:00+00:00",
         "review": "invalid answer", "reason": "not graded: the fund lacks 3-year Sharpe ratio (sharpe_3y)"},
        {"share_class_id": str(other["share_class_id"]), "name": other["name"], "category": other["category"],
         "grade": 3, "confidence": 0.8, "needs_analyst": False, "review": "", "model": "models:/m/1",
         "evaluated_at": "2026-11-20T08:00:00+00:00"},
    ])  # fmt: skip
    (ws / "reports/evaluations/2026-11").mkdir(parents=True)
    batch.to_csv(ws / "reports/evaluations/2026-11/evaluations.csv", index=False)
    store = Store(f"sqlite:///{ws}/evaluations.db")
    evaluated = {"share_class_id": str(korea["share_class_id"]), "grade": 2, "name": korea["name"],
                 "category": "Korea Equity", "needs_analyst": True, "review": ["confidence 0.2 below 0.5"]}  # fmt: skip
    store.add([evaluated], "models:/m/1")
    store.decide(store.latest(str(korea["share_class_id"])), 3, "peers lag it", "ana", None)
    t = LABELS[language]
    with dashboard(ws) as base:
        page = Page()
        try:
            total = len(set(funds["share_class_id"].astype(str)) | {"NEW-1", "NEW-2"})
            text = page.open(f"{base}/book", t["book_n"].format(shown=total, total=total))
            page.type_into('[data-testid="stTextInput"] input', "korea")  # the category, in any case
            korea_n = int((funds["category"] == "Korea Equity").sum()) + 2
            page.wait_text(t["book_n"].format(shown=korea_n, total=total))
            page.wait_grid_text("Fresh Start Fund")
            page.wait_grid_text(t["state_decided"])
            page.shot(f"dashboard_book_{language}.png")
            # a fund only a batch scored opens its page, with that evaluation
            text = page.open(f"{base}/fund?id=NEW-1", t["latest"])
            assert "Fresh Start Fund" in text and t["not_tested_here"][:20] in text
            page.wait_grid_text("batch 2026-11/evaluations.csv")
            # a fund with gaps: its refusal names what it lacks
            page.open(f"{base}/fund?id=NEW-2", t["latest"])
            page.wait_grid_text("not graded: the fund lacks 3-year Sharpe ratio (sharpe_3y)")
            # the one an analyst decided shows the decision; an unknown id says so
            page.open(f"{base}/fund?id={korea['share_class_id']}", t["latest"])
            page.wait_grid_text(t["state_decided"])
            page.open(f"{base}/fund?id=NOPE-404", "NOPE-404")
            # a grade its probabilities contradict: the words beside the chart
            text = page.open(f"{base}/fund?id={contradicted}", t["why_grade"])
            assert ("2.03" in text) and (("expected grade" in text) if language == "en" else ("기대 등급" in text))
            page.wait_css(".vega-embed", 2)
            page.shot(f"dashboard_grade_note_{language}.png")
        finally:
            page.quit()


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_fund_page_is_true_to_what_is_served_decided_and_scored(trained, tmp_path, language):
    """Served by a stack (a quarter the model's, three quarters gradient boosting's): the served evaluator is
    named for that, the first line says it, and a fund whose text was written for another grade says whose
    grade it is. A fund an analyst decided says so and no longer "needs an analyst"; a fund the API scored opens
    with its reasoning, note and chart; the book's every column fits 1,900 pixels. English and Korean."""
    root, _ = trained
    ws = tmp_path / "ws"
    for rel in (
        "params.yaml",
        "data/schema",
        "data/validated",
        "data/prepared",
        "metrics",
        "reports/backtest",
        "plots",
    ):
        src, dst = root / rel, ws / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    rubric = json.loads((ws / "data/schema/rubric.json").read_text())
    (ws / "data/schema/rubric.json").write_text(json.dumps({**rubric, "language": language}, ensure_ascii=False))
    fit = {"serves": "stack", "method": "score", "confidence": "pooled", "pool": [0.4, 1.2], "temperature": 1.0,
           "grade_from": "likeliest", "cutpoints": None, "chosen": "stack/score/likeliest"}  # fmt: skip
    (ws / "models").mkdir()
    (ws / "models/calibration.json").write_text(json.dumps(fit))
    path = ws / "reports/backtest/predictions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    stacked, decided = rows[0]["share_class_id"], rows[1]["share_class_id"]
    wrote = {"grade": 5, "score": 95, "reasoning": "Excellent. Sharpe ratio top 10%"}
    rows[0].update(grpo_grade=3, grpo_valid=True, grpo_text=json.dumps(wrote), grpo_probs=[0.05, 0.2, 0.4, 0.3, 0.05],
                   grpo_confidence=0.4)  # fmt: skip
    rows[1].update(grpo_grade=2, grpo_valid=True, grpo_confidence=0.1, grpo_probs=[0.3, 0.35, 0.2, 0.1, 0.05])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    funds = pd.read_parquet(ws / "data/validated/funds.parquet")
    tested = {r["share_class_id"] for r in rows}
    scored, new, unrated = funds[~funds["share_class_id"].isin(tested)].iloc[:3].itertuples()
    # two share classes with no prepared record (no expert grade): one new with its data, one with too little
    for split in (ws / "data/prepared").glob("*.jsonl"):
        kept = [line for line in split.read_text().splitlines() if json.loads(line)["share_class_id"] not in
                {new.share_class_id, unrated.share_class_id}]  # fmt: skip
        split.write_text("".join(line + "\n" for line in kept))
    methodology = load_methodology(ws / "data/schema")
    kept_metric = min(methodology.criteria, key=lambda c: c.weight).metric
    blanked = [c.metric for c in methodology.criteria if c.metric != kept_metric]
    funds.loc[funds["share_class_id"] == unrated.share_class_id, blanked] = None
    funds.to_parquet(ws / "data/validated/funds.parquet")
    store = Store(f"sqlite:///{ws}/evaluations.db")
    note = "Grade 4 is the language model's grade probabilities (25%) pooled with gradient boosting's (75%)"
    store.add([{"share_class_id": str(scored.share_class_id), "name": scored.name, "category": scored.category,
                "grade": 4, "confidence": 0.55, "needs_analyst": False, "review": [], "reasoning": "Steady and cheap.",
                "grade_note": note, "probabilities": {"1": 0.05, "2": 0.1, "3": 0.25, "4": 0.55, "5": 0.05}}],
              "models:/fund-evaluator/1")  # fmt: skip
    unsure = {"share_class_id": decided, "grade": 2, "needs_analyst": True, "review": ["confidence 0.10 below 0.50"]}
    store.add([unsure], "models:/fund-evaluator/1")
    store.decide(store.latest(decided), 4, "peers lag it", "ana", None)
    t = LABELS[language]
    served = {"en": "Served: model 25% + gradient boosting 75%", "ko": "제공 등급: 모델 25% + 그래디언트 부스팅 75%"}
    with dashboard(ws) as base:
        page = Page("1900,1300")
        try:
            text = page.open(f"{base}/fund?id={stacked}", t["whose_grade"])
            for section in (t["grades"], t["reasoning"], t["history"]):
                text = page.wait_text(section)
            first = {
                "en": "Grades served: the language model's grade probabilities (25%) pooled with gradient",
                "ko": "제공 등급: 언어 모델의 등급 확률(25%)과 그래디언트 부스팅의 확률(75%)을 합친 등급",
            }
            assert first[language] in text
            page.wait_grid_text(served[language])  # the evaluator is named for what it serves
            assert {"en": "written for grade 5", "ko": "등급 5로 쓴 것입니다"}[language] in text
            page.shot(f"dashboard_fund_stack_{language}.png")

            text = page.open(f"{base}/fund?id={decided}", t["decided_line"].split("{")[0].strip())
            text = page.wait_text(t["reasoning"])
            assert t["decided_line"].format(grade=4, by="ana") in text and t["needs_analyst"] not in text
            page.shot(f"dashboard_fund_decided_{language}.png")

            text = page.open(f"{base}/fund?id={scored.share_class_id}", t["latest"])
            text = page.wait_text("Steady and cheap.")
            assert note in text and str(scored.name) in text
            page.wait_css(".vega-embed", 2)  # the probabilities, and the percentiles among peers
            page.shot(f"dashboard_fund_api_{language}.png")

            # no prepared record: the verdict and the peers from the universe, and why a fund is not rated
            peers = int((funds["category"] == unrated.category).sum())
            heading = t["vs_peers"].format(peers=peers, category=category_words(unrated.category, language))
            text = page.open(f"{base}/fund?id={unrated.share_class_id}", heading)
            reason = {"en": "not rated: data for", "ko": "평가 제외: 기준 가중치의"}[language]
            assert reason in text and f"{t['grade']} — · {t['score']} —" in text, text[:3000]
            page.wait_grid_text(methodology.label(methodology.criteria[0]))  # the criteria it lacks, shown
            page.shot(f"dashboard_fund_not_rated_{language}.png")
            heading = t["vs_peers"].format(peers=int((funds["category"] == new.category).sum()),
                                           category=category_words(new.category, language))  # fmt: skip
            text = page.open(f"{base}/fund?id={new.share_class_id}", heading)
            assert f"{t['grade']} —" not in text and reason not in text  # the rule grades a new fund with its data

            # the funds page: the decided fund needs no analyst there either; the book: every column fits
            page.open(base, t["shown_n"].split("{")[0].strip() or t["funds"])
            page.open(f"{base}/book", t["book"])
            page.type_into('[data-testid="stTextInput"] input', decided)  # the grid reads out its visible rows only
            page.wait_grid_text(t["state_decided"])
            scroller = page.wait_css('[data-testid="stDataFrame"] .dvn-scroller')[0]
            fits = page.driver.execute_script(
                "return arguments[0].scrollWidth <= arguments[0].clientWidth + 2", scroller
            )
            page.shot(f"dashboard_book_1900_{language}.png")
            assert fits, "the book's right-hand columns are cut off at 1,900 pixels"
        finally:
            page.quit()
