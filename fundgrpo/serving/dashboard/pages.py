"""The dashboard's pages (a Streamlit script; `python -m fundgrpo.serving.dashboard` runs it in the
workspace). Every page names the model version whose figures it shows: the champion's by default,
any registered version from the sidebar (or `?version=N`). Words follow the methodology's language.

Reads come from the workspace and its registry (fundgrpo/serving/dashboard/workspace.py). The only
write, an analyst's decision, goes through the API with the analyst's own key (scope `review`): the
key stays in this browser session's server-side state, never in a cookie or the URL, so there is
no session for another site to ride (no CSRF), and the API remains the one writer of decisions,
with its checks and audit log.
"""

from __future__ import annotations

import json
import os
import urllib.error
from pathlib import Path

import pandas as pd
import streamlit as st
import streamlit.components.v1 as components

from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.report import FundRow
from fundgrpo.evaluation.story import served_words, written_note
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.serving.dashboard import book, charts, citing, tables
from fundgrpo.serving.dashboard import workspace as wsm
from fundgrpo.serving.dashboard.client import API_URL, api
from fundgrpo.serving.dashboard.labels import EVALUATORS, LABELS, METRICS, category_words, served_name
from fundgrpo.serving.explain import grade_note

MAX_HISTORY = 20  # versions read for a fund's grade history (each is one artifact download, cached)


@st.cache_resource
def workspace() -> wsm.Workspace:
    return wsm.Workspace(Path(os.environ.get("FUNDGRPO_WORKSPACE", ".")))


@st.cache_data(ttl=30, show_spinner=False)
def versions() -> list[dict]:
    try:
        return workspace().versions()
    except Exception as err:  # noqa: BLE001 - a registry that cannot be read: the pages say so
        st.session_state["registry_error"] = str(err).splitlines()[0][:300]
        return []


@st.cache_data(show_spinner=False, max_entries=MAX_HISTORY + 2)
def version_figures(version: int, run_id: str) -> wsm.Figures:  # run_id: a re-registered store is new
    return workspace().figures(version, versions())


@st.cache_data(ttl=30, show_spinner=False)
def workspace_figures() -> wsm.Figures:
    return workspace().figures(None)


@st.cache_data(ttl=60, show_spinner=False)
def funds() -> pd.DataFrame:
    return workspace().funds()


@st.cache_data(ttl=60, show_spinner=False)
def records() -> dict[str, PromptRecord]:
    return workspace().records()


@st.cache_data(ttl=15, show_spinner=False)
def book_sources() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    ws = workspace()
    return book.sources(ws.store_url(), ws.root / ws.params.evaluate.out_dir)


def book_table() -> pd.DataFrame:
    """The book, with the shown version's backtest of its test funds among the evaluations (dated when the
    version was made): the Funds page and the book never disagree on whether a fund has a grade."""
    entry = next((v for v in versions() if v["version"] == FIG.version), None)
    if entry is not None:
        when, name = entry["created"].isoformat(), f"v{FIG.version}"
    else:  # this workspace's run: when its backtest was written
        made = WS.root / WS.params.backtest.metrics
        stamp = made.stat().st_mtime if made.exists() else 0
        when, name = pd.Timestamp(stamp, unit="s", tz="UTC").isoformat(), "workspace"
    tested = book.backtest_evaluations(FIG.predictions, when, name, WS.params.evaluate)
    stored, batch, decisions = book_sources()
    return book.assemble(funds(), stored, batch, decisions, tested)


