"""The backtest's files beside its metrics: the per-fund predictions, each evaluator's reliability
diagram and confusion matrices (`dvc plots`), and a PNG of the matrices. Apart from the scoring
(`backtesting`), so that changing a figure reruns only the `backtest` stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fundgrpo import io
from fundgrpo.evaluation import calibration
from fundgrpo.evaluation.agreement import confusion
from fundgrpo.evaluation.backtesting import LANGUAGE_MODELS, confidence_of
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.records import PromptRecord, expert_grades

# The evaluators with a confusion matrix among DVC's plots (dvc.yaml); the served evaluator's parts
# (grpo_alone, grpo_stack, gbm_rule, sft_served) are in the metrics and the per-fund file.
PLOTTED = ("grpo", "sft", "base", "rule", "gbm")


def write_files(
    rows: list[PromptRecord], predictions: dict[str, list[Prediction]], grades: list[int], plots: Path, reports: Path
) -> None:
    """The backtest's files beside its metrics: each plotted evaluator's confusion (`plots/confusion_<name>.json`),
    the reliability diagrams of the policy's confidence and gradient boosting's, the per-fund file
    (`predictions.jsonl`) and the PNG of the confusion matrices (`confusion.png`), under the stage's folders."""
    for name, preds in predictions.items():
        if name in PLOTTED:
            pairs = [{"expert": e, "predicted": q.grade or "invalid"} for e, q in zip(expert_grades(rows), preds)]
            io.write_json(pairs, plots / f"confusion_{name}.json")
    for name in ("grpo", "gbm"):
        io.write_json(reliability(rows, predictions[name], grades), plots / f"reliability_{name}.json")
    io.write_jsonl([f.as_dict() for f in per_fund(rows, predictions)], reports / "predictions.jsonl")
    plot_confusions(rows, {k: v for k, v in predictions.items() if k in PLOTTED}, grades, reports / "confusion.png")


def plot_confusions(
    rows: list[PromptRecord], predictions: dict[str, list[Prediction]], grades: list[int], path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(predictions)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4))
    expert = expert_grades(rows)
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


@dataclass(frozen=True)
class Graded:
    """One evaluator's grade of one test fund."""

    grade: int | None  # None: an invalid answer (or no grade the methodology can give)
    valid: bool = True
    confidence: float | None = None  # None: the evaluator gives no probabilities


@dataclass(frozen=True)
class Said:
    """What a language model's evaluation claims (the claims check) and the confidence it states; None
    where the check did not run or the answer states no confidence."""

    claims: int | None = None  # checkable claims made
    misstated: int | None = None  # of which misstated
    complete: bool | None = None  # cites the weightiest criteria rightly
    stated: float | None = None  # the confidence the answer states, 0-1

    @classmethod
    def of(cls, p: Prediction) -> Said:
        """What `p` claims.

        >>> Said.of(Prediction(grade=2, written_grade=2, claims=3, unsupported=("verdict",), complete=True))
        Said(claims=3, misstated=1, complete=True, stated=None)
        """
        misstated = None if p.unsupported is None else len(p.unsupported)
        return cls(claims=p.claims, misstated=misstated, complete=p.complete, stated=p.stated)


# The served evaluation's own fields in the per-fund file (`grpo_<field>`), beside its grade, validity and
# confidence (`graded["grpo"]`).
SERVED_FIELDS = ("probs", "expected_grade", "written_grade", "reason", "unsupported", "text")
SAID_FIELDS = tuple(f.name for f in fields(Said))


