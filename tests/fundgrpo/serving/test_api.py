"""The REST API against the session's trained tiny repo: real FastAPI app (lifespan, middleware),
real SQLite store, real model generation; keys created by the CLI and stored hashed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pandas as pd
import pytest
from fastapi.testclient import TestClient

import fundgrpo.serving.api as api_package
from fundgrpo.data.canonical import COLUMNS
from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.story import served_words
from fundgrpo.io import write_json
from fundgrpo.methodology import compiler
from fundgrpo.methodology.citations import NO_DOCUMENTS
from fundgrpo.params import load_params
from fundgrpo.serving.api import schemas
from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.keys import hash_key
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store
from tests import support
from tests.support import REPO

SHOTS = REPO / "reports" / "screenshots"


def fund(reference: pd.DataFrame, i: int, **change) -> dict:
    """A new fund shaped like reference row i (canonical metrics only)."""
    row = reference.iloc[i]
    out = {c.name: (None if pd.isna(row.get(c.name)) else row.get(c.name)) for c in COLUMNS if c.name in reference}
    out = {
        k: (
            int(v)
            if k == "expert_grade" and v is not None
            else (
                float(v)
                if isinstance(v, (int, float)) and k not in ("share_class_id", "fund_id", "name", "category")
                else v
            )
        )
        for k, v in out.items()
    }
    return {**out, "share_class_id": f"API-{i}", "fund_id": f"APIF-{i}", **change}


@pytest.fixture(scope="module")
def cli_keys(tmp_path_factory) -> tuple:
    """(keys file, {name: key}): three keys made by the CLI once for this module; each test gets a copy."""
    keys = tmp_path_factory.mktemp("keys") / "keys.json"
    env = {**os.environ, "FUNDGRPO_API_KEYS": str(keys), "PYTHONPATH": str(REPO)}
    made = {}
    for name, scopes in (("analyst", "read,evaluate"), ("reader", "read"), ("reviewer", "read,review")):
        done = subprocess.run(
            [sys.executable, "-m", "fundgrpo.serving.api", "add-key", name, "--scopes", scopes],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        made[name] = done.stdout.strip()
    assert made["analyst"] not in keys.read_text()  # only the hash is stored
    return keys, made


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(request, trained, cli_keys, tmp_path):
    root, _ = trained
    db_url = (
        f"sqlite:///{tmp_path}/evaluations.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    )
    assert request.param == "sqlite" or "@127.0.0.1:" in db_url  # PostgreSQL over loopback TCP
    keys = tmp_path / "keys.json"
    shutil.copyfile(cli_keys[0], keys)
    made = dict(cli_keys[1])
    settings = ApiSettings(
        keys_file=keys,
        db_url=db_url,
        model=str(root / "models/policy"),
        max_funds=4,
        rate_per_min=1000,
        max_bytes=64 * 1024,
        alias_check_s=0.0,
    )
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    return root, settings, made, reference


def test_evaluate_store_and_read_back(setup):
    root, settings, keys, reference = setup
    with TestClient(create_app(root, settings)) as client:
        assert client.get("/healthz").status_code == 200 and client.get("/readyz").json()["ready"]
        # /docs offline: Swagger UI's page and assets served here, nothing from a CDN
        docs = client.get("/docs").text
        assert "/docs-assets/swagger-ui-bundle.js" in docs and "cdn." not in docs
        assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
        h = {"X-API-Key": keys["analyst"]}
        done = client.post("/v1/evaluations", json={"funds": [fund(reference, 0), fund(reference, 1)]}, headers=h)
        assert done.status_code == 200, done.text
        body = done.json()
        assert body["model_version"] == str(root / "models/policy")
        assert [e["share_class_id"] for e in body["evaluations"]] == ["API-0", "API-1"]
        for e in body["evaluations"]:  # an invalid answer has no grade and says why; a valid one its belief
            assert isinstance(e["valid"], bool) and (e["grade"] is None) == (not e["valid"])
            assert (e["reason"] is None) == e["valid"] and (e["confidence"] is None) == (not e["valid"])
            if e["valid"]:
                assert 1 <= e["grade"] <= 5 and abs(sum(e["probabilities"].values()) - 1) < 1e-3
                assert e["confidence"] == pytest.approx(e["probabilities"][str(e["grade"])], abs=1e-4)
            # the review queue's rule: these share classes are new to the universe, so each needs an analyst
            assert e["needs_analyst"] and "new to the universe" in e["review"]
            assert (not e["valid"]) == any(w.startswith("invalid answer") for w in e["review"])
            assert e["evidence"]["gbm_grade"] in range(1, 6) and e["evidence"]["peers"] > 1
            assert e["evidence"]["in_prompt"] == {"rule": True, "gbm": False}  # the defaults: show_rule, no estimate
        schemas.Evaluations.model_validate(body)  # every field /docs shows, and no other
        fit = json.loads((root / "models/calibration.json").read_text())  # what the product serves, said
        for e in body["evaluations"]:
            said = e["served_from"]
            assert (said["serves"], said["weights"], said["rule"]) == (fit["serves"], fit["weights"], fit["chosen"])
        for e in body["evaluations"]:  # a grade its probabilities do not put first, or not the text's, says why
            top = max(e["probabilities"], key=e["probabilities"].get) if e["valid"] else None
            contradicted = e["valid"] and e["probabilities"][top] > e["confidence"] + 1e-9
            other = e["valid"] and e["grade"] != e["served_from"]["written_grade"]
            assert (e["grade_note"] is not None) == (contradicted or other)
            assert e["served_from"]["summary"] == served_words(DecisionRule.of(fit))
        stored = client.get("/v1/evaluations/API-1", headers={"X-API-Key": keys["reader"]}).json()
        schemas.StoredEvaluation.model_validate(stored)
        assert stored["created_at"].endswith("+00:00")  # with its time zone, on SQLite too
        assert stored["grade"] == body["evaluations"][1]["grade"] and stored["model_version"] == body["model_version"]
        assert client.get("/v1/evaluations/NOPE", headers=h).status_code == 404
        card = client.get("/v1/model", headers=h).json()
        assert card["model_version"] == body["model_version"] and schemas.ModelCard.model_validate(card)
        assert schemas.Ready.model_validate(client.get("/readyz").json())

        # concurrent requests are batched for generation and all answered, each prompted from its own funds
        # beside the universe as when it comes alone: the same evidence, peers counted without the others
        def ask(i):
            return client.post("/v1/evaluations", json={"funds": [fund(reference, i)]}, headers=h)

        alone = [ask(i).json()["evaluations"][0]["evidence"] for i in range(2, 6)]
        with ThreadPoolExecutor(4) as pool:
            together = list(pool.map(ask, range(2, 6)))
        assert [r.status_code for r in together] == [200] * 4
        assert [r.json()["evaluations"][0]["evidence"] for r in together] == alone


def test_a_request_is_prompted_from_its_funds_categories_as_from_the_whole_universe(trained):
    """The API builds a request's prompts over the reference funds of the requested categories only (every
    figure a prompt shows is taken within the category): the records are the ones the whole universe gives."""
    from fundgrpo.serving.api.evaluator import Evaluator
    from fundgrpo.serving.batch import with_reference
    from fundgrpo.serving.champion import prompt_records

    root, _ = trained
    evaluator = Evaluator(root, ApiSettings(model=str(root / "models/policy")))
    reference = evaluator.reference
    funds = [fund(reference, 0), fund(reference, 5, category=reference["category"].iloc[-1]), fund(reference, 9)]
    funds[2]["share_class_id"] = str(reference["share_class_id"].iloc[9])  # a known share class, laid over
    assert reference["category"].nunique() > len({f["category"] for f in funds})  # some categories are left out
    frame = pd.DataFrame(funds).assign(expert_grade=lambda f: f["expert_grade"].astype("Int64"))
    whole = prompt_records(
        with_reference(frame, reference), evaluator.methodology, evaluator.params.prepare,
        only=[f["share_class_id"] for f in funds], estimator=evaluator.estimator,
    )  # fmt: skip
    assert [r for r, _ in evaluator.records(funds)] == whole


def test_waiting_requests_share_a_records_call_only_where_no_fund_s_peers_change(trained):
    """The batcher builds the prompt records of waiting requests with no category in common in one call;
    each request gets the records it gets alone: one in another's category stays apart, and so does one
    that moves a listed share class out of another's category (its old row leaves those peers); a request
    whose funds are bad gets its error alone."""
    from fundgrpo.serving.api.evaluator import Evaluator, request_groups

    root, _ = trained
    evaluator = Evaluator(root, ApiSettings(model=str(root / "models/policy")))
    try:
        reference = evaluator.reference
        categories = reference["category"].drop_duplicates().tolist()
        assert len(categories) >= 3
        first = int(reference.index[reference["category"] == categories[0]][0])
        other = int(reference.index[reference["category"] == categories[1]][0])
        second = int(reference.index[reference["category"] == categories[1]][1])
        moved = fund(reference, second, category=categories[2])  # a listed share class of the second category
        moved["share_class_id"] = str(reference["share_class_id"].iloc[second])
        requests = [
            [fund(reference, first)],
            [fund(reference, other)],  # another category: built with the first
            [fund(reference, first + 1, category=categories[0])],  # the first's category: apart
            [{**fund(reference, first), "category": None}],  # bad (the first's share class): its own error
            [moved],  # leaves the second's category: apart from it
        ]
        assert request_groups(requests, listed=evaluator.listed) == [[0, 1], [2, 3, 4]]
        loaded = evaluator.serving()
        items = [(loaded, funds, None, 0.0) for funds in requests]
        done = evaluator.prepare_and_generate(loaded, items, time.monotonic() + 600)
        for i in (0, 1, 2, 4):
            records, answers = done[i]
            assert records == evaluator.records(requests[i])
            assert len(answers) == len(requests[i])  # the tiny model's answers: one per fund, valid or not
        with pytest.raises(Exception) as alone:
            evaluator.records(requests[3])
        assert type(done[3]) is type(alone.value) and str(done[3]) == str(alone.value)
    finally:
        evaluator.worker.shutdown()


def test_thin_or_peerless_funds_are_flagged_not_graded_as_real(setup):
    """A fund sent with only its id and category, or with one criterion of five, is not rated: no model is
    asked, no grade is given (no made-up middle grade), and the reason names what it lacks; a fund in a
    category with no peers is graded and flagged. Each needs an analyst."""
    root, settings, keys, reference = setup
    h = {"X-API-Key": keys["analyst"]}
    bare = {"share_class_id": "BARE", "category": reference["category"].iloc[0]}
    fee_only = {**bare, "share_class_id": "FEE", "ongoing_cost": 0.1, "return_1y": 9.0}  # a fund of funds' export row
    alone = fund(reference, 0, category="A category of its own")
    with TestClient(create_app(root, settings)) as client:
        done = client.post("/v1/evaluations", json={"funds": [bare, fee_only, alone]}, headers=h)
        assert done.status_code == 200, done.text
        thin, fee, lonely = done.json()["evaluations"]
    for e in (thin, fee):
        assert e["rated"] is False and e["grade"] is None and e["valid"] is False and e["reasoning"] is None
        assert e["rule_grade"] is None and e["evidence"]["rule_score"] is None and e["probabilities"] is None
        assert e["needs_analyst"] and e["review"][0] == e["reason"] and e["flags"][0] == e["reason"]
    assert thin["reason"] == (
        "not rated: data for 0% of the criteria weight, the methodology needs 50%; "
        "missing: Sharpe ratio, 3-year return, ongoing cost, max drawdown, information ratio"
    )
    assert fee["reason"] == (
        "not rated: data for 20% of the criteria weight, the methodology needs 50%; "
        "missing: Sharpe ratio, 3-year return, max drawdown, information ratio"
    )
    assert sum(f.startswith("no data:") for f in thin["flags"]) == 5 and "sharpe_3y" in " ".join(thin["flags"])
    assert lonely["rated"] and lonely["needs_analyst"] and any(f.startswith("no peers:") for f in lonely["flags"])
    assert (lonely["grade"] is None) == (not lonely["valid"]) and lonely["rule_grade"] is not None
    # a canonical row as the pipeline writes it (its `as_of` too) is accepted as it is
    dated = {**fund(reference, 2), "as_of": "2026-10-31"}
    with TestClient(create_app(root, settings)) as client:
        assert client.post("/v1/evaluations", json={"funds": [dated]}, headers=h).status_code == 200


NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e999")
BEYOND = (2**31, 2**63, 10**30, -1, 0)


def test_no_request_ends_in_a_500(setup):
    """What a careless or hostile client sends, to every route: non-finite numbers (JSON's NaN and
    Infinity, 1e999), ids past the store's integer, text where numbers go. Each is refused in words naming
    the field (422), or answered; never a server error, never a refusal that is itself not JSON."""
    root, settings, keys, reference = setup
    review = {"X-API-Key": keys["reviewer"], "Content-Type": "application/json"}
    analyst = {"X-API-Key": keys["analyst"], "Content-Type": "application/json"}
    base = json.dumps(fund(reference, 0))[:-1]  # a fund's JSON, open for one more field
    metrics = [c.name for c in COLUMNS if c.kind in ("number", "grade")]
    codes: dict[str, int] = {}
    with TestClient(create_app(root, settings), raise_server_exceptions=False) as client:
        for name in metrics:
            for value in NON_FINITE:
                r = client.post(
                    "/v1/evaluations", content=f'{{"funds": [{base}, "{name}": {value}}}]}}', headers=analyst
                )
                codes[f"evaluations {name}={value}"] = r.status_code
                assert r.status_code == 422, (name, value, r.text)
                assert name in json.dumps(r.json()) and "finite" in json.dumps(r.json()) or "less than" in r.text
        # another fund's id with this fund's name: refused, naming the row and both names
        other = {**fund(reference, 5), "share_class_id": str(reference["share_class_id"].iloc[0])}
        clash = client.post("/v1/evaluations", json={"funds": [other]}, headers=analyst)
        assert clash.status_code == 422 and "carry the share_class_id of another fund" in clash.json()["detail"]
        # a NUL character in text: PostgreSQL's driver refuses it, so the API does first, naming the field
        nul = client.post("/v1/evaluations", json={"funds": [fund(reference, 2, name="A\u0000B")]}, headers=analyst)
        assert nul.status_code == 422 and "name" in nul.text
        stored = client.post("/v1/evaluations", json={"funds": [fund(reference, 1)]}, headers=analyst).json()
        said = client.post("/v1/decisions", json={"share_class_id": "API-1", "grade": 3, "reason": "a\u0000b"},
                           headers=review)  # fmt: skip
        assert said.status_code == 422 and "reason" in said.text
        assert stored["evaluations"][0]["share_class_id"] == "API-1"
        for field in ("evaluation_id", "based_on"):
            for value in (*BEYOND, *NON_FINITE, '"seven"'):
                body = f'{{"share_class_id": "API-1", "grade": 3, "reason": "checked", "{field}": {value}}}'
                r = client.post("/v1/decisions", content=body, headers=review)
                codes[f"decisions {field}={value}"] = r.status_code
                assert r.status_code in (404, 409, 422), (field, value, r.text)
                assert field in r.text or r.status_code != 422
        for value in (*NON_FINITE, str(2**63), "1e400"):
            r = client.post(
                "/v1/decisions",
                content=f'{{"share_class_id": "API-1", "grade": {value}, "reason": "r"}}',
                headers=review,
            )
            codes[f"decisions grade={value}"] = r.status_code
            assert r.status_code == 422 and "grade" in r.text, (value, r.text)
        for path in ("/v1/review-queue?limit=1e999", "/v1/review-queue?limit=NaN", f"/v1/review-queue?limit={2**63}",
                     "/v1/decisions?share_class_id=" + "x" * 500, "/v1/evaluations/" + "%00" * 3,
                     "/v1/evaluations/" + "9" * 400):  # fmt: skip
            r = client.get(path, headers=review)
            codes[f"GET {path[:40]}"] = r.status_code
            assert r.status_code in (200, 404, 422), (path, r.text)
    assert 500 not in codes.values() and len(codes) > 100


def test_keys_scopes_limits_and_bad_input(setup, caplog):
    root, settings, keys, reference = setup
    caplog.set_level("INFO", logger="fundgrpo.serving.api.access")
    earlier = len(Store(settings.db_url).audit_log())  # the session's PostgreSQL holds other tests' rows
    with TestClient(create_app(root, replace(settings, rate_per_min=12, max_bytes=4000))) as client:
        good = {"funds": [fund(reference, 0)]}
        assert client.post("/v1/evaluations", json=good).status_code == 401  # no key
        assert client.post("/v1/evaluations", json=good, headers={"X-API-Key": "fg_wrong"}).status_code == 401
        assert client.post("/v1/evaluations", json=good, headers={"X-API-Key": keys["reader"]}).status_code == 403
        h = {"X-API-Key": keys["analyst"]}

        def detail(body) -> str:
            r = client.post("/v1/evaluations", json=body, headers=h)
            assert r.status_code == 422, r.text
            return json.dumps(r.json())

        no_category = {k: v for k, v in fund(reference, 0).items() if k != "category"}
        assert "category" in detail({"funds": [no_category]})
        assert "return_1y" in detail({"funds": [fund(reference, 0, return_1y="a lot")]})
        assert "volatility_3y" in detail({"funds": [fund(reference, 0, volatility_3y=-5.0)]})  # absurd: below 0
        assert "colour" in detail({"funds": [fund(reference, 0, colour="red")]})
        assert "at most 4" in detail({"funds": [fund(reference, i) for i in range(5)]})
        assert "funds" in detail({"funds": []})
        malformed = client.post(
            "/v1/evaluations", content=b'{"funds": [', headers={**h, "Content-Type": "application/json"}
        )
        assert malformed.status_code == 422
        big = client.post("/v1/evaluations", content=b"x" * 5000, headers={**h, "Content-Type": "application/json"})
        assert big.status_code == 413
        # a streamed body states no length: read up to the limit, refused beyond it
        streamed = client.post(
            "/v1/evaluations",
            content=(b"x" * 1000 for _ in range(5)),
            headers={**h, "Content-Type": "application/json"},
        )
        assert streamed.status_code == 413 and "content-length" not in streamed.request.headers
        small = json.dumps({"funds": []}).encode()
        assert (
            client.post(
                "/v1/evaluations", content=iter([small]), headers={**h, "Content-Type": "application/json"}
            ).status_code
            == 422
        )
        assert "name" in detail({"funds": [fund(reference, 0, name="N" * 301)]})  # text fields are capped
        codes = [client.get("/v1/model", headers=h).status_code for _ in range(12)]
        assert codes[-1] == 429 and 200 in codes  # 12 a minute, some already spent above
    # the access log: one JSON line per request, naming the key's owner, never the key
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "fundgrpo.serving.api.access"]
    assert {"method", "path", "status", "ms", "key"} <= set(lines[-1]) and lines[-1]["key"] == "analyst"
    assert {401, 403, 413, 422, 429} <= {line["status"] for line in lines}
    assert not any(keys["analyst"] in r.getMessage() or keys["reader"] in r.getMessage() for r in caplog.records)
    # the audit: every refused request, the anonymous and the unknown key's too (its hash's first digits, not it)
    refused = [a for a in Store(settings.db_url).audit_log()[earlier:] if a["action"] == "refused"]
    by_status = {a["detail"]["status"]: a["actor"] for a in refused}
    assert by_status[401] in ("anonymous", "unknown key") and by_status[413] == by_status[422] == "analyst"
    assert {"anonymous", "unknown key", "analyst"} <= {a["actor"] for a in refused}
    unknown = next(a for a in refused if a["actor"] == "unknown key")
    assert unknown["detail"]["key_hash"] == hash_key("fg_wrong")[:12] and "fg_wrong" not in json.dumps(refused)
    assert len([a for a in refused if a["detail"]["status"] == 422]) == 9  # each bad body, one row each
    assert any(a["detail"]["status"] == 429 for a in refused)


def test_keys_added_and_revoked_while_the_server_runs(setup, tmp_path):
    """The key file is read again when it changes: a key added after start is accepted, a revoked one
    refused at its next request, without a restart; `list-keys` names them, never their hashes."""
    root, settings, keys, reference = setup
    env = {**os.environ, "FUNDGRPO_API_KEYS": str(settings.keys_file), "PYTHONPATH": str(REPO)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "fundgrpo.serving.api", *args], env=env, capture_output=True, text=True, timeout=120
        )

    with TestClient(create_app(root, settings)) as client:
        late = cli("add-key", "late", "--scopes", "read").stdout.strip()
        assert client.get("/v1/model", headers={"X-API-Key": late}).status_code == 200
        listed = cli("list-keys").stdout
        assert "late\tread" in listed and "analyst\tevaluate,read" in listed and late not in listed
        assert cli("revoke-key", "late").returncode == 0
        assert client.get("/v1/model", headers={"X-API-Key": late}).status_code == 401
        assert client.get("/v1/model", headers={"X-API-Key": keys["reader"]}).status_code == 200  # the others stay
        gone = cli("revoke-key", "late")
        assert gone.returncode == 1 and "no key named 'late'" in gone.stderr


def test_a_moved_alias_is_served_without_restart(setup, tmp_path, monkeypatch):
    """Copy the trained repo's registry, point an alias at v1, then at a second version: the
    running app answers with the new version on the next request."""
    root, settings, keys, reference = setup
    from mlflow import MlflowClient

    shutil.copy(root / "mlflow.db", tmp_path / "registry.db")
    uri = f"sqlite:///{tmp_path}/registry.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    import mlflow

    # a model version's source resolves through MLflow's global URI, which an earlier test may have set
    monkeypatch.setattr(mlflow.tracking._tracking_service.utils, "_tracking_uri", None)
    client = MlflowClient(tracking_uri=uri)
    v1 = client.get_model_version("fund-evaluator", "1")
    v2 = client.create_model_version("fund-evaluator", v1.source, v1.run_id)
    # no version carries the alias yet: not ready, 503 naming what to serve instead; set, it serves without a restart
    with TestClient(create_app(root, replace(settings, model="models:/fund-evaluator@api-test"))) as app:
        h = {"X-API-Key": keys["analyst"]}
        ready = app.get("/readyz")
        assert ready.status_code == 503 and "no version carries the alias 'api-test'" in ready.json()["error"]
        refused = app.post("/v1/evaluations", json={"funds": [fund(reference, 0)]}, headers=h)
        assert refused.status_code == 503 and "models:/fund-evaluator/" in refused.json()["detail"]
        client.set_registered_model_alias("fund-evaluator", "api-test", "1")
        assert app.post("/v1/evaluations", json={"funds": [fund(reference, 0)]}, headers=h).status_code == 200
    with TestClient(create_app(root, replace(settings, model="models:/fund-evaluator@api-test"))) as app:
        h = {"X-API-Key": keys["analyst"]}
        first = app.post("/v1/evaluations", json={"funds": [fund(reference, 0)]}, headers=h).json()
        assert first["model_version"] == "models:/fund-evaluator/1"
        card = app.get("/v1/model", headers=h).json()
        assert "qwk" in json.dumps(card["backtest"]) and card["gate"]
        client.set_registered_model_alias("fund-evaluator", "api-test", v2.version)
        second = app.post("/v1/evaluations", json={"funds": [fund(reference, 0)]}, headers=h).json()
        assert second["model_version"] == f"models:/fund-evaluator/{v2.version}"

    # a request in flight when the alias moves is answered by the version it started with
    client.set_registered_model_alias("fund-evaluator", "api-test", "1")
    slow = replace(settings, model="models:/fund-evaluator@api-test", batch_wait_ms=3000)
    with TestClient(create_app(root, slow)) as app, ThreadPoolExecutor(2) as pool:
        h = {"X-API-Key": keys["analyst"]}
        started = time.monotonic()
        held = pool.submit(
            lambda: (app.post("/v1/evaluations", json={"funds": [fund(reference, 1)]}, headers=h), time.monotonic())
        )
        time.sleep(1.0)  # the held request is waiting in the 3-s batch window
        client.set_registered_model_alias("fund-evaluator", "api-test", v2.version)
        moved = time.monotonic()
        after = app.post("/v1/evaluations", json={"funds": [fund(reference, 2)]}, headers=h)
        answer, answered = held.result(timeout=120)
        assert moved - started < 3.0 < answered - started  # it was still in flight when the alias moved
        assert answer.status_code == 200 and answer.json()["model_version"] == "models:/fund-evaluator/1"
        assert after.status_code == 200 and after.json()["model_version"] == f"models:/fund-evaluator/{v2.version}"


def test_review_queue_and_analysts_decisions(setup):
    """The queue lists what needs an analyst in the documented order; a `review` key decides with a
    reason, kept with who, when, the evaluation and version answered, old and new grade; a second
    decision is a new row (the latest wins); a decision on stale ground is a conflict; every bad
    request is a 4xx naming the field; every decision and refusal is in the audit log."""
    root, settings, keys, reference = setup
    reader, reviewer, analyst = ({"X-API-Key": keys[k]} for k in ("reader", "reviewer", "analyst"))
    with TestClient(create_app(root, settings)) as client:
        tag = uuid.uuid4().hex[:8]  # the PostgreSQL store is shared by the session's tests
        funds = [fund(reference, i, share_class_id=f"Q{tag}-{i}") for i in range(3)]
        done = client.post("/v1/evaluations", json={"funds": funds}, headers=analyst)
        assert done.status_code == 200, done.text
        evaluations = {e["share_class_id"]: e for e in done.json()["evaluations"]}
        queue = client.get("/v1/review-queue", params={"limit": 1000}, headers=reader).json()
        schemas.ReviewQueue.model_validate(queue)
        assert queue["rule"] == {"review_below": 0.5, "disagree_by": 2} and queue["total"] >= 3
        items = [e for e in queue["items"] if e["share_class_id"] in evaluations]
        ids = [e["share_class_id"] for e in items]
        assert set(ids) == set(evaluations) and all(e["why"] for e in items)
        invalid_first = [e["grade"] is None for e in items]
        assert invalid_first == sorted(invalid_first, reverse=True)
        sure = [e["confidence"] for e in items if e["grade"] is not None]
        assert sure == sorted(sure)  # then from the least sure
        target = ids[0]
        ev = evaluations[target]

        def decide(headers=reviewer, **body):
            return client.post(
                "/v1/decisions", json={"share_class_id": target, "grade": 2, "reason": "r", **body}, headers=headers
            )

        # refused, each naming what is wrong; nothing written
        assert decide(headers=analyst).status_code == 403  # no review scope
        assert decide(headers=reader).status_code == 403
        for body, status, named in (
            ({"grade": 9}, 422, "grade"),
            ({"reason": "   "}, 422, "reason"),
            ({"reason": "x" * 2001}, 422, "reason"),
            ({"share_class_id": "NEVER-SEEN"}, 404, "share_class_id"),
            ({"evaluation_id": 10**6}, 404, "evaluation_id"),
            ({"evaluation_id": evaluations[ids[1]]["evaluation_id"]}, 422, "evaluation_id"),
            ({"model_version": "models:/other/7"}, 422, "model_version"),
            ({"colour": "red"}, 422, "colour"),
        ):
            r = decide(**body)
            assert r.status_code == status and named in r.text, (body, r.text)
        mine = {"share_class_id": target}
        assert client.get("/v1/decisions", params=mine, headers=reader).json()["decisions"] == []

        first = decide(grade=4, reason="Peers lag it on cost; the 5-year record is strong.")
        assert first.status_code == 201, first.text
        d1 = first.json()
        assert d1["analyst"] == "reviewer" and d1["new_grade"] == 4 and d1["old_grade"] == ev["grade"]
        assert d1["evaluation_id"] == ev["evaluation_id"] and d1["model_version"] == ev["model_version"]
        assert target not in [
            e["share_class_id"] for e in client.get("/v1/review-queue", headers=reader).json()["items"]
        ]
        # scored again by the same model: the analyst's decision stands, the fund stays out of the queue
        same = next(f for f in funds if f["share_class_id"] == target)
        again = client.post("/v1/evaluations", json={"funds": [same]}, headers=analyst)
        assert again.status_code == 200
        queue_now = client.get("/v1/review-queue", params={"limit": 1000}, headers=reader).json()
        assert target not in [e["share_class_id"] for e in queue_now["items"]]

        schemas.Decision.model_validate(d1)
        assert d1["created_at"].endswith("+00:00")
        stale = decide(grade=3)  # based_on absent: the analyst saw no decision, but there is one
        assert stale.status_code == 409 and f"decision {d1['id']} by reviewer" in stale.json()["detail"]
        assert "since you loaded it (you saw no decision)" in stale.json()["detail"]  # not "since decision None"
        second = decide(grade=3, reason="On reflection: average.", based_on=d1["id"])
        assert second.status_code == 201
        d2 = second.json()
        # two analysts on the same ground at once: one wins, the other is told
        with ThreadPoolExecutor(2) as pool:
            codes = sorted(pool.map(lambda g: decide(grade=g, based_on=d2["id"]).status_code, (1, 5)))
        assert codes == [201, 409]
        listed = client.get("/v1/decisions", params=mine, headers=reader).json()
        schemas.Decisions.model_validate(listed)
        assert all(r["created_at"].endswith("+00:00") for r in listed["decisions"])  # read back with its zone
        rows = listed["decisions"]
        assert [r["id"] for r in rows][:2] == [d1["id"], d2["id"]] and len(rows) == 3  # a new row each; latest last
        audit = schemas.Audit.model_validate(client.get("/v1/audit", headers=reviewer).json()).model_dump()["audit"]
        actions = [a["action"] for a in audit if a["share_class_id"] in (target, None)]
        assert actions.count("decide") == 3 and actions.count("conflict") == 2 and actions.count("refused") >= 2
        assert client.get("/v1/audit", headers=reader).status_code == 403


def test_an_acknowledged_decision_survives_a_server_kill(trained, tmp_path):
    """The real server process, killed with SIGKILL right after it answered 201: the decision is in
    the store when it comes back, whole."""
    import signal
    import socket
    import urllib.request

    root, _ = trained
    keys = tmp_path / "keys.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FUNDGRPO_API_KEYS": str(keys),
        "FUNDGRPO_DB_URL": f"sqlite:///{tmp_path}/store.db",
        "FUNDGRPO_API_MODEL": str(root / "models/policy"),
    }
    made = {}
    for name, scopes in (("analyst", "read,evaluate"), ("reviewer", "read,review")):
        out = subprocess.run(
            [sys.executable, "-m", "fundgrpo.serving.api", "add-key", name, "--scopes", scopes],
            env=env, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        made[name] = out.stdout.strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "fundgrpo.serving.api", "serve", "--port", str(port)],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def call(path: str, key: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(
            base + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={"X-API-Key": key, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    try:
        for _ in range(240):
            try:
                if urllib.request.urlopen(base + "/readyz", timeout=5).status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        reference = pd.read_parquet(root / "data/validated/funds.parquet")
        evaluated = call("/v1/evaluations", made["analyst"], {"funds": [fund(reference, 0)]})["evaluations"][0]
        decided = call(
            "/v1/decisions", made["reviewer"], {"share_class_id": "API-0", "grade": 5, "reason": "kept after a kill"}
        )
        server.send_signal(signal.SIGKILL)  # at once, after the 201
        server.wait(timeout=30)
    finally:
        server.kill()
    kept = Store(f"sqlite:///{tmp_path}/store.db").list_decisions("API-0")
    assert [(d["id"], d["new_grade"], d["reason"]) for d in kept] == [(decided["id"], 5, "kept after a kill")]
    assert kept[0]["evaluation_id"] == evaluated["evaluation_id"]


def workspace_view(root, dest, own=("metrics",)):
    """A view of the trained repo: each top-level entry linked, but those in `own` copied (free to change)."""
    dest.mkdir()
    for entry in root.iterdir():
        if entry.name not in own:
            (dest / entry.name).symlink_to(entry)
        elif entry.is_dir():
            shutil.copytree(entry, dest / entry.name)
        else:
            shutil.copy2(entry, dest / entry.name)
    return dest


def test_serving_never_follows_champion_past_the_gate(trained, tmp_path, monkeypatch):
    """The MLflow UI (or any client) can move `champion` by hand: the API then keeps serving the
    version the gate promoted, and says so; at start-up it serves the newest such version, and
    refuses (503, naming why) when there is none. The model card shows the gate's record of the
    version served, and metrics/register.json only when it is that version's run's."""
    from mlflow import MlflowClient

    from fundgrpo.registry import mlflow_registry

    root, _ = trained
    view = workspace_view(root, tmp_path / "ws")
    shutil.copy(root / "mlflow.db", tmp_path / "registry.db")
    uri = f"sqlite:///{tmp_path}/registry.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    import mlflow

    monkeypatch.setattr(mlflow.tracking._tracking_service.utils, "_tracking_uri", None)
    client = MlflowClient(tracking_uri=uri)
    # a model of its own in the copied registry (other tests may have promoted fund-evaluator's versions)
    name = "gate-test"
    source = client.get_model_version("fund-evaluator", "1").source
    client.create_registered_model(name)
    experiment = client.get_run(client.get_model_version("fund-evaluator", "1").run_id).info.experiment_id

    def version(record: dict | None):
        """A version of its own run; `record`: the gate's decision logged with the run, as `register` does."""
        with mlflow.start_run(experiment_id=experiment) as run:
            made = client.create_model_version(name, source, run.info.run_id)
            if record is not None:
                mlflow.log_dict({"version": made.version, **record}, mlflow_registry.GATE_RECORD)
        return made, run.info.run_id

    refused_by_gate, _ = version({"promoted": False, "reason": "qwk 0.30 does not beat rule scorer 0.41"})
    keys = tmp_path / "keys.json"
    env = {**os.environ, "FUNDGRPO_API_KEYS": str(keys), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "fundgrpo.serving.api", "add-key", "desk", "--scopes", "read,evaluate"]
    h = {"X-API-Key": subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout.strip()}
    settings = ApiSettings(
        keys_file=keys, db_url=f"sqlite:///{tmp_path}/s.db", alias_check_s=0.0, model=f"models:/{name}@champion"
    )
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    one = {"funds": [fund(reference, 0)]}

    # champion moved by hand onto the gate's refused version, nothing promoted ever: 503 naming why
    client.set_registered_model_alias(name, "champion", refused_by_gate.version)
    with TestClient(create_app(view, settings)) as app:
        ready = app.get("/readyz").json()
        assert not ready["ready"] and "which the gate did not promote" in ready["error"]
        assert "qwk 0.30 does not beat" in ready["error"] and "no version the gate promoted" in ready["error"]
        refused = app.post("/v1/evaluations", json=one, headers=h)
        assert refused.status_code == 503 and "did not promote" in refused.json()["detail"]

    # a version the gate promoted (its run's record, as `register` logs it) is served as champion
    promoted, promoted_run = version({"promoted": True, "reason": "qwk beat"})
    by_hand, _ = version(None)  # registered by hand: no record
    client.set_registered_model_alias(name, "champion", promoted.version)
    with TestClient(create_app(view, settings)) as app:
        assert app.post("/v1/evaluations", json=one, headers=h).json()["model_version"].endswith(f"/{promoted.version}")
        card = app.get("/v1/model", headers=h).json()
        assert card["note"] is None and card["gate"]["promoted"] is True
        # moved by hand (as the UI's "Promote model" does): the promoted version keeps serving, said so
        client.set_registered_model_alias(name, "champion", by_hand.version)
        answer = app.post("/v1/evaluations", json=one, headers=h).json()
        assert answer["model_version"] == f"models:/{name}/{promoted.version}"
        card = app.get("/v1/model", headers=h).json()
        assert f"champion points at v{by_hand.version}, which the gate did not promote" in card["note"]
        assert "no gate record" in card["note"] and app.get("/readyz").json()["ready"]
    # a fresh start with champion on the hand-made version: the newest version the gate promoted
    with TestClient(create_app(view, settings)) as app:
        assert app.post("/v1/evaluations", json=one, headers=h).json()["model_version"].endswith(f"/{promoted.version}")

    # the model card: metrics/register.json only when it is the served version's run (not its number)
    client.set_registered_model_alias(name, "champion", promoted.version)
    decision = {"version": int(promoted.version), "run_id": "another-run", "reason": "qwk 0.84 of another run"}
    (view / "metrics/register.json").write_text(json.dumps(decision))
    with TestClient(create_app(view, settings)) as app:
        card = app.get("/v1/model", headers=h).json()
        assert "decision" not in card and card["gate"]["reason"] == "qwk beat"
        (view / "metrics/register.json").write_text(json.dumps({**decision, "run_id": promoted_run}))
        assert app.get("/v1/model", headers=h).json()["decision"]["run_id"] == promoted_run