def chosen() -> tuple[wsm.Figures, bool]:
    """The figures every page shows (the sidebar's version), and whether they come from the registry."""
    found = versions()
    if not found:
        return workspace_figures(), False
    numbers = [v["version"] for v in found]
    champion = next((v["version"] for v in found if "champion" in v["aliases"]), numbers[0])
    asked = st.query_params.get("version")
    default = int(asked) if asked and asked.isdigit() and int(asked) in numbers else champion
    labels = {
        v["version"]: f"v{v['version']}" + (f" ({', '.join(v['aliases'])})" if v["aliases"] else "") for v in found
    }
    picked = st.sidebar.selectbox(T["version"], numbers, index=numbers.index(default), format_func=labels.get)
    if picked != champion:
        st.query_params["version"] = str(picked)
    elif "version" in st.query_params:
        del st.query_params["version"]
    entry = next(v for v in found if v["version"] == picked)
    return version_figures(picked, entry["run_id"]), True


def champion_number() -> int | None:
    return next((v["version"] for v in versions() if "champion" in v["aliases"]), None)


# -- pages


def funds_page() -> None:
    st.title(T["funds"])
    if not FIG.predictions:
        st.info(T["no_run"])
        return
    decided = set(book_table().query("state == 'decided'")["share_class_id"].astype(str))
    table = wsm.fund_table(FIG.predictions, funds(), WS.params.evaluate, decided)
    table = table.assign(category=table["category"].map(lambda c: category_words(c, WS.language())))
    left, mid, right = st.columns(3)
    search = left.text_input(T["search"], key="search")
    categories = mid.multiselect(
        T["categories"], sorted(table["category"].dropna().unique()), key="categories", placeholder=T["choose"]
    )
    disagree = right.checkbox(T["only_disagree"], key="disagree")
    review_only = right.checkbox(f"{T['only_review']} (< {WS.params.evaluate.review_below:g})", key="review_only")
    order = st.segmented_control(
        T["sort"], wsm.SORTS, default="tested", format_func=lambda k: T[f"sort_{k}"], key="order"
    )
    shown = wsm.sort_funds(wsm.filter_funds(table, search, categories, disagree, review_only), order or "tested")
    st.write(T["shown_n"].format(shown=len(shown), total=len(table)))
    arrows = {1: f"▲ {T['above']}", -1: f"▼ {T['below']}", 0: f"= {T['same']}"}
    view = shown.assign(direction=shown["direction"].map(arrows).fillna(T["invalid"]))
    event = st.dataframe(
        view,
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key="fund_table",
        column_config={
            "share_class_id": st.column_config.TextColumn(T["share_class"]),
            "name": st.column_config.TextColumn(T["name"], width="large"),
            "category": T["category"],
            "expert": st.column_config.NumberColumn(T["expert"], format="%d"),
            "model": st.column_config.NumberColumn(T["model"], format="%d"),
            "direction": T["direction"],
            "confidence": st.column_config.ProgressColumn(T["confidence"], min_value=0.0, max_value=1.0, format="%.2f"),
            "rule": st.column_config.NumberColumn(T["rule"], format="%d"),
            "gbm": st.column_config.NumberColumn(T["gbm"], format="%d"),
            "needs_analyst": st.column_config.CheckboxColumn(T["needs_analyst"]),
        },
    )
    st.caption(T["open_fund"])
    rows = event.selection.rows if event is not None else []
    if rows:
        st.query_params["id"] = view.iloc[rows[0]]["share_class_id"]
        st.switch_page(PAGES["fund"], query_params=dict(st.query_params))


