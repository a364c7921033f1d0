import json
import os
import subprocess
import sys

import yaml

from fundgrpo.methodology.compiler import compile_file
from tests.support import REPO


def test_run_compiles_schema_and_rubric(repo_root):
    out = compile_file(repo_root / "methodology/default_ko.yaml")
    assert out["output_schema"]["properties"]["grade"]["enum"] == [1, 2, 3, 4, 5]
    assert out["rubric"]["language"] == "ko"
    assert abs(sum(c["weight"] for c in out["rubric"]["criteria"]) - 1) < 1e-9


def test_bad_methodology_fails_clearly_and_keeps_the_last_good_schema(tmp_path, repo_root):
    raw = yaml.safe_load((repo_root / "methodology/default.yaml").read_text(encoding="utf-8"))
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    (tmp_path / "params.yaml").write_text("methodology: {path: m.yaml, out_dir: schema}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(
        [sys.executable, "-m", "stages.methodology"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    good = (tmp_path / "schema/rubric.json").read_text()

    raw["grades"][2]["min"] = 30  # overlaps grade 2's band [10, 32.5)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "stages.methodology"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert bad.returncode == 1
    assert "methodology failed" in bad.stderr and "overlap" in bad.stderr
    assert (tmp_path / "schema/rubric.json").read_text() == good
    assert json.loads(good)["name"] == "Fund Quality Rating"
