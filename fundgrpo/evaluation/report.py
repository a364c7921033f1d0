"""The backtest's files beside its metrics: the per-fund predictions, each evaluator's reliability
diagram and confusion matrices (`dvc plots`), and a PNG of the matrices. Apart from the scoring
(`backtesting`), so that changing a figure reruns only the `backtest` stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fundgrpo.evaluation import calibration
from fundgrpo.evaluation.agreement import confusion
from fundgrpo.evaluation.backtesting import confidence_of
from fundgrpo.methodology.answers import Prediction


def plot_confusions(rows: list[dict], predictions: dict[str, list[Prediction]], grades: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(predictions)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4))
    expert = [r["expert_grade"] for r in rows]
    for ax, name in zip(axes, names):
        table = confusion(expert, [p.grade for p in predictions[name]], grades)
        ax.imshow(table.values, cmap="Blues")
        for i in range(table.shape[0]):
            for j in range(table.shape[1]):
                ax.text(j, i, int(table.values[i, j]), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(table.shape[1]), [str(c) for c in table.columns], fontsize=7)
        ax.set_yticks(range(len(grades)), grades)
        ax.set_title(name)
        ax.set_xlabel("predicted")
    axes[0].set_ylabel("expert")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def per_fund(rows: list[dict], predictions: dict[str, list[Prediction]]) -> list[dict]:
    """One row per test fund: the expert's grade, each evaluator's grade, validity and (where it has
    one) confidence, the policy's answer, probabilities, reason when invalid, and misstated criteria, and
    the SFT start's answer (its pillars are compared with the policy's)."""
    extra = ("confidence", "probs", "expected_grade", "written_grade", "reason", "unsupported")
    served = [p.as_dict() for p in predictions["grpo"]]
    return [
        {
            "share_class_id": r["share_class_id"],
            "fund_id": r["fund_id"],
            "category": r["category"],
            "expert_grade": r["expert_grade"],
            "label_source": r.get("label_source", "export"),
            **{f"{name}_grade": preds[i].grade for name, preds in predictions.items()},
            **{f"{name}_valid": preds[i].valid for name, preds in predictions.items()},
            **{
                f"{name}_confidence": preds[i].confidence
                if preds[i].confidence is not None
                else max(preds[i].probs or [0.0])
                for name, preds in predictions.items()
                if preds[i].probs is not None
            },
            **{f"grpo_{k}": served[i][k] for k in extra},
            # what each language model's evaluation claims (the claims check) and the confidence it states
            **{k: v for name in ("grpo", "sft") if name in predictions for k, v in said(name, predictions[name][i])},
            "shown_grade": r.get("shown_grade"),
            "grpo_text": predictions["grpo"][i].text,
            **({"sft_text": predictions["sft"][i].text} if "sft" in predictions else {}),
        }
        for i, r in enumerate(rows)
    ]


def said(name: str, p: Prediction) -> list[tuple[str, Any]]:
    """What one evaluation claims, for the per-fund file: claims made, misstated, complete, and the
    confidence it states (where the answer states one).

    >>> p = Prediction(grade=2, written_grade=2, claims=3, unsupported=("verdict",), complete=True, stated=0.7)
    >>> said("sft", p)
    [('sft_claims', 3), ('sft_misstated', 1), ('sft_complete', True), ('sft_stated', 0.7)]
    >>> said("sft", Prediction(grade=None, written_grade=None))  # not checked, no confidence stated
    []
    """
    out: list[tuple[str, Any]] = [(f"{name}_claims", p.claims)] if p.claims is not None else []
    if p.unsupported is not None:
        out.append((f"{name}_misstated", len(p.unsupported)))
    out += [(f"{name}_{k}", v) for k, v in (("complete", p.complete), ("stated", p.stated)) if v is not None]
    return out


def reliability(rows: list[dict], preds: list[Prediction], grades: list[int], bins: int = 10) -> list[dict]:
    """An evaluator's reliability diagram (`dvc plots`): per confidence bin, mean confidence and accuracy."""
    found = confidence_of(preds, grades)
    if found is None:
        return []
    correct = [p.grade is not None and int(p.grade) == int(r["expert_grade"]) for r, p in zip(rows, preds)]
    return calibration.reliability(found[0], correct, bins)