def book_page() -> None:
    st.title(T["book"])
    table = book_table()
    words = table["category"].map(lambda c: category_words(c, WS.language()))  # searched by either name
    table = table.assign(category_data=table["category"], category=words)
    left, mid, right = st.columns(3)
    search = left.text_input(T["search"], key="book_search")
    categories = mid.multiselect(
        T["categories"], sorted(table["category"].dropna().unique()), key="book_categories", placeholder=T["choose"]
    )
    states = right.multiselect(
        T["states"], list(book.STATES), format_func=lambda k: T[f"state_{k}"], key="states", placeholder=T["choose"]
    )
    shown = book.search(table, search, categories, states)
    st.write(T["book_n"].format(shown=len(shown), total=len(table)))
    view = tables.book_view(shown, {k: T[f"state_{k}"] for k in book.STATES})
    event = st.dataframe(
        view,
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key="book_table",
        # every column fits a 1,900-pixel screen: times to the minute, versions as vN, the long review last
        column_order=[
            "name",
            "category",
            "share_class_id",
            "grade",
            "confidence",
            "state",
            "decided_grade",
            "decided_by",
            "evaluated_at",
            "source",
            "model_version",
            "in_universe",
            "review",
        ],  # fmt: skip
        column_config={
            "share_class_id": st.column_config.TextColumn(T["share_class"], width="small"),
            "name": st.column_config.TextColumn(T["name"], width="medium"),
            "category": st.column_config.TextColumn(T["category"], width="small"),
            "grade": st.column_config.TextColumn(T["model"], width="small"),
            "confidence": st.column_config.ProgressColumn(
                T["confidence"], min_value=0.0, max_value=1.0, format="%.2f", width="small"
            ),
            "state": st.column_config.TextColumn(T["states"], width="small"),
            "decided_grade": st.column_config.TextColumn(T["decided"], width="small"),
            "decided_by": st.column_config.TextColumn(T["decided_by"], width="small"),
            "evaluated_at": st.column_config.TextColumn(T["evaluated_at"], width="small"),
            "source": st.column_config.TextColumn(T["source"], width="small"),
            "model_version": st.column_config.TextColumn(T["version"], width="small"),
            "in_universe": st.column_config.CheckboxColumn(T["in_universe"], width="small"),
            "review": st.column_config.TextColumn(T["why"], width="medium"),
        },
    )
    st.caption(T["open_fund"])
    rows = event.selection.rows if event is not None else []
    if rows:
        st.query_params["id"] = view.iloc[rows[0]]["share_class_id"]
        st.switch_page(PAGES["fund"], query_params=dict(st.query_params))


def fund_page() -> None:
    st.title(T["fund"])
    table = book_table()
    tested = [str(r.share_class_id) for r in FIG.predictions]
    ids = tested + sorted(set(table["share_class_id"]) - set(tested))  # the tested first, as before
    if not ids:
        st.info(T["no_run"])
        return
    names = dict(zip(table["share_class_id"], table["name"].fillna("")))
    asked = st.query_params.get("id")
    if asked is not None and asked not in ids:  # a careless or stale link: say so, never show another fund
        st.error(T["unknown_fund"].format(id=asked[:100].replace("`", "'")))  # shown as code, never as markup
        st.page_link(PAGES["book"], label=T["book"])
        return
    sid = st.selectbox(
        T["pick_fund"],
        ids,
        index=ids.index(asked) if asked in ids else 0,
        format_func=lambda i: f"{names.get(i)} · {i}",
    )
    st.query_params["id"] = sid
    row = next((r for r in FIG.predictions if str(r.share_class_id) == sid), None)
    found = table[table["share_class_id"] == sid]
    entry = found.iloc[0].to_dict() if len(found) else {}
    record = records().get(sid)
    st.header(names.get(sid) or sid)
    category = category_words((row or record).category if row or record else entry.get("category"), WS.language())
    label = (row or record).label_source if row or record else None
    split = T.get(f"split_{record.split}") if record else None
    said = [sid, category, split, f"{T['label_now']}: {T.get(label, label)}" if label else None]
    st.caption(" · ".join(str(x) for x in said if x and not (isinstance(x, float) and pd.isna(x))))
    if entry.get("state") == "decided":  # the analyst's word first, on every page that shows the fund
        st.success(T["decided_line"].format(grade=entry.get("decided_grade"), by=entry.get("decided_by")))

    left, right = st.columns(2)
    with left:
        if row is not None:
            tested_grades(row, entry)
        else:
            latest_evaluation(entry)
    with right:
        peers = verdict_and_peers(sid, record, category)
    if not peers.empty:  # full width: its four columns are never cut off
        named = {k: T[k] for k in ("metric", "value", "peer_median", "percentile")}
        st.dataframe(peers.round(2).rename(columns=named), hide_index=True, width="stretch")
    m = WS.methodology()
    if m is not None and m.qualitative:  # the pillars beside the documents they cite, full width
        citing.section(citing.pillars_of(row, entry, record, m), record, WS.documents(), m)

    st.subheader(T["history"])
    registered = versions()[:MAX_HISTORY]
    figures = [version_figures(v["version"], v["run_id"]) for v in reversed(registered)] or [FIG]
    history = wsm.version_history(sid, figures)
    st.markdown(f"**{T['history_versions']}**")
    if len(history) > 1:
        st.altair_chart(charts.history(history, T), width="stretch")
    if history.empty:  # said in words: an empty table reads "empty" in English whatever the language
        st.write(T["not_tested"])
    else:
        show_table(tables.worded(history, T))
    evaluations, decisions = WS.store_history(sid)
    if evaluations or decisions:
        st.markdown(f"**{T['history_store']}**")
        if evaluations:
            show_table(tables.worded(pd.DataFrame(evaluations), T))
        if decisions:
            show_table(tables.worded(pd.DataFrame(decisions), T))


