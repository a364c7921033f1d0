"""benchmarks/time/suite.py: the suite's timeline (tests/conftest.py writes it), the page made from the recorded
runs, and the file order `make test` takes from them."""

import doctest
import json
import os
import subprocess
import sys

import pytest

from benchmarks.time import suite
from tests.support import REPO


def test_the_summaries_read_a_timeline_right():
    assert doctest.testmod(suite).failed == 0


@pytest.mark.research
def test_the_committed_page_is_what_the_recorded_runs_generate():
    if suite.load():
        assert suite.report() == suite.PAGE.read_text(encoding="utf-8"), "run `python benchmarks/time/suite.py report`"


def test_each_test_is_timed_on_its_worker(tmp_path):
    out = tmp_path / "timeline.jsonl"
    # a pytest of its own: not an xdist worker of the run around it (whose variables it would inherit)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["FUNDGRPO_TIMELINE_OUT"] = str(out)
    target = "tests/fundgrpo/methodology/test_prompts.py"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", target], cwd=REPO, env=env, check=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and {r["test"].split("::")[0] for r in rows} == {target}
    assert all(r["worker"] == "main" and r["end"] >= r["start"] and r["cpu_self"] >= 0 for r in rows)
    [file] = suite.by_file(rows)
    assert file["tests"] == len(rows) and file["wall"] == max(r["end"] for r in rows) - min(r["start"] for r in rows)


def test_the_order_reads_each_files_seconds_from_the_newest_recorded_run(tmp_path):
    """`make test` runs the longest files first (tests/conftest.py), as the newest recorded run measured them."""
    rows = [
        {"test": "tests/a.py::t", "worker": "gw0", "start": 0, "end": 5, "cpu_self": 1, "cpu_children": 0},
        {"test": "tests/b.py::t", "worker": "gw1", "start": 0, "end": 50, "cpu_self": 1, "cpu_children": 0},
    ]
    old = {"label": "old", "date": "2026-01-01 00:00 UTC", "tests": rows[:1]}
    new = {"label": "new", "date": "2026-02-01 00:00 UTC", "tests": rows}
    for run in (old, new):
        (tmp_path / f"{run['label']}.json").write_text(json.dumps(run))
    assert suite.file_seconds(tmp_path) == {"tests/a.py": 5, "tests/b.py": 50}
    assert suite.file_seconds(tmp_path / "none") == {}


def test_the_census_counts_each_python_process_it_starts(tmp_path):
    """With the census's hook in a site-packages folder, each Python process started with its variable
    writes its command, CPU and the test that started it when it exits, whatever PYTHONPATH it is given
    (many tests set their own); the page's table groups them by command. The hook goes when the block ends."""
    site, out = tmp_path / "site", tmp_path / "census.jsonl"
    site.mkdir()
    # a site-packages folder of the test's own (a .pth file is read only from one: site.addsitedir), then
    # the module run as `python -m` runs it, its file as argv[0]
    run_module = (
        f"import site; site.addsitedir({str(site)!r}); import importlib.util, runpy, sys; name = sys.argv[1]; "
        "sys.argv = [importlib.util.find_spec(name).origin, *sys.argv[2:]]; runpy.run_module(name, run_name='__main__')"
    )
    with suite.census_hook(out, site) as census_vars:
        env = {**os.environ, **census_vars, "PYTHONPATH": str(REPO)}
        subprocess.run([sys.executable, "-c", run_module, "platform"], env=env, check=True, capture_output=True)
        dvc = [sys.executable, "-c", run_module, "dvc.__main__", "version"]
        subprocess.run(dvc, cwd=tmp_path, env=env, check=True, capture_output=True)
    assert not list(site.iterdir())
    records = [json.loads(line) for line in out.read_text().splitlines()]
    found = suite.census(records)
    assert found["processes"] == 2 and found["cpu_s"] > 0
    assert sorted(found["commands"])[0] == "dvc version" and sorted(found["commands"])[1].endswith("platform.py")
    assert set(found["files"]) == {"tests/benchmarks/time/test_suite.py"}
    table = suite.render_census(found, cpu=found["cpu_s"] * 2)
    assert "(50% of the run's CPU" in "\n".join(table) and any(row.startswith("| `dvc version` | 1 |") for row in table)
    assert any(row.startswith("| `tests/benchmarks/time/test_suite.py` | ") for row in table)