def test_serving_refuses_a_champion_trained_on_another_methodology(trained, tmp_path, monkeypatch):
    """The methodology file switched to its Korean version after the champion was trained on the English
    one: that champion would answer every fund invalidly. Serving refuses it, naming both methodologies,
    and keeps the newest promoted version trained on the compiled one; with none, 503 saying so."""
    import mlflow
    from mlflow import MlflowClient

    from fundgrpo.methodology import compiler
    from fundgrpo.params import load_params
    from fundgrpo.registry import mlflow_registry
    from fundgrpo.serving.batch import EvaluateError, resolve_model

    root, _ = trained
    view = workspace_view(root, tmp_path / "ws")
    shutil.copy(root / "mlflow.db", tmp_path / "registry.db")
    uri = f"sqlite:///{tmp_path}/registry.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr(mlflow.tracking._tracking_service.utils, "_tracking_uri", None)
    client = MlflowClient(tracking_uri=uri)
    compiled = compiler.load_methodology(root / "data/schema")
    korean = compiler.load(REPO / "methodology/default_ko.yaml")
    assert compiler.fingerprint(korean) != compiler.fingerprint(compiled)
    source = client.get_model_version("fund-evaluator", "1").source
    experiment = client.get_run(client.get_model_version("fund-evaluator", "1").run_id).info.experiment_id

    def version(name: str, methodology):
        with mlflow.start_run(experiment_id=experiment) as run:
            made = client.create_model_version(name, source, run.info.run_id)
            trained_on = {
                "name": methodology.name,
                "version": methodology.version,
                "language": methodology.language,
                "fingerprint": compiler.fingerprint(methodology),
            }
            record = {"version": made.version, "promoted": True, "reason": "beat", "methodology": trained_on}
            mlflow.log_dict(record, mlflow_registry.GATE_RECORD)
        return made

    keys = tmp_path / "keys.json"
    env = {**os.environ, "FUNDGRPO_API_KEYS": str(keys), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "fundgrpo.serving.api", "add-key", "desk", "--scopes", "read,evaluate"]
    h = {"X-API-Key": subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout.strip()}
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    one = {"funds": [fund(reference, 0)]}

    # only a Korean-trained champion: nothing to serve under the English methodology, and the 503 says why
    client.create_registered_model("ko-only")
    client.set_registered_model_alias("ko-only", "champion", version("ko-only", korean).version)
    only = ApiSettings(keys_file=keys, db_url=f"sqlite:///{tmp_path}/a.db", alias_check_s=0.0,
                       model="models:/ko-only@champion")  # fmt: skip
    with TestClient(create_app(view, only)) as app:
        ready = app.get("/readyz").json()
        assert not ready["ready"] and f"trained on {korean.name!r} v1.0 (ko, fingerprint" in ready["error"]
        assert f"fingerprint {compiler.fingerprint(compiled)}" in ready["error"]
        assert app.post("/v1/evaluations", json=one, headers=h).status_code == 503

    # an English-trained version promoted before: champion moved to the Korean one is refused, the English served
    client.create_registered_model("switched")
    english = version("switched", compiled)
    switched = version("switched", korean)
    client.set_registered_model_alias("switched", "champion", switched.version)
    settings = replace(only, model="models:/switched@champion", db_url=f"sqlite:///{tmp_path}/b.db")
    with TestClient(create_app(view, settings)) as app:
        answer = app.post("/v1/evaluations", json=one, headers=h).json()
        assert answer["model_version"] == f"models:/switched/{english.version}"
        card = app.get("/v1/model", headers=h).json()
        assert "(ko, fingerprint" in card["note"] and "but the methodology compiled now" in card["note"]
        assert card["methodology"].startswith("the methodology compiled now ('Fund Quality Rating' v1.0, en")
    # batch scoring the same: the champion's English predecessor, or a clear refusal for another alias
    params = load_params(root / "params.yaml")
    params = replace(params, register=replace(params.register, tracking_uri=uri))
    folder, served = resolve_model("models:/switched@champion", params, tmp_path / "scratch", compiled)
    assert served == f"models:/switched/{english.version}" and folder.is_dir()
    client.set_registered_model_alias("switched", "korean", switched.version)
    with pytest.raises(EvaluateError, match=f"trained on '{korean.name}' v1.0 \\(ko"):
        resolve_model("models:/switched@korean", params, tmp_path / "scratch2", compiled)


