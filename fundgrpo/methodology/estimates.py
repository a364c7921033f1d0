"""The statistical estimates a prompt shows, as the `evidence` stage writes them
(`fundgrpo.evaluation.statistical`) and `prepare` reads them: the table's columns, the rows for a
set of records (checked fresh), and what a prompt shows of one row.

They live here, below the evaluation code that computes them, so that writing prompts needs no
model code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


class EvidenceError(ValueError):
    """The evidence file is missing, stale or from another split; the message says what to rerun."""


def prob_column(grade: int) -> str:
    """The estimates table's column for one grade's probability.

    >>> prob_column(4)
    'gbm_p4'
    """
    return f"gbm_p{grade}"


def for_records(estimates: pd.DataFrame, ids: list[str], splits: list[str], where: str) -> pd.DataFrame:
    """The rows of `estimates` for share classes `ids` whose split (per prepare) is `splits`;
    a missing share class or a different split is stale evidence, named with the fix."""
    missing = [i for i in ids if i not in estimates.index]
    if missing:
        raise EvidenceError(
            f"{where}: no estimate for {len(missing)} share class(es) (e.g. {missing[:3]}): "
            "the evidence is stale; rerun `dvc repro evidence`"
        )
    found = estimates.loc[ids]
    differ = [i for i, s, t in zip(ids, splits, found["split"]) if s != t]
    if differ:
        raise EvidenceError(
            f"{where}: {len(differ)} share class(es) (e.g. {differ[:3]}) are in another split than when the "
            "evidence was computed: its out-of-fold estimates would leak; rerun `dvc repro evidence`"
        )
    return found


@dataclass(frozen=True)
class Estimate:
    """What a prompt shows of one statistical estimate: its grade and that grade's probability, the
    runner-up and its probability, every grade's probability in the methodology's order; and, for a
    reference evaluation, how many grades it lies above (+) or below (-) the methodology's (`moved`)."""

    grade: int
    p: float
    next_grade: int
    p_next: float
    probs: tuple[float, ...]
    moved: int = 0


def shown_estimate(row: pd.Series | dict, grades: list[int]) -> Estimate:
    """What a prompt shows of one estimate (the row's `gbm_p<grade>` columns).

    >>> shown_estimate({"gbm_p1": 0.1, "gbm_p2": 0.6, "gbm_p3": 0.3}, [1, 2, 3])
    Estimate(grade=2, p=0.6, next_grade=3, p_next=0.3, probs=(0.1, 0.6, 0.3), moved=0)
    """
    probs = [float(row[prob_column(g)]) for g in grades]
    order = np.argsort(probs)[::-1]
    first, second = int(order[0]), int(order[1]) if len(order) > 1 else int(order[0])
    return Estimate(
        grade=grades[first], p=round(probs[first], 4), next_grade=grades[second], p_next=round(probs[second], 4),
        probs=tuple(round(p, 4) for p in probs),
    )  # fmt: skip