def show_table(frame: pd.DataFrame) -> None:
    """A table for reading, as wide as the page: missing values as a dash."""
    st.dataframe(tables.dashes_for_missing(frame), hide_index=True, width="stretch")


def tested_grades(row: FundRow, entry: dict) -> None:
    """A tested share class: every evaluator's grade, the served probabilities, the reasoning (with whose
    grade is served where the text was written for another) and flags; `entry`, its row of the book, says
    whether an analyst has decided it since."""
    st.subheader(T["grades"])
    show_table(tables.grades_table(row, T, NAMES))
    served, rule = row.served, FIG.rule or DecisionRule()
    if served.probs:
        st.markdown(f"**{T['probabilities']}**")
        st.altair_chart(charts.probabilities(served.probs, T), width="stretch")
        m = WS.methodology()
        grades_of = m.grades if m else [1, 2, 3, 4, 5]
        note = grade_note(served.grade, served.probs, grades_of, served.expected_grade, rule, WS.language())
        if note:  # the grade its own chart does not put first: said in words, beside the chart
            st.info(f"**{T['why_grade']}:** {note}")
    st.subheader(T["reasoning"])
    try:
        answer = json.loads(served.text or "{}")
    except json.JSONDecodeError:
        answer = {}
    answer = answer if isinstance(answer, dict) else {}
    whose = written_note(served.grade, answer.get("grade"), rule, WS.language())
    if whose:  # the text argues for another grade than the one served: said before it is read
        st.warning(f"**{T['whose_grade']}:** {whose}")
    st.write(answer.get("reasoning") or "—")
    decided = entry.get("state") == "decided"
    flags = [T["needs_analyst"]] if wsm.needs_review(row, WS.params.evaluate) and not decided else []
    if served.reason:
        flags.append(str(served.reason))
    if served.unsupported:  # the claims check's finding, in the methodology's words
        m = WS.methodology()
        named = {c.id: m.label(c) for c in m.named} if m else {}
        said = [T["misstated_verdict"] if cid == "verdict" else named.get(cid, cid) for cid in served.unsupported]
        flags.append(f"{T['misstated']}: {', '.join(said)}")
    if flags:
        st.warning(" · ".join(flags))


def latest_evaluation(entry: dict) -> None:
    """A share class outside this version's test funds: its latest evaluation (from the API's store or a
    batch file: grade, note, probabilities, reasoning) and decision, from the book."""
    st.info(T["not_tested_here"])
    st.subheader(T["latest"])
    if entry.get("state") in (None, "not evaluated"):
        st.write(T["no_evaluation"])
    else:
        st.dataframe(tables.latest_table(entry, T), hide_index=True, width="stretch")
        probs = entry.get("probabilities")
        if isinstance(probs, dict) and probs:
            st.markdown(f"**{T['probabilities']}**")
            st.altair_chart(charts.probabilities([probs[g] for g in sorted(probs, key=int)], T), width="stretch")
        if isinstance(entry.get("grade_note"), str) and entry["grade_note"]:
            st.warning(f"**{T['why_grade']}:** {entry['grade_note']}")
        st.markdown(f"**{T['reasoning']}**")
        st.write(entry["reasoning"] if isinstance(entry.get("reasoning"), str) and entry["reasoning"] else "—")


