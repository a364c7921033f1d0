"""The client portal: a client firm signs in with its key and reads its share classes' published
ratings, each as a report page (Korean or English) and a PDF.

    /portal                      sign in (the key, once), then the firm's ratings
    /portal/ratings/{id}         the report: grade and what it means, each pillar with its evidence,
                                 the reasoning, the grade history (a chart), versions, date, reviewer
    /portal/ratings/{id}.pdf     the same report as a PDF (fpdf2; Korean set in NanumGothic)

Signing in trades the key for a session cookie (signed with `FUNDGRPO_PORTAL_SECRET`, HttpOnly,
SameSite=Strict, expiring after `portal_minutes`); a revoked key ends its sessions at once. The forms
(sign in, sign out) carry a CSRF token bound to the browser. A share class the client may not see
answers exactly as one that does not exist; every page is audited as the API's reads are.
"""

from __future__ import annotations

import html
import io
import secrets
from importlib.util import find_spec
from pathlib import Path

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fpdf import FPDF
from itsdangerous import BadSignature, TimestampSigner, URLSafeTimedSerializer

from fundgrpo.methodology.citations import JUDGEMENT_WORDS
from fundgrpo.serving.api import ratings
from fundgrpo.serving.api.keys import hash_key
from fundgrpo.serving.api.routes import PAGE_HEADERS, audit

router = APIRouter(include_in_schema=False)
SESSION, CSRF = "fg_portal", "fg_csrf"
WORDS = {
    "en": {"title": "Published ratings", "sign_in": "Sign in", "key": "Your API key", "sign_out": "Sign out",
           "bad_key": "That key does not open the portal.", "none": "No published rating yet.",
           "fund": "Share class", "grade": "Grade", "state": "State", "version": "Version", "date": "Published",
           "reviewer": "Reviewer", "methodology": "Methodology", "model": "Model", "pillars": "Qualitative pillars",
           "reasoning": "Reasoning", "note": "Reviewer's note", "history": "Grade history", "evidence": "Evidence",
           "not_assessed": "not assessed", "withdrawn": "withdrawn", "published": "published", "pdf": "PDF",
           "other": "한국어", "not_found": "No published rating for this share class.", "peers": "Against its peers",
           "percentile": "percentile among the {n} share classes of its category (100 = best; dashed: the middle)",
           "no_data": "no data"},
    "ko": {"title": "공개 등급", "sign_in": "로그인", "key": "API 키", "sign_out": "로그아웃",
           "bad_key": "이 키로는 포털에 들어갈 수 없습니다.", "none": "공개된 등급이 아직 없습니다.",
           "fund": "클래스", "grade": "등급", "state": "상태", "version": "버전", "date": "공개일",
           "reviewer": "심사자", "methodology": "방법론", "model": "모델", "pillars": "정성 평가",
           "reasoning": "근거", "note": "심사자 의견", "history": "등급 이력", "evidence": "근거 문장",
           "not_assessed": "평가 불가", "withdrawn": "철회", "published": "공개", "pdf": "PDF",
           "other": "English", "not_found": "이 클래스의 공개 등급이 없습니다.", "peers": "동일 유형 대비",
           "percentile": "같은 유형 {n}개 클래스 중 백분위 (100 = 최상, 점선: 중간)", "no_data": "자료 없음"},
}  # fmt: skip


SALT = "fund-grpo portal"


def session_token(secret: str, digest: str, csrf: str, age_s: int = 0) -> str:
    """A portal session's signed cookie value: the key's digest and the session's CSRF token, signed with
    `secret` `age_s` seconds ago (0: now; older than `portal_minutes`, an expired session)."""

    class Signed(TimestampSigner):
        def get_timestamp(self) -> int:
            return super().get_timestamp() - age_s

    return URLSafeTimedSerializer(secret, salt=SALT, signer=Signed).dumps({"k": digest, "c": csrf})


def session(request: Request) -> dict | None:
    """The signed-in key's entry (a client key still in the key ring, its session not expired), or None."""
    raw = request.cookies.get(SESSION)
    if not raw:
        return None
    try:
        settings = request.app.state.settings
        data = URLSafeTimedSerializer(settings.portal_secret, salt=SALT).loads(
            raw, max_age=settings.portal_minutes * 60
        )
    except BadSignature:  # forged, tampered or expired (SignatureExpired is a BadSignature)
        return None
    entry = request.app.state.keys.get(data.get("k", ""))
    if entry is None or not entry.get("client"):  # revoked since, or never a client's
        return None
    request.state.key_name = entry["name"]
    return {**entry, "csrf": data.get("c")}


