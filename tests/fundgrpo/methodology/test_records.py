import json
from dataclasses import fields

import pytest

from fundgrpo.data import synthetic
from fundgrpo.methodology import compiler as meth
from fundgrpo.methodology import records
from fundgrpo.methodology.preparation import run
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import PrepareParams, SyntheticParams
from tests.support import REPO


def test_prepared_records_round_trip_with_every_field_on_every_line(tmp_path):
    funds = synthetic.later_batch(SyntheticParams(n_funds=60, n_months=48), 3)
    datasets, _ = run(funds, meth.load(REPO / "methodology/default.yaml"), PrepareParams())
    records.write(datasets["train"], tmp_path / "train.jsonl")
    lines = [json.loads(t) for t in (tmp_path / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {tuple(line) for line in lines} == {tuple(f.name for f in fields(PromptRecord))}  # no key comes and goes
    assert PromptRecord.read(tmp_path / "train.jsonl") == datasets["train"]
    assert all(r.split == "train" and r.labelled and r.referenced for r in datasets["train"])


def test_a_file_from_other_code_is_named_with_its_line(tmp_path):
    good = PromptRecord.example().as_dict()
    older = {k: v for k, v in good.items() if k not in ("split", "referenced")}
    (tmp_path / "test.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(older) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"test\.jsonl line 2: missing field\(s\) split, referenced; rerun `dvc repro"):
        PromptRecord.read(tmp_path / "test.jsonl")
