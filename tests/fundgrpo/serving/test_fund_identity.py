"""A file of some funds is scored as the same funds inside the whole file: rows are matched to the universe
by a stable share-class id, never by row position, and an id that names another fund is refused.
On the session's trained tiny repo, with its policy."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from fundgrpo.data.reading import IngestError
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import load_params
from fundgrpo.serving.batch import EvaluateError, evaluate, read_funds

SAME = ("fund_id", "category", "peers", "seen_in_training", "rule_grade", "rule_score", "gbm_grade", "missing_criteria")
ANSWER = ("grade", "written_grade", "reasoning", "valid")


def score(root, path, params):
    methodology, schema = load_compiled(root / "data/schema")
    funds, report = read_funds(path, params)
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    return evaluate(funds, reference, root / "models/policy", methodology, schema, params, "policy", report)


def test_twenty_funds_are_scored_as_inside_the_whole_file(trained, tmp_path):
    root, _ = trained
    params = load_params(root / "params.yaml")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    reference.drop(columns=["as_of"], errors="ignore").to_csv(tmp_path / "all.csv", index=False)
    reference.iloc[30:50].drop(columns=["as_of"], errors="ignore").to_csv(tmp_path / "some.csv", index=False)

    whole = score(root, tmp_path / "all.csv", params).set_index("share_class_id")
    some = score(root, tmp_path / "some.csv", params).set_index("share_class_id")
    assert len(some) == 20 and some.index.tolist() == reference["share_class_id"].iloc[30:50].tolist()
    mine = whole.loc[some.index]
    for column in SAME + ANSWER:
        pd.testing.assert_series_equal(some[column], mine[column], check_names=False, obj=column)
    assert some["seen_in_training"].any() and not some["seen_in_training"].all()  # both kinds among the twenty
    probs = [c for c in some if c.startswith("p_")]
    assert (some[probs].astype(float).fillna(0) - mine[probs].astype(float).fillna(0)).abs().max().max() < 1e-3


def test_ids_by_row_position_are_refused_outside_the_training_file(trained, tmp_path):
    """share_class_id_generate numbers rows: "row-1" of a file of twenty funds is another fund than "row-1"
    of the universe. Only the training file itself may be read that way."""
    root, _ = trained
    params = load_params(root / "params.yaml")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    export = reference.drop(columns=["share_class_id", "fund_id", "as_of"], errors="ignore")
    export.to_csv(tmp_path / "export.csv", index=False)
    export.iloc[30:50].to_csv(tmp_path / "twenty.csv", index=False)
    numbered = replace(
        params,
        ingest=replace(params.ingest, source="table", path=str(tmp_path / "export.csv"), share_class_id_generate=True),
    )
    funds, _ = read_funds(tmp_path / "export.csv", numbered)  # the training file: its own numbering
    assert funds["share_class_id"].head(2).tolist() == ["row-1", "row-2"]
    with pytest.raises(IngestError) as err:
        read_funds(tmp_path / "twenty.csv", numbered)
    message = str(err.value)
    assert "twenty.csv: ingest.share_class_id_generate numbers share classes by data row" in message
    assert "ingest.share_class_id_from" in message and "ingest.column_map.share_class_id" in message


def test_an_id_that_names_another_fund_is_refused_with_its_rows(trained, tmp_path):
    root, _ = trained
    params = load_params(root / "params.yaml")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    other = reference.iloc[30:33].drop(columns=["as_of"], errors="ignore")
    other = other.assign(share_class_id=reference["share_class_id"].iloc[:3].to_numpy())  # the first three's ids
    other.to_csv(tmp_path / "clash.csv", index=False)
    with pytest.raises(EvaluateError) as err:
        score(root, tmp_path / "clash.csv", params)
    message = str(err.value)
    first = reference.iloc[0]
    assert "3 row(s) carry the share_class_id of another fund of the universe" in message
    assert f"row 1: {first['share_class_id']!r} is {reference['name'].iloc[30]!r} here" in message
    assert f"{first['name']!r} in the universe" in message


@pytest.mark.parametrize(
    "fit, words",
    [
        ({"serves": "gbm", "method": "score", "confidence": "gbm", "temperature": 1.0, "grade_from": "likeliest",
          "cutpoints": None, "chosen": "gbm/score/likeliest"}, "gradient boosting's grade alone"),
        ({"serves": "stack", "method": "score", "confidence": "pooled", "pool": [0.4, 1.2], "temperature": 1.0,
          "grade_from": "likeliest", "cutpoints": None, "chosen": "stack/score/likeliest"},
         "the language model's grade probabilities (25%) pooled with gradient boosting's (75%)"),
    ],
)  # fmt: skip
def test_a_grade_that_is_not_the_texts_says_whose_it_is(trained, tmp_path, fit, words):
    """Served gradient boosting alone, or pooled with it, the grade is often not the one the model's text
    was written for: every such evaluation says whose grade it is, so none contradicts its grade untold."""
    import json
    import shutil

    from fundgrpo.evaluation import calibration
    from fundgrpo.evaluation.story import untold

    root, _ = trained
    params = load_params(root / "params.yaml")
    folder = tmp_path / "served"
    shutil.copytree(root / "models/policy", folder)
    (folder / "calibration.json").write_text(json.dumps(fit))
    methodology, schema = load_compiled(root / "data/schema")
    reference = pd.read_parquet(root / "data/validated/funds.parquet")
    out = evaluate(reference, reference, folder, methodology, schema, params, "served")
    assert (out["serves"] == fit["serves"]).all()
    said = out[["grade", "written_grade", "grade_note"]]
    rows = said.astype(object).where(said.notna(), None)
    assert not any(untold(g, w, n) for g, w, n in rows.itertuples(index=False))
    valid = out[out["valid"].astype(bool)]
    same = valid[valid["grade"] == valid["written_grade"]]
    assert not same["grade_note"].fillna("").str.contains("written for grade").any()  # nothing said that is not so
    # the tiny model writes few valid answers: the evaluation of one it wrote for grade 5, served 3 or more
    # below by gradient boosting's (or the pooled) probabilities, built as batch scoring and the API build it
    from fundgrpo.serving import evaluation
    from fundgrpo.serving.champion import prompt_records

    record = prompt_records(reference, methodology, params.prepare, only=[reference["share_class_id"].iloc[0]])[0]
    low = [0.6, 0.3, 0.05, 0.03, 0.02]  # gradient boosting: grade 1
    record = {**record, "gbm_probs": low}
    wrote = {"grade": 5, "written_grade": 5, "score": 95.0, "reasoning": "Excellent. Sharpe ratio top 10%",
             "valid": True, "reason": None, "text": "", "unsupported": []}  # fmt: skip
    decided = {**wrote, **calibration.decide([0.01, 0.01, 0.03, 0.15, 0.8], 5, fit, methodology.grades, low)}
    assert decided["grade"] < 5
    e = evaluation.build(record, decided, fit, methodology, "A fund", "", params.evaluate)
    assert e.grade_note.startswith(f"Grade {decided['grade']} is {words}")
    assert "the evaluation's text is the language model's, written for grade 5" in e.grade_note
    row = evaluation.as_row(e, methodology.grades)
    assert row["grade_note"] == e.grade_note and row["written_grade"] == 5
    answer = evaluation.as_json(e, methodology.grades, {"rule": True, "gbm": False}, model_version="v")
    assert answer["served_from"]["summary"].startswith(words) and answer["grade_note"] == e.grade_note
