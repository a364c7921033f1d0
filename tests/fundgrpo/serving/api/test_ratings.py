"""Published ratings end to end, with the real API and a real store (SQLite and PostgreSQL): a model draft,
a reviewer publishes it with a changed grade and a reason, the entitled client reads version 1, a re-rating
publishes version 2, the client reads both in the history and a withdrawal after them; a second client sees
nothing, exactly as for a share class that does not exist; client keys reach none of the firm's routes; every
read and refusal is audited. Keys and entitlements made by the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from fundgrpo.serving.api import schemas
from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.settings import ApiSettings
from tests.fundgrpo.serving.test_api import fund
from tests.support import REPO

FIRM_ROUTES = [("GET", "/v1/evaluations/API-0"), ("GET", "/v1/review-queue"), ("GET", "/v1/decisions"),
               ("GET", "/v1/audit"), ("GET", "/v1/model"), ("POST", "/v1/evaluations"), ("POST", "/v1/decisions"),
               ("POST", "/v1/publications"), ("POST", "/v1/withdrawals")]  # fmt: skip


def cli(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "fundgrpo.serving.api", *args], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request, trained, tmp_path):
    root, _ = trained
    db_url = f"sqlite:///{tmp_path}/store.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    keys = tmp_path / "keys.json"
    env = {**os.environ, "FUNDGRPO_API_KEYS": str(keys), "FUNDGRPO_DB_URL": db_url, "PYTHONPATH": str(REPO)}
    made = {
        "analyst": cli(env, "add-key", "analyst", "--scopes", "read,evaluate"),
        "reviewer": cli(env, "add-key", "reviewer", "--role", "reviewer"),  # the rating committee's scopes
        "acme": cli(env, "add-key", "acme-portal", "--client", "Acme AM"),
        "beta": cli(env, "add-key", "beta-portal", "--client", "Beta Securities"),
    }
    assert cli(env, "entitle", "Acme AM", "API-0") == "Acme AM: 1 share classes"
    assert "reviewer\tpublish,read,review\tfirm" in cli(env, "list-keys").splitlines()
    settings = ApiSettings(keys_file=keys, db_url=db_url, model=str(root / "models/policy"), rate_per_min=1000)
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    yield root, settings, made, reference
    if request.param == "postgresql":  # the server is the session's: leave it empty for the next test
        from fundgrpo.serving.api.store import Store

        store = Store(db_url)
        for table in (store.ratings, store.decisions, store.heads, store.table, store.audit):
            with store.engine.begin() as conn:
                conn.execute(table.delete())


def test_a_rating_is_drafted_published_re_rated_and_read_by_its_client_only(served):
    root, settings, keys, reference = served
    h = {name: {"X-API-Key": key} for name, key in keys.items()}
    with TestClient(create_app(root, settings)) as client:
        drafted = client.post("/v1/evaluations", json={"funds": [fund(reference, 0), fund(reference, 1)]},
                              headers=h["analyst"])  # fmt: skip
        assert drafted.status_code == 200, drafted.text
        draft = drafted.json()["evaluations"][0]

        # a draft is never a client's: not as a rating, and no firm route answers a client key
        nothing = client.get("/v1/ratings/API-0", headers=h["acme"])
        assert nothing.status_code == 404
        for method, path in FIRM_ROUTES:
            assert client.request(method, path, headers=h["acme"], json={}).status_code == 403, path

        changed = 4 if draft["grade"] != 4 else 2
        asked = {"share_class_id": "API-0", "grade": changed}
        refused = client.post("/v1/publications", json=asked, headers=h["reviewer"])
        assert refused.status_code == 422 and "say why" in refused.json()["detail"]
        forged = {**asked, "reason": "x", "version": 9, "reviewer": "boss"}  # mass assignment: refused, not taken
        assert client.post("/v1/publications", json=forged, headers=h["reviewer"]).status_code == 422
        assert client.post("/v1/publications", json={**asked, "reason": "x"}, headers=h["analyst"]).status_code == 403
        one = client.post("/v1/publications", json={**asked, "reason": "peers lag it"}, headers=h["reviewer"])
        assert one.status_code == 201, one.text
        assert (one.json()["version"], one.json()["grade"], one.json()["note"]) == (1, changed, "peers lag it")

        read = client.get("/v1/ratings/API-0", headers=h["acme"])
        assert read.status_code == 200
        rating = schemas.Rating.model_validate(read.json())  # nothing but what a client may read
        assert (rating.version, rating.grade, rating.reviewer, rating.state) == (1, changed, "reviewer", "published")
        assert rating.model_version == draft["model_version"] and "fingerprint" in rating.methodology
        assert rating.grade_label and rating.reasoning == draft["reasoning"]
        assert rating.peers is not None and rating.peers.count == draft["evidence"]["peers"]
        assert rating.peers.percentiles == draft["evidence"]["percentiles"] and rating.peers.percentiles

        two = client.post("/v1/publications", json={"share_class_id": "API-0", "grade": 3, "reason": "re-rated"},
                          headers=h["reviewer"])  # fmt: skip
        assert two.status_code == 201 and two.json()["version"] == 2
        history = client.get("/v1/ratings/API-0/history", headers=h["acme"]).json()
        assert [(v["version"], v["grade"]) for v in history["versions"]] == [(1, changed), (2, 3)]
        assert [r["version"] for r in client.get("/v1/ratings", headers=h["acme"]).json()["ratings"]] == [2]

        # another client: the share class answers as one that does not exist, everywhere
        for path in ("/v1/ratings/API-0", "/v1/ratings/API-0/history"):
            theirs = client.get(path, headers=h["beta"])
            absent = client.get(path.replace("API-0", "NO-SUCH"), headers=h["beta"])
            assert theirs.status_code == absent.status_code == 404
            assert theirs.json()["detail"].replace("API-0", "X") == absent.json()["detail"].replace("NO-SUCH", "X")
        assert client.get("/v1/ratings", headers=h["beta"]).json() == {"ratings": []}
        assert client.get("/v1/ratings/API-1", headers=h["acme"]).status_code == 404  # drafted, never entitled

        gone = client.post("/v1/withdrawals", json={"share_class_id": "API-0", "reason": "fund merged"},
                           headers=h["reviewer"])  # fmt: skip
        assert gone.status_code == 201 and (gone.json()["version"], gone.json()["state"]) == (3, "withdrawn")
        latest = client.get("/v1/ratings/API-0", headers=h["acme"]).json()
        assert (latest["state"], latest["grade"]) == ("withdrawn", None)
        assert client.get("/v1/ratings/API-0", headers=h["analyst"]).status_code == 200  # the firm reads all

        audit = client.get("/v1/audit", headers=h["reviewer"]).json()["audit"]
        actions = [(a["actor"], a["action"], a["share_class_id"]) for a in audit]
        assert actions.count(("reviewer", "published", "API-0")) == 2 and ("reviewer", "withdrawn", "API-0") in actions
        assert ("beta-portal", "read_rating", "API-0") in actions  # the refused read, audited as read
        refusals = [a for a in audit if a["actor"] == "acme-portal" and a["action"] == "refused"]
        assert len(refusals) >= len(FIRM_ROUTES) - 2  # every firm route the body's validation did not stop first
        assert any(a["action"] == "entitle" and a["detail"] == {"client": "Acme AM"} for a in audit)