def language(request: Request) -> str:
    asked = request.query_params.get("lang")
    return asked if asked in WORDS else request.app.state.evaluator.methodology.language


def page(title: str, body: str, lang: str) -> HTMLResponse:
    return HTMLResponse(
        f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        "<style>body{font-family:'NanumGothic','Noto Sans KR',sans-serif;margin:2em;max-width:60em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
        ".grade{font-size:2.5em;font-weight:bold}.withdrawn{color:#a00}</style></head>"
        f"<body>{body}</body></html>",
        headers=PAGE_HEADERS,
    )


def login_page(request: Request, failed: bool = False) -> HTMLResponse:
    lang = language(request)
    w = WORDS[lang]
    token = secrets.token_urlsafe(24)  # double submit: the same value in a cookie and in the form
    body = (
        f"<h1>{w['title']}</h1>" + (f'<p class="withdrawn">{w["bad_key"]}</p>' if failed else "")
        + f'<form method="post" action="/portal/login"><label>{w["key"]} '
        f'<input type="password" name="key" autocomplete="off"></label>'
        f'<input type="hidden" name="csrf" value="{token}"><button type="submit">{w["sign_in"]}</button></form>'
    )  # fmt: skip
    response = page(w["title"], body, lang)
    response.set_cookie(CSRF, token, httponly=True, samesite="strict", path="/portal", max_age=600)
    return response


@router.get("/portal")
def home(request: Request):
    who = session(request)
    if who is None:
        return login_page(request)
    lang = language(request)
    w = WORDS[lang]
    found = request.app.state.store.latest_ratings(set(who["entitled"]))
    request.app.state.store.log(who["name"], "portal_list", None, {"n": len(found)})
    rows = "".join(
        f'<tr><td><a href="/portal/ratings/{html.escape(r["share_class_id"])}?lang={lang}">'
        f"{html.escape(r['share_class_id'])}</a></td><td>{_grade(r, w)}</td><td>{r['version']}</td>"
        f"<td>{html.escape(r['published_at'][:10])}</td></tr>"
        for r in found
    )
    table = (
        f"<table><tr><th>{w['fund']}</th><th>{w['grade']}</th><th>{w['version']}</th><th>{w['date']}</th></tr>"
        f"{rows}</table>"
        if found
        else f"<p>{w['none']}</p>"
    )
    return page(w["title"], f"<h1>{w['title']}</h1>{table}{_sign_out(who, w)}", lang)


@router.post("/portal/login")
def login(request: Request, key: str = Form("", max_length=200), csrf: str = Form("", max_length=100)):
    if not csrf or not secrets.compare_digest(csrf, request.cookies.get(CSRF, "")):
        raise HTTPException(403, "the sign-in form is stale or was not ours: reload /portal")
    api = request.app.state
    host = request.client.host if request.client else "unknown"
    if not api.limiter.allow(f"portal:{host}"):  # guessing keys: the sign-in form has a rate of its own
        audit(request, "anonymous", "portal_refused", None, {"why": "over the sign-in rate", "from": host})
        raise HTTPException(429, "too many sign-in attempts: wait a minute", headers={"Retry-After": "60"})
    digest = hash_key(key) if key else ""
    entry = api.keys.get(digest) if key else None
    if entry is None or not entry.get("client"):
        api.store.log((entry or {}).get("name", "unknown"), "portal_refused", None, {"why": "not a client key"})
        return login_page(request, failed=True)
    api.store.log(entry["name"], "portal_login", None, {})
    token = session_token(api.settings.portal_secret, digest, secrets.token_urlsafe(24))
    response = RedirectResponse("/portal", status_code=303)
    response.set_cookie(SESSION, token, httponly=True, samesite="strict", path="/portal",
                        max_age=api.settings.portal_minutes * 60)  # fmt: skip
    response.delete_cookie(CSRF, path="/portal")
    return response


@router.post("/portal/logout")
def logout(request: Request, csrf: str = Form("", max_length=100)):
    who = session(request)
    if who is None or not csrf or not secrets.compare_digest(csrf, who.get("csrf") or ""):
        raise HTTPException(403, "sign out from the portal's own page")
    response = RedirectResponse("/portal", status_code=303)
    response.delete_cookie(SESSION, path="/portal")
    return response


