"""The split by fund: train, validation and test, from a seeded hash of the fund id.

The split is by `fund_id`, so share classes of one fund never straddle train and test; it is
stable as the universe grows (a fund keeps its split when new funds or batches arrive), so the
expert test set stays frozen across relearning. `prepare` and `evidence` both use it.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from fundgrpo.cli import StageError
from fundgrpo.params import PrepareParams

SPLITS = ("train", "validation", "test")


def split_of(fund_id: str, params: PrepareParams) -> str:
    """The split a fund belongs to, from a seeded hash of its id.

    Stable as the universe grows: a fund keeps its split when new funds or new
    batches arrive, so the expert test set stays frozen across relearning.

    >>> split_of("F1", PrepareParams()) == split_of("F1", PrepareParams())
    True
    """
    u = int(hashlib.sha256(f"{params.seed}:{fund_id}".encode()).hexdigest()[:12], 16) / 16**12
    if u < params.train_share:
        return "train"
    return "validation" if u < params.train_share + params.validation_share else "test"


def split_funds(fund_ids: pd.Series, params: PrepareParams) -> pd.Series:
    """Assign each row the split of its fund; every split must get at least one fund.

    >>> s = split_funds(pd.Series([f"F{i // 2}" for i in range(60)]), PrepareParams())
    >>> bool(s.iloc[0] == s.iloc[1]), sorted(s.unique())
    (True, ['test', 'train', 'validation'])
    """
    split = fund_ids.map(lambda f: split_of(str(f), params))
    empty = [name for name in SPLITS if not (split == name).any()]
    if empty:
        raise StageError(
            f"prepare: {fund_ids.nunique()} labelled funds leave the {', '.join(empty)} split empty; "
            "add funds or change the shares"
        )
    return split
