"""The review loop on the embedded default, in a copy of this workspace: evaluations, the review
queue, an analyst's decision, the label at the next `dvc repro`, the next evaluation.

    make run && python tools/review_demo.py      # writes benchmarks/review_loop.md

Needs a trained workspace (`make run`: data, models/policy, its calibration). The copy keeps this
workspace's store, keys and labels untouched. Each step is what a user does (docs/operations.md,
section 10): the API evaluates the test funds; `GET /v1/review-queue` lists those that need an
analyst; an analyst's `review` key decides the first one (the methodology's grade, where the model
departs from it; otherwise the grade above); `dvc repro prepare` takes the decision as a label;
the fund's next evaluation shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from fundgrpo.data.canonical import COLUMNS
from fundgrpo.io import copy_project
from fundgrpo.serving.api.app import create_app
from fundgrpo.serving.api.keys import add_key
from fundgrpo.serving.api.settings import ApiSettings

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "benchmarks" / "review_loop.md"
# What `copy_project` leaves out (a workspace's outputs and state) and the demo reads: the trained
# workspace. The code, params and every file a stage depends on come with `copy_project`.
STATE = ("data", "models", "mlflow.db")


def workspace_copy(dest: Path) -> Path:
    copy_project(REPO, dest)
    for name in STATE:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dest / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        elif (REPO / name).exists():
            shutil.copy2(REPO / name, dest / name)
    (dest / "data/decisions").mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--funds", type=int, default=40, help="test funds to evaluate")
    args = ap.parse_args()
    if not (REPO / "models/policy").exists():
        print("no trained policy here: run `make run` first", file=sys.stderr)
        return 1

    from fastapi.testclient import TestClient

    steps: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="review-demo-") as tmp:
        root = workspace_copy(Path(tmp) / "ws")
        keys = root / "keys.json"
        made = {
            n: add_key(keys, n, s) for n, s in (("desk", ["evaluate", "read"]), ("demo-analyst", ["read", "review"]))
        }
        settings = ApiSettings(
            keys_file=keys, db_url=f"sqlite:///{root}/evaluations.db", model=str(root / "models/policy")
        )
        test = [json.loads(line) for line in (root / "data/prepared/test.jsonl").read_text().splitlines()]
        reference = pd.read_parquet(root / "data/validated/funds.parquet").set_index("share_class_id", drop=False)
        funds = []
        for r in test[: args.funds]:
            row = reference.loc[r["share_class_id"]]
            funds.append(
                {
                    c.name: (row[c.name] if c.kind in ("id", "text") else float(row[c.name]))
                    for c in COLUMNS
                    if c.name in row.index and c.name != "expert_grade" and not pd.isna(row[c.name])
                }
            )
        desk, analyst = ({"X-API-Key": made[k]} for k in ("desk", "demo-analyst"))
        with TestClient(create_app(root, settings)) as client:
            started = time.perf_counter()
            for i in range(0, len(funds), 8):
                done = client.post("/v1/evaluations", json={"funds": funds[i : i + 8]}, headers=desk)
                done.raise_for_status()
            steps["evaluate"] = time.perf_counter() - started
            queue = client.get("/v1/review-queue", params={"limit": 1000}, headers=desk).json()
            top = queue["items"][0]
            rule = top.get("rule_grade")
            grade = rule if rule is not None and rule != top.get("grade") else min((top.get("grade") or 3) + 1, 5)
            reason = "Demo: on a second reading the methodology's grade stands." if grade == rule else "Demo: one up."
            decision = client.post(
                "/v1/decisions",
                json={"share_class_id": top["share_class_id"], "grade": grade, "reason": reason,
                      "evaluation_id": top["evaluation_id"], "based_on": top.get("decision_id")},
                headers=analyst,
            )  # fmt: skip
            decision.raise_for_status()
            decision = decision.json()
        started = time.perf_counter()
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        env.pop("FUNDGRPO_DB_URL", None)
        repro = subprocess.run(
            [sys.executable, "-m", "dvc", "repro", "prepare"], cwd=root, env=env, capture_output=True, text=True
        )
        if repro.returncode != 0:
            print(repro.stdout[-3000:], repro.stderr[-3000:], file=sys.stderr)
            return 1
        steps["dvc repro prepare"] = time.perf_counter() - started
        ran = [line.split("'")[1] for line in repro.stdout.splitlines() if line.startswith("Running stage '")]
        records = [json.loads(line) for split in ("train", "validation", "test")
                   for line in (root / f"data/prepared/{split}.jsonl").read_text().splitlines()]  # fmt: skip
        label = next(r for r in records if r["share_class_id"] == top["share_class_id"])
        with TestClient(create_app(root, settings)) as client:
            again = client.post(
                "/v1/evaluations",
                json={"funds": [f for f in funds if f["share_class_id"] == top["share_class_id"]]},
                headers=desk,
            ).json()["evaluations"][0]

    items = queue["items"]
    lines = [
        "# The review loop on the embedded default",
        "",
        "Generated by `python tools/review_demo.py` in a copy of a `make run` workspace (docs/operations.md,",
        "section 10). Rule: " + json.dumps(queue["rule"]) + "; " + queue["order"] + ".",
        "",
        f"1. The API evaluated {len(funds)} test funds in {steps['evaluate']:.0f} s; "
        f"**{queue['total']}** need an analyst.",
        "",
        "| # | share class | model grade | confidence | methodology | gradient boosting | label | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, e in enumerate(items[:10], 1):
        conf = "–" if e.get("confidence") is None else f"{e['confidence']:.2f}"
        gbm = (e.get("evidence") or {}).get("gbm_grade")
        label_of = e.get("expert") or {}
        lines.append(
            f"| {i} | {e['share_class_id']} | {e.get('grade')} | {conf} | {e.get('rule_grade')} | {gbm} "
            f"| {label_of.get('grade')} ({label_of.get('source')}) | {'; '.join(e['why'])} |"
        )
    lines += [
        "",
        f"2. `demo-analyst` (a `review` key) decided {top['share_class_id']}: grade {decision['old_grade']} → "
        f'**{decision["new_grade"]}**, "{decision["reason"]}" (decision {decision["id"]}, answering evaluation '
        f"{decision['evaluation_id']} of `{decision['model_version']}`).",
        f"3. `dvc repro prepare` ran {', '.join(ran)} in {steps['dvc repro prepare']:.0f} s; "
        f"the share class's record now has expert grade {label['expert_grade']}, "
        f"`label_source: {label['label_source']}`.",
        f"4. Its next evaluation: grade {again['grade']}, and `expert` {json.dumps(again['expert'])}.",
        "",
    ]
    PAGE.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
