"""The analysts' review page, served by the API itself (`GET /review`).

Why here and not in the dashboard: a decision is a write, and writes go through the API with the
analyst's own key. The page keeps the key in the page's memory only (never a cookie, never
localStorage) and sends it as `X-API-Key` to the same origin; a browser cannot send that header
from another site without a CORS preflight the API never grants, so there is nothing to forge
(no cookie, no CSRF). Data is put on the page with `textContent`, never as HTML.
"""

from __future__ import annotations

import json

LABELS = {
    "en": {
        "title": "Review queue",
        "key": "API key",
        "load": "Load the queue",
        "fund": "Share class",
        "name": "Name",
        "grade": "Model grade",
        "confidence": "Confidence",
        "why": "Why it needs you",
        "rule": "Methodology",
        "gbm": "Gradient boosting",
        "expert": "Current label",
        "decide": "Decide",
        "new_grade": "Grade",
        "reason": "Reason",
        "none": "Nothing needs an analyst.",
        "rule_text": "Order: invalid answers first, then the least sure, then the largest disagreement.",
    },
    "ko": {
        "title": "검토 대기열",
        "key": "API 키",
        "load": "대기열 불러오기",
        "fund": "클래스",
        "name": "펀드명",
        "grade": "모델 등급",
        "confidence": "확신도",
        "why": "검토 사유",
        "rule": "방법론",
        "gbm": "그래디언트 부스팅",
        "expert": "현재 라벨",
        "decide": "결정",
        "new_grade": "등급",
        "reason": "사유",
        "none": "검토할 펀드가 없습니다.",
        "rule_text": "순서: 무효 답변, 확신도 낮은 순, 불일치가 큰 순.",
    },
}

PAGE = """<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:system-ui,"NanumGothic",sans-serif;margin:1.5rem;color:#222}}
table{{border-collapse:collapse;width:100%;margin-top:1rem}}
th,td{{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top;font-size:.92rem}}
th{{background:#f4f4f4}} .why{{color:#a40000}} .msg{{margin-left:.5rem;font-size:.85rem}}
.ok{{color:#176b00}} .err{{color:#a40000}} input[type=text]{{width:16rem}}
</style></head>
<body>
<h1>{title}</h1>
<p>{rule_text}</p>
<form id="login"><label>{key} <input id="key" type="password" autocomplete="off" required></label>
<button type="submit">{load}</button> <span id="status" class="msg"></span></form>
<table id="queue" hidden><thead><tr><th>{fund}</th><th>{name}</th><th>{grade}</th><th>{confidence}</th>
<th>{rule}</th><th>{gbm}</th><th>{expert}</th><th>{why}</th><th>{decide}</th></tr></thead><tbody></tbody></table>
<p id="empty" hidden>{none}</p>
<script id="labels" type="application/json">{labels_json}</script>
<script src="/review.js"></script>
</body></html>
"""

SCRIPT = """
"use strict";
const L = JSON.parse(document.getElementById("labels").textContent);
let apiKey = null;  // in this page's memory only
const $ = (id) => document.getElementById(id);

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  return td;
}

async function call(method, path, body) {
  const r = await fetch(path, {
    method, headers: {"X-API-Key": apiKey, "Content-Type": "application/json"},
    body: body ? JSON.stringify(body) : undefined,
  });
  let data = null;
  try { data = await r.json(); } catch (e) { data = {detail: r.statusText}; }
  if (!r.ok) {
    const d = data && data.detail;
    throw new Error(r.status + ": " + (typeof d === "string" ? d : JSON.stringify(d)));
  }
  return data;
}

function row(item, grades) {
  const tr = document.createElement("tr");
  tr.dataset.shareClass = item.share_class_id;
  const ev = item.evidence || {};
  const expert = item.expert ? item.expert.grade + " (" + item.expert.source + ")" : null;
  const conf = item.confidence === null || item.confidence === undefined ? null : item.confidence.toFixed(2);
  [item.share_class_id, item.name, item.grade, conf, item.rule_grade, ev.gbm_grade, expert].forEach(
    (v) => tr.appendChild(cell(v)));
  const why = cell((item.why || []).join("; "));
  why.className = "why";
  tr.appendChild(why);
  const td = document.createElement("td");
  const form = document.createElement("form");
  const select = document.createElement("select");
  select.name = "grade";
  grades.forEach((g) => {
    const o = document.createElement("option");
    o.value = g; o.textContent = g;
    select.appendChild(o);
  });
  // start from the model's grade, else the current label, else the methodology's
  const start = [item.grade, item.expert && item.expert.grade, item.rule_grade]
    .find((g) => g !== null && g !== undefined);
  if (start !== undefined) select.value = String(start);
  const reason = document.createElement("input");
  reason.type = "text"; reason.name = "reason"; reason.placeholder = L.reason; reason.maxLength = 2000;
  const button = document.createElement("button");
  button.type = "submit"; button.textContent = L.decide;
  const msg = document.createElement("span");
  msg.className = "msg";
  form.append(select, " ", reason, " ", button, msg);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.textContent = ""; msg.className = "msg";
    try {
      const d = await call("POST", "/v1/decisions", {
        share_class_id: item.share_class_id, grade: Number(select.value), reason: reason.value,
        evaluation_id: item.evaluation_id, based_on: item.decision_id || null,
      });
      const was = d.old_grade === null ? "–" : d.old_grade;  // an invalid answer had no grade
      msg.textContent = " #" + d.id + " " + was + " -> " + d.new_grade;
      msg.className = "msg ok";
      button.disabled = true;
    } catch (err) {
      msg.textContent = " " + err.message;
      msg.className = "msg err";
    }
  });
  td.appendChild(form);
  tr.appendChild(td);
  return tr;
}

$("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  apiKey = $("key").value;
  $("status").textContent = ""; $("status").className = "msg";
  try {
    const q = await call("GET", "/v1/review-queue?limit=200");
    const grades = q.grades;
    const body = $("queue").querySelector("tbody");
    body.replaceChildren(...q.items.map((it) => row(it, grades)));
    $("queue").hidden = q.items.length === 0;
    $("empty").hidden = q.items.length !== 0;
    $("status").textContent = q.items.length + " / " + q.total;
  } catch (err) {
    $("status").textContent = err.message;
    $("status").className = "msg err";
  }
});
"""


def page(language: str) -> str:
    labels = LABELS.get(language, LABELS["en"])
    # the labels travel as JSON in a non-executed script element: "</" escaped so no label ends it
    labels_json = json.dumps(labels, ensure_ascii=False).replace("</", "<\\/")
    return PAGE.format(lang=language, labels_json=labels_json, **labels)
