"""The attack table's cases on the session's trained tiny repo: every attempt refused as expected, nothing
leaked, and every attempt in the audit log."""

from __future__ import annotations

from benchmarks.serving import security


def test_every_attack_is_refused_nothing_leaks_and_every_attempt_is_audited(trained):
    rows = security.attacks(trained[0])
    assert len(rows) > 25
    wrong = [r for r in rows if not r["refused"] or r["leaked"] or not r["audited"]]
    assert wrong == [], wrong
    assert "| category |" in security.page(rows)