def _sign_out(who: dict, w: dict) -> str:
    return (
        f'<form method="post" action="/portal/logout"><input type="hidden" name="csrf" '
        f'value="{html.escape(who["csrf"] or "")}"><button type="submit">{w["sign_out"]}</button></form>'
    )


def _grade(r: dict, w: dict) -> str:
    if r["state"] == "withdrawn":
        return f'<span class="withdrawn">{w["withdrawn"]}</span>'
    return f"{r['grade']} · {html.escape(r.get('grade_label') or '')}"


def judgement_words(judgement, lang: str) -> str:
    """ "lowers (-1)", "not assessed", in `lang`."""
    said = JUDGEMENT_WORDS[lang].get(judgement, str(judgement))
    return f"{said} ({judgement:+d})" if isinstance(judgement, int) else said


def versions_of(request: Request, share_class_id: str) -> tuple[dict, list[dict]]:
    """The signed-in client and the versions of a rating it may read (audited; else 404, as for none)."""
    who = session(request)
    if who is None:
        raise HTTPException(401, "sign in at /portal")
    return who, ratings.visible(request, share_class_id, set(who["entitled"]))


def pyplot():
    """matplotlib's pyplot, drawing off-screen, with the Korean font known (the charts' labels may be Korean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    if "NanumGothic" not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(font()))
    return plt


def svg(fig) -> str:
    """The figure as inline SVG (then closed)."""
    out = io.StringIO()
    fig.savefig(out, format="svg")
    pyplot().close(fig)
    return out.getvalue()[out.getvalue().index("<svg") :]


def png(fig) -> bytes:
    """The figure as PNG (then closed), for the PDF."""
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=150)
    pyplot().close(fig)
    return out.getvalue()


def history_chart(versions: list[dict]):
    """The grade over the versions (withdrawals as gaps)."""
    plt = pyplot()
    with plt.rc_context({"font.family": ["NanumGothic", "DejaVu Sans"]}):
        fig, ax = plt.subplots(figsize=(6, 2.2))
        xs = [v["published_at"][:10] + f" v{v['version']}" for v in versions]
        ax.step(range(len(xs)), [v["grade"] if v["grade"] is not None else float("nan") for v in versions],
                where="mid", marker="o")  # fmt: skip
        ax.set_xticks(range(len(xs)), xs, fontsize=7)
        ax.set_ylim(0.5, 5.5)
        ax.set_yticks([1, 2, 3, 4, 5])
        fig.tight_layout()
        return fig


def peers_chart(peers: dict, names: dict[str, str], w: dict):
    """The fund's percentile per quantitative criterion among its category's share classes, the middle
    peer dashed; a criterion without data is named, with no bar."""
    plt = pyplot()
    with plt.rc_context({"font.family": ["NanumGothic", "DejaVu Sans"]}):
        items = list(peers["percentiles"].items())
        fig, ax = plt.subplots(figsize=(6, 0.45 * len(items) + 0.9))
        ys = range(len(items))
        values = [v if v is not None else 0.0 for _, v in items]
        colours = [plt.get_cmap("RdYlGn")(v / 100) for v in values]
        ax.barh(ys, values, color=colours)
        for y, (_, v) in zip(ys, items):
            ax.text(v + 1 if v is not None else 1, y, f"{v:.0f}" if v is not None else w["no_data"], va="center",
                    fontsize=8)  # fmt: skip
        ax.axvline(50, linestyle="--", color="grey", linewidth=1)
        ax.set_yticks(list(ys), [names.get(c, c) for c, _ in items], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 105)
        ax.set_xlabel(w["percentile"].format(n=peers["count"]), fontsize=8)
        fig.tight_layout()
        return fig


def criterion_names(request: Request, lang: str) -> dict[str, str]:
    """Every criterion (quantitative and qualitative) by the methodology's label in `lang`."""
    m = request.app.state.evaluator.methodology
    return {c.id: c.text(lang) for c in (*m.criteria, *m.qualitative)}


