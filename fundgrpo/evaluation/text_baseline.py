"""The text baseline: gradient boosting on the numbers plus what n-grams read in the fund's documents.

The language model is worth its cost on the qualitative half only if it beats the usual strong
text baseline, given the same documents. Each share class's readable documents (its own, its
fund's, its company's, dated up to the as-of date: `fundgrpo.data.documents`) are one text; it is
turned into word (1-2) and character (2-4, within word boundaries: Korean needs no tokeniser) n-gram
TF-IDF, and a multinomial logistic regression on it gives a grade distribution. Those probabilities
are features of the gradient-boosting model beside the numeric ones (stacking), so the trees weigh
text against numbers as they weigh numbers against each other.

Leakage is the trap again: the text features of a training row come from a logistic regression
fitted on the other training funds (cross-fitted over `TEXT_FOLDS` fund-grouped folds); every other
row gets the one fitted on all training rows. A fund with no document gets no text features
(missing, which the trees read as "nothing said"), never a guess.

>>> X = pd.DataFrame({"sharpe_3y": [0.1, 0.2, 0.9, 1.0] * 6, "document_text": ["manager left", "",
...     "team joined", "strong risk"] * 6})
>>> fitted = fit(X, [1, 2, 4, 5] * 6, [f"F{i}" for i in range(24)], BaselineParams(max_iter=20), [1, 2, 3, 4, 5])
>>> fitted.predict_proba(X.head(2)).shape, fitted.text_columns[:2]
((2, 5), ['text_p1', 'text_p2'])
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fundgrpo.evaluation import baselines
from fundgrpo.params import BaselineParams
from fundgrpo.threads import small_data

TEXT = "document_text"  # the column of the feature frame that holds each row's documents
TEXT_FOLDS = 5
C = 4.0  # inverse regularisation of the logistic regression (TF-IDF rows are unit length)


def _vectoriser() -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion

    return FeatureUnion(
        [
            ("words", TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, sublinear_tf=True)),
            ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True)),
        ]
    )


@dataclass
class TextModel:
    """TF-IDF and a logistic regression fitted on some rows' texts and grades."""

    vectoriser: Any
    model: Any
    grades: list[int]

    def predict_proba(self, texts: pd.Series) -> np.ndarray:
        """(rows, grades); rows without text get NaN."""
        out = np.full((len(texts), len(self.grades)), np.nan)
        said = (texts.fillna("").str.strip() != "").to_numpy()
        if said.any() and self.model is not None:
            with small_data():
                proba = self.model.predict_proba(self.vectoriser.transform(texts[said]))
            for j, g in enumerate(self.model.classes_):
                out[np.flatnonzero(said), self.grades.index(int(g))] = proba[:, j]
        return out


def fit_text(texts: pd.Series, y: np.ndarray, grades: list[int]) -> TextModel:
    """TF-IDF on the rows with text, and a logistic regression on their grades."""
    from sklearn.linear_model import LogisticRegression

    said = (texts.fillna("").str.strip() != "").to_numpy()
    if said.sum() < 4 or len(np.unique(y[said])) < 2:
        return TextModel(None, None, grades)
    vectoriser = _vectoriser()
    with small_data():
        matrix = vectoriser.fit_transform(texts[said])
        model = LogisticRegression(C=C, max_iter=1000).fit(matrix, y[said])
    return TextModel(vectoriser, model, grades)


def _fold(group: str) -> int:
    return int(hashlib.sha256(f"text:{group}".encode()).hexdigest()[:8], 16) % TEXT_FOLDS


def cross_fitted(texts: pd.Series, y: np.ndarray, groups: np.ndarray, grades: list[int]) -> np.ndarray:
    """Each row's text probabilities from a model that never saw its fund's grades."""
    folds = np.array([_fold(str(g)) for g in groups])
    out = np.full((len(texts), len(grades)), np.nan)
    for k in range(TEXT_FOLDS):
        held = folds == k
        if held.any() and (~held).any():
            out[held] = fit_text(texts[~held], y[~held], grades).predict_proba(texts[held])
    return out


@dataclass
class TextFitted:
    """Gradient boosting on the numeric features and the text model's probabilities (`baselines.Fitted`'s
    interface: `predict_proba`, `grades`, `chosen`, `columns`)."""

    text: TextModel
    boosted: baselines.Fitted

    @property
    def grades(self) -> list[int]:
        return self.boosted.grades

    @property
    def chosen(self) -> dict[str, Any]:
        return {**self.boosted.chosen, "text": {"words": [1, 2], "chars": [2, 4], "C": C}}

    @property
    def columns(self) -> list[str]:
        return [c for c in self.boosted.columns if c not in self.text_columns] + [TEXT]

    @property
    def text_columns(self) -> list[str]:
        return [f"text_p{g}" for g in self.grades]

    def _with_text(self, X: pd.DataFrame) -> pd.DataFrame:
        texts = X[TEXT] if TEXT in X else pd.Series([""] * len(X), index=X.index)
        out = X.drop(columns=[TEXT], errors="ignore").copy()
        out[self.text_columns] = self.text.predict_proba(texts.reset_index(drop=True))
        return out

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        return self.boosted.predict_proba(self._with_text(X))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.boosted.predict(self._with_text(X))


def fit(X: pd.DataFrame, y, groups, params: BaselineParams, grades: list[int]) -> TextFitted:
    """`baselines.fit` with the documents: `X` holds the numeric features and the `TEXT` column."""
    y = np.asarray(y, dtype=int)
    groups = np.asarray(groups)
    grades = [int(g) for g in grades]
    texts = X[TEXT].fillna("").astype(str).reset_index(drop=True)
    numbers = X.drop(columns=[TEXT]).reset_index(drop=True)
    columns = [f"text_p{g}" for g in grades]
    numbers[columns] = cross_fitted(texts, y, groups, grades)
    return TextFitted(fit_text(texts, y, grades), baselines.fit(numbers, y, groups, params, grades))
