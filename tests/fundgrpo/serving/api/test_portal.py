"""The client portal as a client firm uses it, in headless Chromium: sign in with its key, its published
ratings, a report in English and in Korean (grade, pillars with their quotes, the history chart), the PDF
rendered to PNG; and as an attacker tries it: another client's report, a forged or expired session, a
form posted from elsewhere, a revoked key, a firm key at the portal's door."""

from __future__ import annotations

import shutil
import subprocess
import urllib.error
import urllib.request

import pytest
from fastapi.testclient import TestClient
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fundgrpo.methodology.compiler import load_methodology
from fundgrpo.params import load_params
from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.keys import add_key, entitle, hash_key, revoke_key
from fundgrpo.serving.api.portal import SESSION, WORDS, session_token
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store
from tests import support
from tests.support import REPO

SHOTS = REPO / "reports" / "screenshots"
PILLARS = [{"criterion": "people", "judgement": -1, "reason": None,
            "evidence": [{"document_id": "D1", "quote": "책임운용역이 5월에 퇴사했다", "verified": True}]},
           {"criterion": "parent", "judgement": "not assessed", "reason": "no document speaks to it",
            "evidence": []}]  # fmt: skip


@pytest.fixture
def portal(trained, tmp_path):
    root, _ = trained
    keys = tmp_path / "keys.json"
    made = {"acme": add_key(keys, "acme-portal", [], "Acme AM"), "beta": add_key(keys, "beta-portal", [], "Beta"),
            "firm": add_key(keys, "analyst", ["read", "evaluate"])}  # fmt: skip
    entitle(keys, "Acme AM", ["API-0"])
    entitle(keys, "Beta", ["API-1"])
    db = f"sqlite:///{tmp_path}/store.db"
    store = Store(db)
    criteria = load_methodology(root / load_params(root / "params.yaml").methodology.out_dir).criteria
    peers = {"count": 12, "percentiles": {c.id: (None if i == 0 else 90.0 - 20 * i) for i, c in enumerate(criteria)}}
    for sid in ("API-0", "API-1"):
        [eid] = store.add([{"share_class_id": sid, "grade": 3, "reasoning": "Average. 운용인력 교체.",
                            "pillars": PILLARS}], "models:/fund-evaluator/1")  # fmt: skip
        draft = store.evaluation(eid)
        for grade, note in ((4, None), (3, "re-rated after the manager left")):
            store.publish(sid, "published", grade, draft, "'House' v1 (en, fingerprint ab12)", "reviewer", note,
                          {"grade_label": f"label {grade}", "reasoning": draft["reasoning"], "pillars": PILLARS,
                           "note": note, "peers": peers})  # fmt: skip
    settings = ApiSettings(keys_file=keys, db_url=db, model=str(root / "models/policy"), portal_secret="s3cret")
    return root, settings, made, keys, criteria


