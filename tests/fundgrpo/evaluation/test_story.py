"""One story per evaluation: where the served grade is not the one the model's text was written for (a fit that
serves gradient boosting alone, or pooled with the model), the evaluation says whose grade it is; batch scoring
and the API's answer alike. On the session's trained tiny repo, with its policy."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.params import load_params
from fundgrpo.serving.batch import evaluate


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
def test_a_grade_that_is_not_the_texts_says_whose_it_is(trained, tmp_path, monkeypatch, fit, words):
    """Served gradient boosting alone, or pooled with it, the grade is often not the one the model's text
    was written for: every such evaluation says whose grade it is, so none contradicts its grade untold."""
    import json
    import shutil

    from fundgrpo.evaluation import calibration
    from fundgrpo.evaluation.story import untold

    root, _ = trained
    monkeypatch.chdir(root)  # the params' paths are the trained repo's
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
    invalid = out[~out["valid"].astype(bool) & out["rated"].astype(bool)]
    if fit["serves"] == "gbm":  # gradient boosting's grade alone: an invalid answer costs no grade, and says so
        assert len(invalid) and invalid["grade"].notna().all()
        assert invalid["reason"].str.contains("the grade is gradient boosting's alone").all()
    else:  # the language model's probabilities are part of the belief: without them, no grade
        assert invalid["grade"].isna().all()
    # the tiny model writes few valid answers: the evaluation of one it wrote for grade 5, served 3 or more
    # below by gradient boosting's (or the pooled) probabilities, built as batch scoring and the API build it
    from fundgrpo.serving import evaluation
    from fundgrpo.serving.champion import prompt_records

    record = prompt_records(reference, methodology, params.prepare, only=[reference["share_class_id"].iloc[0]])[0]
    low = [0.6, 0.3, 0.05, 0.03, 0.02]  # gradient boosting: grade 1
    record = replace(record, gbm_probs=low)
    wrote = Prediction(grade=5, written_grade=5, score=95.0, reasoning="Excellent. Sharpe ratio top 10%",
                       valid=True, unsupported=())  # fmt: skip
    rule = calibration.DecisionRule.of(fit)
    decided = wrote.decided(calibration.decide([0.01, 0.01, 0.03, 0.15, 0.8], 5, rule, methodology.grades, low))
    assert decided.grade < 5
    e = evaluation.build(record, decided, rule, methodology, "A fund", "", params.evaluate)
    assert e.grade_note.startswith(f"Grade {decided.grade} is {words}")
    assert "the evaluation's text is the language model's, written for grade 5" in e.grade_note
    row = evaluation.as_row(e, methodology.grades)
    assert row["grade_note"] == e.grade_note and row["written_grade"] == 5
    answer = evaluation.as_json(e, methodology.grades, {"rule": True, "gbm": False}, model_version="v")
    assert answer["served_from"]["summary"].startswith(words) and answer["grade_note"] == e.grade_note