@router.get("/portal/ratings/{share_class_id}")
def report(request: Request, share_class_id: str):
    if share_class_id.endswith(".pdf"):
        return report_pdf(request, share_class_id[: -len(".pdf")])
    who, versions = versions_of(request, share_class_id[:100])
    lang = language(request)
    w = WORDS[lang]
    r = versions[-1]
    names = criterion_names(request, lang)
    pillars = "".join(
        f"<tr><td>{html.escape(names.get(p['criterion'], p['criterion']))}</td>"
        f"<td>{html.escape(judgement_words(p['judgement'], lang))}</td><td>"
        + "<br>".join(f"[{html.escape(c['document_id'])}] “{html.escape(c['quote'])}”" for c in p["evidence"])
        + "</td></tr>"
        for p in r.get("pillars") or []
    )
    facts = [(w["state"], w[r["state"]]), (w["version"], r["version"]), (w["date"], r["published_at"][:10]),
             (w["reviewer"], r["reviewer"]), (w["methodology"], r["methodology"]),
             (w["model"], r["model_version"])]  # fmt: skip
    other = "ko" if lang == "en" else "en"
    sid = html.escape(r["share_class_id"])
    body = (
        f'<p><a href="/portal?lang={lang}">{w["title"]}</a> · <a href="?lang={other}">{w["other"]}</a> · '
        f'<a href="/portal/ratings/{sid}.pdf?lang={lang}">{w["pdf"]}</a></p>'
        f"<h1>{w['fund']} {sid}</h1><p class='grade'>{_grade(r, w)}</p><table>"
        + "".join(f"<tr><th>{k}</th><td>{html.escape(str(v or '—'))}</td></tr>" for k, v in facts)
        + "</table>"
        + (f"<h2>{w['note']}</h2><p>{html.escape(r['note'])}</p>" if r.get("note") else "")
        + (f"<h2>{w['reasoning']}</h2><p>{html.escape(r['reasoning'])}</p>" if r.get("reasoning") else "")
        + (f"<h2>{w['pillars']}</h2><table>{pillars}</table>" if pillars else "")
        + (f"<h2>{w['peers']}</h2>{svg(peers_chart(r['peers'], names, w))}" if r.get("peers") else "")
        + f"<h2>{w['history']}</h2>{svg(history_chart(versions))}{_sign_out(who, w)}"
    )
    return page(f"{w['fund']} {r['share_class_id']}", body, lang)


def font() -> Path:
    """NanumGothic from the koreanize-matplotlib wheel (found, not imported: importing restyles matplotlib)."""
    spec = find_spec("koreanize_matplotlib")
    assert spec is not None and spec.submodule_search_locations, "koreanize-matplotlib is a dependency: make setup"
    return Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NanumGothic.ttf"


def report_pdf(request: Request, share_class_id: str) -> Response:
    _, versions = versions_of(request, share_class_id[:100])
    lang = language(request)
    w = WORDS[lang]
    r = versions[-1]
    names = criterion_names(request, lang)
    pdf = FPDF()
    pdf.add_page()
    pdf.add_font("Nanum", "", str(font()))

    def say(text: str, size: int = 10) -> None:  # one paragraph, from the left margin
        pdf.set_font("Nanum", size=size)
        pdf.multi_cell(0, size * 0.6, new_x="LMARGIN", new_y="NEXT", text=text)

    say(f"{w['fund']} {r['share_class_id']}", 18)
    say(
        w["withdrawn"] if r["state"] == "withdrawn" else f"{w['grade']} {r['grade']} · {r.get('grade_label') or ''}", 14
    )
    for k, v in ((w["version"], r["version"]), (w["date"], r["published_at"][:10]), (w["reviewer"], r["reviewer"]),
                 (w["methodology"], r["methodology"]), (w["model"], r["model_version"])):  # fmt: skip
        say(f"{k}: {v or '—'}")
    for title, text in ((w["note"], r.get("note")), (w["reasoning"], r.get("reasoning"))):
        if text:
            say(title, 12)
            say(text)
    if r.get("pillars"):
        say(w["pillars"], 12)
        for p in r["pillars"]:
            quotes = "; ".join(f"[{c['document_id']}] “{c['quote']}”" for c in p["evidence"])
            said = f"{names.get(p['criterion'], p['criterion'])}: {judgement_words(p['judgement'], lang)}"
            say(said + (f" — {quotes}" if quotes else ""))
    if r.get("peers"):
        say(w["peers"], 12)
        pdf.image(io.BytesIO(png(peers_chart(r["peers"], names, w))), w=150)
    say(w["history"], 12)
    pdf.image(io.BytesIO(png(history_chart(versions))), w=150)
    for v in versions:
        said = w["withdrawn"] if v["state"] == "withdrawn" else f"{v['grade']} {v.get('grade_label') or ''}"
        say(f"v{v['version']} {v['published_at'][:10]}: {said} ({v['reviewer']})")
    return Response(bytes(pdf.output()), media_type="application/pdf", headers=PAGE_HEADERS)