def verdict_and_peers(sid: str, record: PromptRecord | None, category) -> pd.DataFrame:
    """The methodology's verdict and the fund against its peers: from its prepared record, or for a share class
    with none (no expert grade: new, or not rated) from one built from the universe as `prepare` builds it."""
    st.subheader(T["verdict"])
    methodology = WS.methodology()
    if record is None and methodology is not None:
        record = wsm.built_record(funds(), methodology, sid)
    rule_grade, score = (record.rule_grade, record.rule_score) if record else (None, None)
    band = next((b for b in methodology.bands if b.grade == rule_grade), None) if methodology else None
    label = band.label.get(WS.language(), "") if band else ""
    st.write(f"{T['grade']} **{rule_grade if rule_grade is not None else '—'}** {label} · {T['score']} "
             f"{'—' if score is None else round(score, 1)}")  # fmt: skip
    if record and record.not_rated:  # why there is no grade, in the methodology's words: what data would rate it
        st.warning(record.not_rated)
    if record and methodology:
        verdict = wsm.verdict_table(record, methodology)
        verdict["percentile"] = verdict["percentile"].map(lambda v: "—" if pd.isna(v) else f"{v:.0f}")  # none: a dash
        named = {"criterion": T["criterion"], "weight": T["weight"], "percentile": T["percentile"]}
        st.dataframe(verdict.rename(columns=named), hide_index=True, width="stretch")
    peers = wsm.peer_table(funds(), sid)
    peers["metric"] = peers["metric"].map(lambda m: METRICS[WS.language()].get(m, m))  # words, not column names
    st.subheader(T["vs_peers"].format(peers=record.peers if record else "?", category=category))
    if not peers.empty:
        st.altair_chart(charts.percentiles(peers, T), width="stretch")
    return peers


def backtest_page() -> None:
    st.title(T["backtest"])
    if FIG.backtest is None:
        st.info(T["no_run"] if FIG.version is None else T["no_figures"].format(version=FIG.version))
        return
    keys = ("valid_json", "exact", "within_one", "qwk", "spearman", "score_mae")
    trust = ("ece", "brier", "exact_top70")
    rows = []
    for name, m in FIG.backtest["models"].items():
        rows.append({T["evaluator"]: NAMES.get(name, name), **{k: m.get(k) for k in keys}}
                    | {k: (m.get("trust") or {}).get(k) for k in trust})  # fmt: skip
    st.write(T["n_tested"].format(n=FIG.backtest["n_funds"]))
    show_table(pd.DataFrame(rows))
    st.caption(T["legend"])
    served_section(FIG.rule, FIG.backtest["models"].get("grpo", {}).get("served"))
    story = FIG.backtest["models"].get("grpo", {}).get("story")
    if story:  # text against grade: how many texts argue for another grade, and whether each says so
        st.write(T["story_line"].format(**story))
    apart = FIG.backtest.get("not_rated") or {}
    if apart.get("n"):
        st.write(T["not_rated_line"].format(n=apart["n"]))
    st.subheader(T["confusion"])
    names = [n for n in ("grpo", "gbm", "rule", "sft") if n in FIG.backtest["models"]]
    for col, name in zip(st.columns(len(names)), names):
        frame = wsm.confusion(FIG.predictions, name, WS.methodology().grades)
        if not frame.empty:
            col.altair_chart(charts.confusion_heatmap(frame, NAMES.get(name, name)))
    st.subheader(T["distribution"])
    st.altair_chart(charts.grade_distribution(wsm.distribution(FIG.predictions), T), width="stretch")
    left, right = st.columns(2)
    with left:
        st.subheader(T["reliability"])
        frame = wsm.reliability(FIG.predictions)
        if not frame.empty:
            st.altair_chart(charts.reliability(frame, T), width="stretch")
    with right:
        st.subheader(T["rewards"])
        if FIG.curves:
            st.altair_chart(charts.curves(FIG.curves), width="stretch")
        else:
            st.write(T["none"])


