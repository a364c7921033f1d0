"""The methodology file's shared field parsers and its error: labels per language and the coverage
block (`fundgrpo.methodology.compiler` parses the rest, `fundgrpo.methodology.qualitative` the pillars)."""

from __future__ import annotations

from typing import Any

# The least share of the criteria weight a fund needs data for when the file says nothing
# (`coverage.min_weight`): below half the weight, a grade would rest on the minor criteria.
MIN_COVERAGE = 0.5


class MethodologyError(ValueError):
    """The methodology file is not usable; the message says why and where."""


def parse_coverage(value: Any, ids: list[str], where: str) -> tuple[float, tuple[str, ...]]:
    """(min_weight, required criterion ids) of the file's `coverage` block, checked.

    >>> parse_coverage(None, ["a"], "m.yaml"), parse_coverage({"min_weight": 0.2, "required": ["a"]}, ["a"], "m.yaml")
    ((0.5, ()), (0.2, ('a',)))
    >>> parse_coverage({"required": ["b"]}, ["a"], "m.yaml")
    Traceback (most recent call last):
    ...
    fundgrpo.methodology.fields.MethodologyError: m.yaml: coverage.required names 'b', not a criterion id (['a'])
    """
    if value is None:
        return MIN_COVERAGE, ()
    if not isinstance(value, dict) or set(value) - {"min_weight", "required"}:
        raise MethodologyError(
            f"{where}: coverage must be a mapping with min_weight (0-1) and required (criterion ids), got {value!r}"
        )
    weight = value.get("min_weight", MIN_COVERAGE)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1:
        raise MethodologyError(
            f"{where}: coverage.min_weight must be a share of the criteria weight in (0, 1], got {weight!r}"
        )
    required = value.get("required") or []
    if not isinstance(required, list):
        raise MethodologyError(f"{where}: coverage.required must be a list of criterion ids, got {required!r}")
    for cid in required:
        if str(cid) not in ids:
            raise MethodologyError(f"{where}: coverage.required names {cid!r}, not a criterion id ({ids})")
    return float(weight), tuple(str(c) for c in required)


def parse_label(value: Any, language: str, where: str) -> dict[str, str]:
    """A label: text (in `language`) or a mapping of language to text; anything else is named.

    >>> parse_label("poor", "en", "m.yaml: grade band 1"), parse_label({"en": "poor", "ko": "부진"}, "en", "x")
    ({'en': 'poor'}, {'en': 'poor', 'ko': '부진'})
    >>> parse_label(["poor", "부진"], "en", "m.yaml: grade band 1 (grade 1)")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.methodology.fields.MethodologyError: m.yaml: grade band 1 (grade 1): label must be text or a mapping
    of language to text, e.g. label: {en: poor, ko: 매우 부진}; got a list: ['poor', '부진']
    """
    if value is None:
        return {}
    if isinstance(value, str):
        return {language: value}
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool) for k, v in value.items()
    ):
        return {k: str(v) for k, v in value.items()}
    kinds: dict[type, str] = {list: "a list", dict: "a mapping with values that are not text"}
    kind = kinds.get(type(value), type(value).__name__)
    raise MethodologyError(
        f"{where}: label must be text or a mapping of language to text, e.g. label: {{en: poor, ko: 매우 부진}}; "
        f"got {kind}: {value!r}"
    )