def get(base: str, path: str, cookie: str = "") -> tuple[int, bytes]:
    req = urllib.request.Request(base + path, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.mark.skipif(not support.has_browser(), reason=support.NO_BROWSER)
def test_a_client_signs_in_reads_its_report_in_both_languages_and_downloads_the_pdf(portal, tmp_path):
    root, settings, keys, _, _ = portal
    server, base = support.serve(create_app(root, settings))
    driver = support.browser("1200,1400")
    try:
        driver.get(f"{base}/portal?lang=en")
        driver.find_element(By.NAME, "key").send_keys(keys["acme"])
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # the sign-in posts and redirects: wait for the list page, not the form still showing
        link = WebDriverWait(driver, 20).until(lambda d: d.find_element(By.LINK_TEXT, "API-0"))
        # its one share class; Beta's API-1 is not listed
        assert "API-1" not in driver.find_element(By.TAG_NAME, "body").text
        link.click()
        body = driver.find_element(By.TAG_NAME, "body").text
        w = WORDS["en"]
        for said in ("3 · label 3", w["pillars"], "책임운용역이 5월에 퇴사했다", "re-rated after the manager left",
                     "reviewer", w["history"], w["peers"]):  # fmt: skip
            assert said in body, said
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg")) == 2  # against its peers, the grade history
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / "portal_report_en.png"))
        driver.find_element(By.LINK_TEXT, w["other"]).click()
        assert WORDS["ko"]["pillars"] in driver.find_element(By.TAG_NAME, "body").text
        driver.save_screenshot(str(SHOTS / "portal_report_ko.png"))

        cookie = f"{SESSION}={driver.get_cookie(SESSION)['value']}"
        status, pdf = get(base, "/portal/ratings/API-0.pdf?lang=ko", cookie)
        assert status == 200 and pdf.startswith(b"%PDF")
        (tmp_path / "report.pdf").write_bytes(pdf)
        if shutil.which("pdftoppm"):  # the PDF as a reader sees it
            subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "2", str(tmp_path / "report.pdf"),
                            str(SHOTS / "portal_report_pdf_ko")], check=True)  # fmt: skip
            text = subprocess.run(["pdftotext", str(tmp_path / "report.pdf"), "-"], capture_output=True, text=True)
            assert "책임운용역이 5월에 퇴사했다" in text.stdout and "등급 이력" in text.stdout
            listed = subprocess.run(["pdfimages", "-list", str(tmp_path / "report.pdf")], capture_output=True,
                                    text=True)  # fmt: skip
            assert len(listed.stdout.splitlines()) - 2 >= 2  # the two charts (a header of two lines, then one each)
        assert get(base, "/portal/ratings/API-1", cookie)[0] == get(base, "/portal/ratings/NONE", cookie)[0] == 404
        assert get(base, "/portal/ratings/API-1.pdf", cookie)[0] == 404
    finally:
        driver.quit()
        server.should_exit = True


def test_sessions_and_forms_refuse_forgery_expiry_other_sites_and_revoked_keys(portal):
    root, settings, keys, keys_file, _ = portal
    with TestClient(create_app(root, settings)) as client:
        form = client.get("/portal")
        token = form.text.split('name="csrf" value="')[1].split('"')[0]
        # a sign-in posted from another site: no token cookie of ours
        other = TestClient(client.app)
        assert other.post("/portal/login", data={"key": keys["acme"], "csrf": token}).status_code == 403
        # a firm key does not open the client portal
        refused = client.post("/portal/login", data={"key": keys["firm"], "csrf": token}, follow_redirects=False)
        assert refused.status_code == 200 and WORDS["en"]["bad_key"] in refused.text and SESSION not in client.cookies
        client.get("/portal")  # a fresh form and token
        token = client.cookies.get("fg_csrf")
        signed = client.post("/portal/login", data={"key": keys["acme"], "csrf": token}, follow_redirects=False)
        assert signed.status_code == 303 and client.cookies.get(SESSION)
        assert client.get("/portal/ratings/API-0").status_code == 200

        real = client.cookies.get(SESSION)
        forged = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")
        for cookie in (forged, "", "e30.abc.def"):
            client.cookies.clear()
            client.cookies.set(SESSION, cookie)
            assert client.get("/portal/ratings/API-0").status_code == 401

        # a session signed longer ago than its life
        stale = session_token(settings.portal_secret, hash_key(keys["acme"]), "x", settings.portal_minutes * 60 + 5)
        client.cookies.clear()
        client.cookies.set(SESSION, stale)
        assert client.get("/portal/ratings/API-0").status_code == 401  # expired

        client.cookies.clear()
        client.cookies.set(SESSION, real)
        assert client.get("/portal/ratings/API-0").status_code == 200
        assert client.post("/portal/logout", data={"csrf": "guessed"}).status_code == 403
        revoke_key(keys_file, "acme-portal")
        assert client.get("/portal/ratings/API-0").status_code == 401  # a revoked key's session ends with it
        audit = Store(settings.db_url).audit_log()
        assert {"portal_login", "portal_refused", "read_rating"} <= {a["action"] for a in audit}
