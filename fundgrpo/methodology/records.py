"""The prompt record: one share class as the pipeline trains, tests and serves on it.

`prepare` writes one per labelled share class (`data/prepared/*.jsonl`, through `as_dict`); serving builds
them for any fund (`champion.prompt_records`); the trainers, the backtest, calibration and the registry read
them (`PromptRecord.read`). Every field is always there, None where nothing is known, so no reader guesses
whether a key was left out or never computed. The columns TRL passes to the rewards are some of its fields
(`grpo_trainer.datasets_of`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from fundgrpo import io


@dataclass(frozen=True)
class PromptRecord:
    """One share class's prompt, its reference answer (labelled funds) and the columns rewards and checks read.

    >>> r = PromptRecord.example()
    >>> r.labelled, PromptRecord.of(r.as_dict()) == r
    (True, True)
    >>> PromptRecord.of({**r.as_dict(), "grade": 3})
    Traceback (most recent call last):
    ...
    ValueError: prompt record: unknown field(s) grade; rerun `dvc repro prepare` with this code
    """

    share_class_id: str
    fund_id: str
    category: str
    split: str  # the fund's split (`splits.split_of`): train, validation or test
    peers: int  # share classes in the category, this one included
    prompt: list[dict[str, str]]  # the chat messages the model reads
    reference: str | None  # the reference answer (JSON text); None: no expert grade
    expert_grade: int | None  # None: the fund has no expert grade (serving evaluates it, nothing learns from it)
    expert_score: float | None  # the score the reference answer writes (within the grade's band)
    label_source: str  # where the grade comes from: "export" (the data's experts) or "analyst" (a decision)
    label_decision_id: int | None  # the analyst's decision, where label_source is "analyst"
    evidence: (
        str  # JSON: the percentile the prompt shows per criterion and context metric (what claims are checked against)
    )
    rule_grade: int | None  # the rule scorer's grade (None: no criterion data)
    rule_score: float | None
    shown_grade: int | None  # the grade the prompt suggests (the estimate's, else the rule's when shown; None: none)
    not_rated: str | None  # why the methodology does not rate the fund (None: it does)
    gbm_grade: int | None  # the statistical estimate (None: no estimates given)
    gbm_probs: list[float] | None  # its probabilities, one per grade
    documents: str | None  # JSON: document id -> text, the documents the prompt shows (None: no qualitative criteria)
    pillars: str | None  # JSON: the reference judgements per qualitative criterion (None: none written)
    referenced: bool = True  # whether an analyst wrote this training fund's evaluation (`prepare.reference_share`)

    @property
    def labelled(self) -> bool:
        """Whether the fund has an expert grade (trained or tested on), not only evaluated."""
        return self.expert_grade is not None

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON: every field, always (a line of `data/prepared/*.jsonl`, a dataset row for TRL)."""
        return asdict(self)

    @classmethod
    def of(cls, line: Mapping[str, Any], where: str = "prompt record") -> PromptRecord:
        """The record `as_dict` wrote; a field missing or unknown is an error naming it (a file from older code)."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(line) - set(names))
        missing = [n for n in names if n not in line]
        if unknown or missing:
            said = "; ".join(
                part
                for part in (
                    f"unknown field(s) {', '.join(unknown)}" if unknown else "",
                    f"missing field(s) {', '.join(missing)}" if missing else "",
                )
                if part
            )
            raise ValueError(f"{where}: {said}; rerun `dvc repro prepare` with this code")
        return cls(**{n: line[n] for n in names})

    @classmethod
    def read(cls, path: str | Path) -> list[PromptRecord]:
        """The records of a JSON-lines file `prepare` wrote, each checked (`of`), naming file and line."""
        path = Path(path)
        with path.open(encoding="utf-8") as f:
            return [cls.of(json.loads(text), f"{path} line {i}") for i, text in enumerate(f, 1) if text.strip()]

    @classmethod
    def example(cls, **changes: Any) -> PromptRecord:
        """A small labelled record, for examples and tests (`changes` replace its fields)."""
        values: dict[str, Any] = dict(
            share_class_id="S1", fund_id="F1", category="Equity", split="test", peers=3,
            prompt=[{"role": "user", "content": "Grade this fund."}], reference='{"grade": 3}',
            expert_grade=3, expert_score=50.0, label_source="export", label_decision_id=None,
            evidence='{"sharpe": 55.0}', rule_grade=3, rule_score=50.0, shown_grade=None, not_rated=None,
            gbm_grade=None, gbm_probs=None, documents=None, pillars=None,
        )  # fmt: skip
        return cls(**{**values, **changes})


def expert_grades(rows: Sequence[PromptRecord]) -> list[int]:
    """The expert grade of each record, for scoring against them; an unlabelled record among them is an error
    naming it (nothing is scored against a grade it does not have).

    >>> expert_grades([PromptRecord.example(expert_grade=4)])
    [4]
    >>> expert_grades([PromptRecord.example(expert_grade=None)])
    Traceback (most recent call last):
    ...
    ValueError: share class(es) S1 have no expert grade: only labelled records are scored against the experts
    """
    missing = [r.share_class_id for r in rows if r.expert_grade is None]
    if missing:
        raise ValueError(
            f"share class(es) {', '.join(missing[:5])} have no expert grade: only labelled records are scored "
            "against the experts"
        )
    return [r.expert_grade for r in rows if r.expert_grade is not None]


def write(records: list[PromptRecord], path: str | Path) -> None:
    """The records as JSON lines (`as_dict`), the file `PromptRecord.read` reads."""
    io.write_jsonl([r.as_dict() for r in records], path)
