"""The review loop end to end, as the analysts use it: a fund the evaluator is unsure of appears in
the review queue; in a real browser (the API's /review page, Chromium driven by selenium) a key
without the `review` scope is refused and an analyst's `review` key changes the grade with a
reason; `dvc repro` takes the decision as a label; the fund's next evaluation shows it as the
expert grade. Real API server (uvicorn), real SQLite store, real DVC on the session's tiny repo."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.keys import add_key
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store
from tests import support
from tests.support import REPO, browser, call, canonical, run, serve

SHOTS = REPO / "reports" / "screenshots"
pytestmark = pytest.mark.skipif(not support.has_browser(), reason=support.NO_BROWSER)


def decide_in_page(driver, key: str, share_class_id: str, grade: int, reason: str, shot: str) -> str:
    """Load the queue with `key`, decide `share_class_id` in its row; the row's message."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    field = driver.find_element(By.ID, "key")
    field.clear()
    field.send_keys(key)
    row_css = f'tr[data-share-class="{share_class_id}"]'
    shown = driver.find_elements(By.CSS_SELECTOR, row_css)  # the queue loaded with the previous key
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    if shown:  # wait until this key's queue has replaced it
        WebDriverWait(driver, 60).until(ec.staleness_of(shown[0]))
    WebDriverWait(driver, 60).until(ec.presence_of_element_located((By.CSS_SELECTOR, row_css)))
    row = driver.find_element(By.CSS_SELECTOR, row_css)
    Select(row.find_element(By.NAME, "grade")).select_by_value(str(grade))
    row.find_element(By.NAME, "reason").send_keys(reason)
    row.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    message = row.find_element(By.CSS_SELECTOR, "form .msg")
    WebDriverWait(driver, 60).until(lambda d: message.text.strip() != "")
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / shot))
    return message.text


def test_a_low_confidence_fund_is_reviewed_in_a_browser_and_becomes_a_label(trained, tmp_path):
    root, _ = trained
    prepared_before = (root / "data/prepared/test.jsonl").read_text()
    store_url = f"sqlite:///{tmp_path}/store.db"  # this test's own store (the tiny repo is shared)
    keys = tmp_path / "keys.json"
    made = {
        n: add_key(keys, n, s) for n, s in (("desk", ["evaluate"]), ("viewer", ["read"]), ("ana", ["read", "review"]))
    }
    settings = ApiSettings(keys_file=keys, db_url=store_url, model=str(root / "models/policy"), alias_check_s=0.0)
    test = [json.loads(line) for line in (root / "data/prepared/test.jsonl").read_text().splitlines()]
    reference = pd.read_parquet(root / "data/validated/funds.parquet").set_index("share_class_id", drop=False)
    funds = [canonical(reference.loc[r["share_class_id"]]) for r in test[:4]]

    server, base = serve(create_app(root, settings))
    try:
        evaluated = call(base, "/v1/evaluations", made["desk"], {"funds": funds})["evaluations"]
        queue = call(base, "/v1/review-queue", made["viewer"])
        mine = [e for e in queue["items"] if e["share_class_id"] in {f["share_class_id"] for f in funds}]
        assert mine, queue  # the tiny model is unsure (or invalid) on these
        target = mine[0]
        assert target["why"] and target["expert"]["grade"] in range(1, 6)  # a labelled fund of the test split
        new_grade = next(g for g in (1, 5, 2, 4, 3) if g != target["expert"]["grade"])

        driver = browser()
        try:
            driver.get(base + "/review")
            assert "Review queue" in driver.title
            refused = decide_in_page(driver, made["viewer"], target["share_class_id"], new_grade, "x", "review_403.png")
            assert "403" in refused and "review" in refused
            reason = "Costs are the worst among its peers; the record does not make up for them."
            done = decide_in_page(driver, made["ana"], target["share_class_id"], new_grade, reason, "review_ok.png")
            assert f"-> {new_grade}" in done, done
        finally:
            driver.quit()
    finally:
        server.should_exit = True

    [decision] = Store(store_url).list_decisions(target["share_class_id"])
    assert (decision["analyst"], decision["new_grade"], decision["reason"]) == ("ana", new_grade, reason)
    assert decision["evaluation_id"] == target["evaluation_id"]
    assert (
        decision["old_grade"] == next(e for e in evaluated if e["share_class_id"] == target["share_class_id"])["grade"]
    )

    # dvc repro takes it as a label (the store by URL, as the API was given it); this store is not the
    # workspace's own, where other tests may have left decisions: start its table over, on purpose
    env = {**os.environ, "FUNDGRPO_DB_URL": store_url, "PYTHONPATH": str(REPO)}
    (root / "data/decisions/decisions.csv").unlink(missing_ok=True)
    repro = run([sys.executable, "-m", "dvc", "repro", "prepare"], root, env=env, timeout=900)
    assert "Running stage 'decisions'" in repro.stdout and "Running stage 'prepare'" in repro.stdout
    labelled = {json.loads(line)["share_class_id"]: json.loads(line) for line in
                (root / "data/prepared/test.jsonl").read_text().splitlines()}  # fmt: skip
    record = labelled[target["share_class_id"]]
    assert (record["expert_grade"], record["label_source"]) == (new_grade, "analyst")

    # the fund's next evaluation shows it as the expert grade
    server, base = serve(create_app(root, settings))
    try:
        again = call(
            base,
            "/v1/evaluations",
            made["desk"],
            {"funds": [f for f in funds if f["share_class_id"] == target["share_class_id"]]},
        )
    finally:
        server.should_exit = True
    expert = again["evaluations"][0]["expert"]
    assert expert == {"grade": new_grade, "source": "analyst", "decision_id": decision["id"]}
    # leave the shared repo as the session's other tests expect it: its labels from its own store
    # (where another test may have left decisions), so `dvc.lock` matches that store again
    # (the table holds a decision that store lacks: the stage refuses until the table is removed)
    own = {k: v for k, v in env.items() if k != "FUNDGRPO_DB_URL"}
    table = root / "data/decisions/decisions.csv"
    kept = table.read_bytes()
    refused = run([sys.executable, "-m", "dvc", "repro", "prepare"], root, env=own, check=False)
    assert refused.returncode != 0 and "holds 1 decision(s) the store at" in refused.stdout + refused.stderr
    assert table.read_bytes() == kept
    table.unlink()
    run([sys.executable, "-m", "dvc", "repro", "prepare"], root, env=own)
    assert (root / "data/prepared/test.jsonl").read_text() == prepared_before


def test_the_review_page_is_inert_without_a_key(trained, tmp_path):
    """The page itself holds no data: the queue needs a key; its headers forbid framing and inline scripts."""
    from fastapi.testclient import TestClient

    root, _ = trained
    settings = ApiSettings(
        keys_file=tmp_path / "keys.json", db_url=f"sqlite:///{tmp_path}/s.db", model=str(root / "models/policy")
    )
    with TestClient(create_app(root, settings)) as client:
        page = client.get("/review")
        assert page.status_code == 200 and "Review queue" in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert "script-src" not in page.headers["content-security-policy"]  # default-src 'self': no inline script runs
        assert client.get("/review.js").headers["content-type"].startswith("application/javascript")
        assert client.get("/v1/review-queue").status_code == 401
        assert Path(tmp_path / "keys.json").exists() is False