def served_section(rule: DecisionRule | None, served: dict | None) -> None:
    """What the served grade is and, from the backtest, how often it is gradient boosting's (`tables.served_lines`)."""
    lines = tables.served_lines(rule, served, T)
    if lines:
        st.subheader(T["served_title"])
        for line in lines:
            st.write(line)


def models_page() -> None:
    st.title(T["models"])
    found = versions()
    if not found:
        st.info(st.session_state.get("registry_error") or T["none"])
        return
    table = pd.DataFrame(
        [
            {
                T["version"]: v["version"],
                T["aliases"]: ", ".join(v["aliases"]),
                T["registered"]: v["created"].strftime("%Y-%m-%d %H:%M"),
                T["gate"]: v["passed"],
                "qwk": v["metrics"].get("grpo.qwk"),
                "exact": v["metrics"].get("grpo.exact"),
                T["same_as_gbm"]: v["metrics"].get("grpo.served.equal_to_gbm_rule"),
                T["reason"]: v["reason"],
            }
            for v in found
        ]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    st.subheader(T["per_version"])
    wanted = ("grpo.qwk", "grpo.exact", "grpo.within_one", "gbm.qwk", "rule.qwk")
    long = pd.DataFrame(
        [
            {"version": v["version"], "metric": k, "value": v["metrics"][k]}
            for v in found
            for k in wanted
            if k in v["metrics"]
        ]
    )
    if not long.empty:
        st.altair_chart(charts.per_version(long), width="stretch")


def drift_page() -> None:
    st.title(T["drift"])
    summaries = WS.drift()
    if not summaries:
        st.info(T["no_drift"].format(incoming=WS.params.monitor.incoming_dir))
        return
    st.subheader(T["over_time"])
    series = wsm.drift_series(summaries)
    thresholds = {"feature_drift": WS.params.monitor.drift_share, "migration": WS.params.monitor.migration_threshold}
    if not series.empty:
        st.altair_chart(charts.drift_over_time(series, thresholds, T), width="stretch")
    table = pd.DataFrame(
        [
            {
                T["date"]: s.get("date"),
                T["batch"]: s.get("batch"),
                T["drift_verdict"]: s.get("verdict"),
                T["reason"]: s.get("reason"),
                T["retrain"]: (s.get("retrain") or {}).get("status"),
            }
            for s in reversed(summaries)
        ]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    batch = st.selectbox(T["batch"], [s["batch"] for s in reversed(summaries)])
    summary = next(s for s in summaries if s["batch"] == batch)
    moved = wsm.transitions(summary)
    if not moved.empty:
        st.markdown(f"**{T['transitions'].format(batch=batch)}**")
        st.altair_chart(
            charts.confusion_heatmap(moved.rename(columns={"before": "expert", "after": "predicted"}), batch)
        )
    report = WS.root / summary["folder"] / "drift.html"
    if report.exists():
        with st.expander(T["evidently"]):
            components.html(report.read_text(encoding="utf-8"), height=700, scrolling=True)


def review_page() -> None:
    st.title(T["review"])
    st.caption(f"{T['api_url']}: {API_URL}. {T['queue_help']}")
    key = st.text_input(T["api_key"], type="password", key="api_key")
    if "recorded" in st.session_state:
        st.success(st.session_state.pop("recorded"))
    if not key:
        return
    try:
        status, body = api("/v1/review-queue?limit=200", key)
    except (urllib.error.URLError, OSError) as err:
        st.error(T["unreachable"].format(url=API_URL, error=getattr(err, "reason", err)))
        return
    if status != 200:
        st.error(T["refused"].format(status=status, detail=tables.refusal_words(body.get("detail"))))
        return
    items = body.get("items", [])
    st.write(T["queue_n"].format(n=body.get("total", len(items))))
    if not items:
        return
    names = dict(zip(funds()["share_class_id"], funds()["name"])) if "name" in funds() else {}
    queue = tables.queue_table(items, names, T, [wsm.label_text(e.get("expert"), T) for e in items])
    show_table(queue)
    st.subheader(T["decide"])
    by_id = {e["share_class_id"]: e for e in items}
    grades = body.get("grades") or [1, 2, 3, 4, 5]  # the methodology's, as the API checks them
    sid = st.selectbox(T["share_class"], list(by_id), format_func=lambda i: f"{i} · {names.get(i, '')}")
    # a form per share class: nothing typed for one fund is carried to the next; the grade starts
    # from the model's (or, for an invalid answer, the methodology's), as the API's /review page does
    start = wsm.starting_grade(by_id[sid], grades)
    with st.form(f"decision-{sid}"):  # kept on a refusal (fix and resend); the next fund gets a fresh one
        grade = st.selectbox(T["new_grade"], grades, index=grades.index(start), key=f"grade-{sid}")
        reason = st.text_area(T["decision_reason"], max_chars=2000, key=f"reason-{sid}")
        sent = st.form_submit_button(T["submit"])
    if sent:
        item = by_id[sid]
        request = {
            "share_class_id": sid,
            "grade": int(grade),
            "reason": reason,
            "evaluation_id": item.get("evaluation_id"),
            "model_version": item.get("model_version"),
            "based_on": item.get("decision_id"),
        }
        status, answer = api("/v1/decisions", key, request)
        if status == 201:  # said above the queue, which is read again without it
            st.session_state["recorded"] = T["recorded"].format(id=answer.get("id"), sid=sid, grade=grade)
            st.rerun()
        else:  # in words, naming the field: never the API's raw list of errors
            st.error(T["refused"].format(status=status, detail=tables.refusal_words(answer.get("detail"))[:500]))


# -- the app: read once per rerun, then the chosen page. Streamlit runs this file as __main__;
# importing it (the doctest collector does) runs nothing.

if __name__ == "__main__":
    WS = workspace()
    T = LABELS[WS.language()]
    st.set_page_config(page_title=T["title"], layout="wide")
    PAGES = {
        "funds": st.Page(funds_page, title=T["funds"], default=True),  # at /: the default page has no path
        "book": st.Page(book_page, title=T["book"], url_path="book"),
        "fund": st.Page(fund_page, title=T["fund"], url_path="fund"),
        "backtest": st.Page(backtest_page, title=T["backtest"], url_path="backtest"),
        "models": st.Page(models_page, title=T["models"], url_path="models"),
        "drift": st.Page(drift_page, title=T["drift"], url_path="drift"),
        "review": st.Page(review_page, title=T["review"], url_path="review"),
    }
    NAV = st.navigation(list(PAGES.values()))
    FIG, REGISTERED = chosen()
    # the served evaluator named for what it serves: often mostly (or only) gradient boosting's grade
    NAMES = {**EVALUATORS[WS.language()], "grpo": served_name(FIG.rule, WS.language())}
    last = WS.last_run()
    if last is None and not REGISTERED:
        st.caption(T["no_run"])
    else:
        model = (last or {}).get("model_name", WS.params.register.model_name)
        line = wsm.shown_line(T, FIG, champion_number(), REGISTERED, model)
        if FIG.rule:  # the first line says plainly whose grades these are
            line += " " + T["serves_now"].format(what=served_words(FIG.rule, WS.language()))
        st.caption(line)
    NAV.run()
