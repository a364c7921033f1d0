"""Does a trained model read the documents for its pillar judgements, or answer each pillar's most common
value? For every validation fund and qualitative criterion, the model's probabilities of "not assessed",
-1, 0 and 1 at the judgement, with the answer before it as the analysts would have written it (teacher
forcing, `belief.candidate_logprobs_many`: exact, one forward pass a batch). The test split is not read.

    python research/experiments/pillar_reading/pillar_reading.py RUN [MODEL ...]   # default: models/sft models/policy

RUN: a kept run's repository (`benchmarks/time/pipeline.py --keep`), `prepare` done and the models trained.
One JSON row per (model, criterion) on stdout; CPU minutes (SmolLM2: about 1 s a fund and criterion).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

VALUES = ["not assessed", -1, 0, 1]


def questions(row: dict, criteria: list[str]) -> list[tuple[str, list[str]]]:
    """(answer so far, candidates) at each criterion's judgement in the analysts' own answer.

    >>> row = {"pillars": '{"people": {"judgement": -1, "evidence": []}, "parent": {"judgement": 0, "evidence": []}}'}
    >>> [q[0] for q in questions(row, ["people", "parent"])]
    ['{"pillars": {"people": {"judgement":', '{"pillars": {"people": {"judgement": -1, "evidence": []}, "parent": {"judgement":']
    """
    text = json.dumps({"pillars": json.loads(row["pillars"])})
    out = []
    for c in criteria:
        at = text.index('"judgement": ', text.index(f'"{c}": ')) + len('"judgement":')
        # the space goes with the value, as a tokenizer that starts words with their space reads it
        out.append((text[:at], [f" {json.dumps(v)}," for v in VALUES]))
    return out


def splits_at_judgement(tokenizer, prefix: str, candidates: list[str]) -> bool:
    """Whether every candidate's tokens begin with the prefix's own: else the candidates are scored from
    different points and their probabilities do not compare (a tokenizer that merges across words)."""
    head = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    return all(tokenizer(prefix + c, add_special_tokens=False)["input_ids"][: len(head)] == head for c in candidates)


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a judged fund's score > a not-judged fund's), ties half; None without both kinds.

    >>> auc([0.9, 0.8], [0.1, 0.8])
    0.875
    """
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score([1] * len(pos) + [0] * len(neg), pos + neg)) if pos and neg else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("models", nargs="*", default=["models/sft", "models/policy"])
    args = ap.parse_args()
    os.chdir(args.run)

    from fundgrpo import io
    from fundgrpo.model import belief, modelling

    rows = [r for r in io.read_jsonl(Path("data/prepared/validation.jsonl")) if r["pillars"]]
    criteria = list(json.loads(rows[0]["pillars"]))
    for path in args.models:
        model, tokenizer = modelling.load(path)
        model.eval()
        asked, who = [], []
        for i, r in enumerate(rows):
            prompt = tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
            for c, (prefix, cands) in zip(criteria, questions(r, criteria)):
                asked.append((prompt + prefix, cands))
                who.append((i, c))
        if not splits_at_judgement(tokenizer, *asked[0]):
            # the answer cut at the judgement is tokenized unlike the whole answer the model writes
            print(json.dumps({"model": path, "skipped": "its tokenizer merges across the judgement's start"}))
            continue
        logps = belief.candidate_logprobs_many(model, tokenizer, asked, batch_size=8)
        for c in criteria:
            judged, unjudged, agree, way, said = [], [], [], [], []
            for (i, crit), lp in zip(who, logps):
                if crit != c:
                    continue
                p = np.exp(lp - lp.max())
                p /= p.sum()
                truth = json.loads(rows[i]["pillars"])[c]["judgement"]
                (unjudged if truth == "not assessed" else judged).append(1 - p[0])
                said.append(VALUES[int(p.argmax())])
                if truth != "not assessed":
                    agree.append(VALUES[int(p.argmax())] == truth)
                    way.append(VALUES[1 + int(p[1:].argmax())] == truth)  # which way, had it judged
            print(
                json.dumps(
                    {
                        "model": path,
                        "criterion": c,
                        "funds": len(judged) + len(unjudged),
                        "judged_by_analysts": len(judged),
                        "p_judge_where_analysts_judged": round(float(np.mean(judged)), 3) if judged else None,
                        "p_judge_where_not": round(float(np.mean(unjudged)), 3) if unjudged else None,
                        "auc_judge": None if (a := auc(judged, unjudged)) is None else round(a, 3),
                        "argmax_as_analysts": round(float(np.mean(agree)), 3) if agree else None,
                        "direction_as_analysts": round(float(np.mean(way)), 3) if way else None,
                        "analysts_directions": {
                            str(v): sum(json.loads(rows[i]["pillars"])[c]["judgement"] == v for i in range(len(rows)))
                            for v in VALUES[1:]
                        },
                        "argmax_counts": {str(v): said.count(v) for v in VALUES},
                    },
                    ensure_ascii=False,
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
