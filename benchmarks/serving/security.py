"""What an attacker tries against the API and the client portal (OWASP API Security Top 10, 2023), on a
trained workspace, with a fresh store and keys: each attempt, what it should get, what it got, whether
anything leaked, and whether the attempt added a row to the audit log.

    python benchmarks/serving/security.py [--root .]
    # -> benchmarks/serving/security.md, research/results/security.json

Two client firms (Acme, entitled to one share class; Beta, to another), a firm analyst and a reviewer;
one draft of each share class, one published rating of Acme's. "Leaked" means the answer holds another
client's share class id, a draft's text or a grade the key may not read.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from fastapi.testclient import TestClient

from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.keys import add_key, entitle, hash_key, revoke_key
from fundgrpo.serving.api.portal import SESSION, session_token
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store

HERE = Path(__file__).resolve().parent
SECRET_TEXT = "DRAFT-ONLY: internal doubts about Beta's fund"  # a draft's text no client may read
FIRM_ROUTES = [("GET", "/v1/evaluations/B-1"), ("GET", "/v1/review-queue"), ("GET", "/v1/decisions"),
               ("GET", "/v1/audit"), ("GET", "/v1/model"), ("POST", "/v1/evaluations"), ("POST", "/v1/decisions"),
               ("POST", "/v1/publications"), ("POST", "/v1/withdrawals")]  # fmt: skip


def world(tmp: Path, root: Path) -> tuple[ApiSettings, dict[str, str]]:
    """Keys, entitlements, drafts and one published rating in a fresh store under `tmp`."""
    keys = tmp / "keys.json"
    made = {"acme": add_key(keys, "acme", [], "Acme"), "beta": add_key(keys, "beta", [], "Beta"),
            "analyst": add_key(keys, "analyst", ["read", "evaluate"]),
            "reviewer": add_key(keys, "reviewer", ["read", "review", "publish"])}  # fmt: skip
    entitle(keys, "Acme", ["A-1"])
    entitle(keys, "Beta", ["B-1"])
    store = Store(f"sqlite:///{tmp}/store.db")
    for sid, text in (("A-1", "Steady fund."), ("B-1", SECRET_TEXT)):
        [eid] = store.add([{"share_class_id": sid, "grade": 3, "reasoning": text, "pillars": []}], "v1")
        if sid == "A-1":
            store.publish(sid, "published", 3, store.evaluation(eid), "m", "reviewer", None,
                          {"grade_label": "Average", "reasoning": text, "pillars": [], "note": None})  # fmt: skip
    settings = ApiSettings(keys_file=keys, db_url=f"sqlite:///{tmp}/store.db", model=str(root / "models/policy"),
                           rate_per_min=30, portal_secret="bench-secret")  # fmt: skip
    return settings, made


def attacks(root: Path) -> list[dict]:
    """Every attempt with its outcome (see the module docstring)."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings, k = world(Path(tmp), root)
        h = {name: {"X-API-Key": key} for name, key in k.items()}
        store = Store(settings.db_url)
        seen = [0]  # audit rows so far: an attempt is audited when it added one

        def settled() -> int:
            """The audit rows added since the last call (the setting-up requests' are not an attempt's)."""
            now = len(store.audit_log())
            added, seen[0] = now - seen[0], now
            return added

        with TestClient(create_app(root, settings)) as c:

            def tried(category: str, what: str, response, expected: int, actor: str | None = None) -> None:
                text = response.text.replace(" ", "")
                # the id the attacker sent may come back in the refusal; Beta's rating, report or draft may not
                leaked = SECRET_TEXT.replace(" ", "") in text or (
                    actor == "acme" and ('"share_class_id":"B-1"' in text or "ShareclassB-1" in text)
                )
                rows.append({"category": category, "attempt": what, "expected": expected, "got": response.status_code,
                             "leaked": bool(leaked), "audited": settled() > 0})  # fmt: skip

            api1 = "API1 object-level authorization"
            tried(api1, "Acme reads Beta's rating by id", c.get("/v1/ratings/B-1", headers=h["acme"]), 404, "acme")
            tried(api1, "Acme reads Beta's rating history", c.get("/v1/ratings/B-1/history", headers=h["acme"]), 404,
                  "acme")  # fmt: skip
            listed = c.get("/v1/ratings", headers=h["acme"])
            tried(api1, "Acme lists ratings (only its own come back)", listed, 200, "acme")
            tried(api1, "Acme guesses a draft by share class", c.get("/v1/evaluations/B-1", headers=h["acme"]), 403,
                  "acme")  # fmt: skip
            api2 = "API2 authentication"
            tried(api2, "no key", c.get("/v1/ratings/A-1"), 401)
            tried(api2, "an unknown key", c.get("/v1/ratings/A-1", headers={"X-API-Key": "fg_guess"}), 401)
            api3 = "API3 object property authorization"
            forged = {"share_class_id": "A-1", "grade": 5, "reason": "x", "version": 1, "reviewer": "boss"}
            tried(api3, "mass assignment on a publication (version, reviewer)",
                  c.post("/v1/publications", json=forged, headers=h["reviewer"]), 422, "reviewer")  # fmt: skip
            decision = {"share_class_id": "A-1", "grade": 4, "reason": "x", "analyst": "boss"}
            tried(api3, "mass assignment on a decision (analyst)",
                  c.post("/v1/decisions", json=decision, headers=h["reviewer"]), 422, "reviewer")  # fmt: skip
            api5 = "API5 function-level authorization"
            for method, path in FIRM_ROUTES:
                tried(api5, f"Acme's key on {method} {path}", c.request(method, path, headers=h["acme"], json={}), 403,
                      "acme")  # fmt: skip
            tried(api5, "an analyst publishes", c.post("/v1/publications", json={"share_class_id": "A-1"},
                                                       headers=h["analyst"]), 403, "analyst")  # fmt: skip
            api6 = "API6 sensitive business flows"
            tried(api6, "a grade changed at publication without a reason",
                  c.post("/v1/publications", json={"share_class_id": "A-1", "grade": 5}, headers=h["reviewer"]), 422,
                  "reviewer")  # fmt: skip

            portal = "Portal session and CSRF"
            other = TestClient(c.app)
            tried(portal, "sign-in posted from another site (no token cookie)",
                  other.post("/portal/login", data={"key": k["acme"], "csrf": "x"}), 403)  # fmt: skip
            c.get("/portal")
            signed = c.post("/portal/login", data={"key": k["acme"], "csrf": c.cookies.get("fg_csrf")},
                            follow_redirects=False)  # fmt: skip
            settled()
            real = c.cookies.get(SESSION)
            tried(portal, "Acme opens Beta's report page", c.get("/portal/ratings/B-1"), 404, "acme")
            tried(portal, "Acme downloads Beta's report PDF", c.get("/portal/ratings/B-1.pdf"), 404, "acme")
            for what, cookie in (("a tampered session cookie", real[:-4] + "AAAA"), ("an empty session", "")):
                c.cookies.clear()
                c.cookies.set(SESSION, cookie)
                tried(portal, what, c.get("/portal/ratings/A-1"), 401)
            stale = session_token(settings.portal_secret, hash_key(k["acme"]), "x", settings.portal_minutes * 60 + 5)
            c.cookies.clear()
            c.cookies.set(SESSION, stale)
            tried(portal, "a replayed session past its life", c.get("/portal/ratings/A-1"), 401)
            c.cookies.clear()
            c.cookies.set(SESSION, real)
            tried(portal, "sign-out with a guessed CSRF token", c.post("/portal/logout", data={"csrf": "x"}), 403)
            c.cookies.clear()
            c.get("/portal")  # a fresh sign-in form and its token
            firm = c.post("/portal/login", data={"key": k["analyst"], "csrf": c.cookies.get("fg_csrf")},
                          follow_redirects=False)  # fmt: skip
            what = "a firm key at the portal's sign-in (the form again, no session)"
            rows.append({"category": portal, "attempt": what, "expected": 200, "got": firm.status_code,
                         "leaked": SESSION in firm.cookies, "audited": settled() > 0})  # fmt: skip
            c.cookies.clear()
            c.cookies.set(SESSION, real)
            revoke_key(settings.keys_file, "acme")
            tried(portal, "a revoked client key's session", c.get("/portal/ratings/A-1"), 401)
            assert signed.status_code == 303

            api4 = "API4 resource consumption"
            codes = [c.get("/v1/ratings", headers=h["beta"]).status_code for _ in range(40)]
            rows.append({"category": api4, "attempt": "Beta sends 40 reads in a minute (rate 30)", "expected": 429,
                         "got": codes[-1], "leaked": False, "audited": settled() >= len(codes)})  # fmt: skip
            big = c.post("/v1/publications", content=b"{" + b" " * (settings.max_bytes + 1) + b"}",
                         headers={**h["reviewer"], "Content-Type": "application/json"})  # fmt: skip
            tried(api4, "a body over the size limit", big, 413, "reviewer")
        for r in rows:
            r["refused"] = r["got"] == r["expected"]
        listed_ids = [x["share_class_id"] for x in listed.json()["ratings"]]
        rows[2]["leaked"] = listed_ids != ["A-1"]
    return rows


def page(rows: list[dict]) -> str:
    lines = [
        "# Attacks on the API and the client portal",
        "",
        "Generated by `python benchmarks/serving/security.py` (OWASP API Security Top 10, 2023; the module "
        "docstring says "
        "what is set up). Audited: the attempt added a row to the audit log (`GET /v1/audit`), each of the 40 "
        "reads one.",
        "",
        "| category | attempt | expected | got | leaked | audited |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        audited = "yes" if r["audited"] else "NO"
        lines.append(f"| {r['category']} | {r['attempt']} | {r['expected']} | {r['got']} | "
                     f"{'YES' if r['leaked'] else 'no'} | {audited} |")  # fmt: skip
    refused = sum(r["refused"] for r in rows)
    lines += ["", f"{refused} of {len(rows)} as expected; {sum(r['leaked'] for r in rows)} leaked; "
                  f"{sum(r['audited'] for r in rows)} of {len(rows)} audited."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    args = ap.parse_args()
    rows = attacks(args.root.resolve())
    (HERE.parents[1] / "research" / "results" / "security.json").write_text(json.dumps(rows, indent=2) + "\n")
    (HERE / "security.md").write_text(page(rows))
    print(page(rows))


if __name__ == "__main__":
    main()