@pytest.mark.skipif(not support.has_browser(), reason=support.NO_BROWSER)
def test_docs_render_the_api_with_typed_answers_in_a_browser(trained, tmp_path):
    """/docs in headless Chromium: Swagger UI renders FastAPI's OpenAPI 3.1 (the 4.15 bundle could
    not), and an answer's schema is typed field by field (not `additionalProperties: true`)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    root, _ = trained
    settings = ApiSettings(keys_file=tmp_path / "keys.json", db_url=f"sqlite:///{tmp_path}/s.db",
                           model=str(root / "models/policy"))  # fmt: skip
    server, base = support.serve(create_app(root, settings))
    try:
        import urllib.request

        with urllib.request.urlopen(f"{base}/openapi.json", timeout=60) as r:
            spec = json.loads(r.read())
        answer = spec["paths"]["/v1/evaluations"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        evaluation = spec["components"]["schemas"]["Evaluation"]
        assert answer == {"$ref": "#/components/schemas/Evaluations"} and evaluation["additionalProperties"] is False
        assert {"grade", "grade_note", "probabilities", "confidence", "evidence"} <= set(evaluation["properties"])
        driver = support.browser()
        try:
            driver.get(base + "/docs")
            wait = WebDriverWait(driver, 60)
            wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".opblock-summary-path")))
            paths = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")]
            assert {"/v1/evaluations", "/v1/decisions", "/v1/review-queue", "/v1/model"} <= set(paths), paths
            assert "Unable to render this definition" not in driver.page_source

            # the schemas section (JSON Schema 2020-12 in Swagger UI 5) lists the answers' models; open
            # Evaluation and read its fields
            def article(d):
                tops = d.find_elements(By.CSS_SELECTOR, "section.models article[data-json-schema-level='0']")
                title = ".json-schema-2020-12__title"
                return next((a for a in tops if a.find_element(By.CSS_SELECTOR, title).text == "Evaluation"), False)

            model = wait.until(article)
            driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", model)
            model.find_element(By.CSS_SELECTOR, ".json-schema-2020-12-accordion").click()
            wait.until(lambda d: "grade_note" in article(d).text and "confidence" in article(d).text)
            SHOTS.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(SHOTS / "api_docs.png"))
        finally:
            driver.quit()
    finally:
        server.should_exit = True


def test_the_package_docstring_lists_every_endpoint():
    """fundgrpo/serving/api/__init__.py names each endpoint the app serves, and no other."""
    served = {p for p in create_app(REPO).openapi()["paths"]} | {"/review"}
    listed = set(re.findall(r"`(?:GET |POST )?(/[\w/{}-]+)`", api_package.__doc__ or ""))
    assert listed == served


def test_documents_sent_with_a_fund_are_checked_then_read_and_never_guessed_without(trained, cli_keys, tmp_path):
    """A fund's documents in the request: refused with the field named where the methodology judges nothing
    from documents, or where a document is malformed or dated after the data's as-of date; under a methodology
    with pillars, the fund sent with documents is judged from them (each pillar judged with a verified quote or
    not assessed and why) and a fund sent without any has every pillar "not assessed": no documents."""
    root = support.workspace_copy(trained[0], tmp_path / "repo")
    keys = tmp_path / "keys.json"
    shutil.copyfile(cli_keys[0], keys)
    db = f"sqlite:///{tmp_path}/evaluations.db"
    settings = ApiSettings(keys_file=keys, db_url=db, model=str(root / "models/policy"), alias_check_s=0.0)
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    h = {"X-API-Key": cli_keys[1]["analyst"]}
    note = {"date": "2022-05-02", "kind": "news", "text": "The lead manager resigned in May; her deputy took over."}
    with TestClient(create_app(root, settings)) as client:
        done = client.post("/v1/evaluations", json={"funds": [fund(reference, 0, documents=[note])]}, headers=h)
        assert done.status_code == 422 and "judges nothing from documents" in done.text

    for name, obj in compiler.compile_file(REPO / "methodology/documents.yaml").items():
        write_json(obj, root / "data/schema" / f"{name}.json")
    with TestClient(create_app(root, settings)) as client:
        bad = {
            "2024-13-02": "API-0 documents[1]: field date: '2024-13-02' is not a date",
            "2099-01-01": "API-0 documents[1] (2099-01-01)",  # after the as-of date: never silently unread
        }
        for date, said in bad.items():
            sent = {"funds": [fund(reference, 0, documents=[{**note, "date": date}])]}
            done = client.post("/v1/evaluations", json=sent, headers=h)
            assert done.status_code == 422 and said in done.json()["detail"], done.text
        short = {**note, "text": "Left."}
        done = client.post("/v1/evaluations", json={"funds": [fund(reference, 0, documents=[short])]}, headers=h)
        assert done.status_code == 422 and "field text: 5 characters" in done.json()["detail"]
        done = client.post("/v1/evaluations", json={"funds": [fund(reference, 0, documents=[{**note, "url": "x"}])]},
                           headers=h)  # fmt: skip
        assert done.status_code == 422 and "url" in done.text  # unknown fields refused, as for a fund

        sent = [fund(reference, 0, documents=[note]), fund(reference, 1)]
        done = client.post("/v1/evaluations", json={"funds": sent}, headers=h)
        assert done.status_code == 200, done.text
        body = done.json()
        schemas.Evaluations.model_validate(body)
        with_docs, without = body["evaluations"]
        assert [p["criterion"] for p in with_docs["pillars"]] == ["people", "process", "parent"]
        assert all(p["reason"] != NO_DOCUMENTS for p in with_docs["pillars"])  # read: the model judged or said why
        for p in with_docs["pillars"]:  # a judgement rests on a verified quote; otherwise not assessed, and why
            judged = p["judgement"] != "not assessed"
            assert (judged and any(c["verified"] for c in p["evidence"]) and p["reason"] is None) or (
                not judged and p["reason"]
            )
        assert [(p["judgement"], p["reason"]) for p in without["pillars"]] == [("not assessed", NO_DOCUMENTS)] * 3
        stored = client.get(f"/v1/evaluations/{with_docs['share_class_id']}", headers=h).json()
        assert stored["pillars"] == with_docs["pillars"]

        # a document id `ingest` already stored is seen only where the stored documents are read (in the
        # model's queue): still a 422 naming it, never a 500
        sid = with_docs["share_class_id"]
        kept = {
            "document_id": "DOC-KEPT", "key_kind": "share_class", "key": sid, "date": "2022-01-03", "kind": "news",
            "language": "en", "text": "The team was unchanged over the year.", "source": "x",
        }  # fmt: skip
        pd.DataFrame([kept]).to_parquet(root / load_params(root / "params.yaml").ingest.documents_out)
        sent = {"funds": [fund(reference, 0, documents=[{**note, "document_id": "DOC-KEPT"}])]}
        again = client.post("/v1/evaluations", json=sent, headers=h)
        assert again.status_code == 422 and "['DOC-KEPT'] already stored" in again.json()["detail"], again.text