@dataclass(frozen=True)
class FundRow:
    """One test fund in the backtest's per-fund file (`predictions.jsonl`): the expert's grade, each
    evaluator's (`graded`: "grpo" the served evaluator, "sft", "rule", "gbm", the served evaluator's parts),
    the served evaluation (`served`: its text, the grade it wrote, probabilities, reason when invalid,
    misstated criteria), what each language model's evaluation claims, and the SFT start's text.
    `as_dict` writes it as one flat JSON line (`<evaluator>_grade`, `grpo_probs`, ...), `of` reads it back.

    >>> p = Prediction(grade=3, written_grade=4, valid=True, text="{}", probs=[0.1, 0.2, 0.7], confidence=0.7)
    >>> row = FundRow("S1", "F1", "Bond", 3, graded={"grpo": Graded(3, True, 0.7), "rule": Graded(2)}, served=p)
    >>> line = row.as_dict()
    >>> line["grpo_grade"], line["rule_grade"], line["grpo_written_grade"], line["grpo_probs"]
    (3, 2, 4, [0.1, 0.2, 0.7])
    >>> FundRow.of(line) == row
    True
    """

    share_class_id: str
    fund_id: str
    category: str
    expert_grade: int
    label_source: str = "export"
    shown_grade: int | None = None  # the grade the prompt suggested (None: it suggested none)
    graded: Mapping[str, Graded] = field(default_factory=dict)
    served: Prediction = field(default_factory=lambda: Prediction(grade=None, written_grade=None))
    said: Mapping[str, Said] = field(default_factory=dict)  # "grpo", "sft": what each evaluation claims
    sft_text: str | None = None  # the SFT start's answer (None: no SFT start was evaluated)

    def grade_of(self, evaluator: str) -> int | None:
        """The grade `evaluator` gave this fund (None: an invalid answer, or the evaluator was not run)."""
        g = self.graded.get(evaluator)
        return None if g is None else g.grade

    def as_dict(self) -> dict[str, Any]:
        """The fund's line in the per-fund file: every key always, None where nothing is known."""
        served = self.served.as_dict()
        return {
            "share_class_id": self.share_class_id,
            "fund_id": self.fund_id,
            "category": self.category,
            "expert_grade": self.expert_grade,
            "label_source": self.label_source,
            **{f"{name}_grade": g.grade for name, g in self.graded.items()},
            **{f"{name}_valid": g.valid for name, g in self.graded.items()},
            **{f"{name}_confidence": g.confidence for name, g in self.graded.items()},
            **{f"grpo_{k}": served[k] for k in SERVED_FIELDS},
            **{f"{name}_{k}": getattr(s, k) for name, s in self.said.items() for k in SAID_FIELDS},
            "shown_grade": self.shown_grade,
            "sft_text": self.sft_text,
        }

    @classmethod
    def read(cls, path: Path) -> list[FundRow]:
        """The rows of a per-fund file."""
        return [cls.of(line) for line in io.read_jsonl(path)]

    @classmethod
    def of(cls, line: Mapping[str, Any]) -> FundRow:
        """The row a per-fund line holds (`as_dict`'s; a key a line lacks reads as unknown)."""
        names = [k.removesuffix("_valid") for k in line if k.endswith("_valid")]
        said = {
            n: Said(**{k: line.get(f"{n}_{k}") for k in SAID_FIELDS}) for n in LANGUAGE_MODELS if f"{n}_claims" in line
        }
        served = {k: line.get(f"grpo_{k}") for k in SERVED_FIELDS}
        served.update(
            text=served["text"] or "", grade=line.get("grpo_grade"), valid=bool(line.get("grpo_valid")),
            confidence=line.get("grpo_confidence"),
        )  # fmt: skip
        return cls(
            share_class_id=line["share_class_id"],
            fund_id=line["fund_id"],
            category=line["category"],
            expert_grade=line["expert_grade"],
            label_source=line.get("label_source", "export"),
            shown_grade=line.get("shown_grade"),
            graded={n: Graded(line.get(f"{n}_grade"), line[f"{n}_valid"], line.get(f"{n}_confidence")) for n in names},
            served=Prediction.of(served),
            said=said,
            sft_text=line.get("sft_text"),
        )


def per_fund(rows: list[PromptRecord], predictions: dict[str, list[Prediction]]) -> list[FundRow]:
    """One row per test fund (`FundRow`): each evaluator's grade, validity and (where it has probabilities)
    confidence, the served evaluation, what each language model's evaluation claims, and the SFT start's
    text (its pillars are compared with the policy's)."""
    return [
        FundRow(
            share_class_id=r.share_class_id,
            fund_id=r.fund_id,
            category=r.category,
            expert_grade=expert,
            label_source=r.label_source,
            shown_grade=r.shown_grade,
            graded={name: graded(preds[i]) for name, preds in predictions.items()},
            served=kept(predictions["grpo"][i]),
            said={name: Said.of(predictions[name][i]) for name in LANGUAGE_MODELS if name in predictions},
            sft_text=predictions["sft"][i].text if "sft" in predictions else None,
        )
        for i, (r, expert) in enumerate(zip(rows, expert_grades(rows)))
    ]


def kept(p: Prediction) -> Prediction:
    """What the per-fund file keeps of the served evaluation: its grade, validity, the confidence it serves
    (`Prediction.surest`) and `SERVED_FIELDS`."""
    return Prediction(grade=p.grade, valid=p.valid, confidence=p.surest, **{k: getattr(p, k) for k in SERVED_FIELDS})


def graded(p: Prediction) -> Graded:
    """An evaluator's grade of one fund, with the confidence it serves (the likeliest grade's probability
    where its rule sets none); no confidence without probabilities.

    >>> graded(Prediction(grade=2, written_grade=2, valid=True, probs=[0.3, 0.7]))
    Graded(grade=2, valid=True, confidence=0.7)
    """
    return Graded(p.grade, p.valid, p.surest)


def reliability(rows: list[PromptRecord], preds: list[Prediction], grades: list[int], bins: int = 10) -> list[dict]:
    """An evaluator's reliability diagram (`dvc plots`): per confidence bin, mean confidence and accuracy."""
    found = confidence_of(preds, grades)
    if found is None:
        return []
    correct = [p.grade is not None and int(p.grade) == e for e, p in zip(expert_grades(rows), preds)]
    return calibration.reliability(found[0], correct, bins)
