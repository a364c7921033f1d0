"""Where `make test`'s time goes: each test's wall time and CPU, by file and by worker, and how busy the
workers kept the cores.

    python benchmarks/time/suite.py run [--workers 2] [--label NAME] [-- PYTEST ARGS]
    # the suite as `make test` runs it
    python benchmarks/time/suite.py report      # research/suite.md and suite.png from research/results/suite/

`run` starts the pytest command of `make test`'s recipe in the Makefile (what it runs after its lint: the
research pages' tests left out), with WORKERS workers and FUNDGRPO_TIMELINE_OUT set: tests/conftest.py
writes each test's start, end and CPU on its worker (setup, call and teardown, so the fixtures a test
builds count in the first test that asks for them; a server a fixture started counts, in CPU, where its
process is reaped). The whole run's CPU is what the pytest process and everything it started used (user
+ system); the machine's, from /proc/stat, counts the processes never reaped too. Run it on an idle
machine: a run beside other work measures the other work too.

The census: every Python process of this environment that the run starts (the workers, each stage,
DVC, the servers, the tools) writes its command and the CPU it used when it exits, through a `.pth`
file put in site-packages for the run (inert without FUNDGRPO_CENSUS_OUT, removed after); so the page
says which processes the CPU went to. A process killed by a signal, or started with an environment
that drops the variable, is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESEARCH = HERE.parents[1] / "research"
RESULTS = RESEARCH / "results" / "suite"
PAGE, FIGURE = RESEARCH / "suite.md", RESEARCH / "suite.png"


# Imported at start-up by every interpreter of this environment while the census's `.pth` file is in
# site-packages; it does something only where FUNDGRPO_CENSUS_OUT is set.
HOOK = """import atexit, json, os, resource, sys


def _census():
    r = resource.getrusage(resource.RUSAGE_SELF)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    record = {"argv": sys.argv[:2], "cpu": round(r.ru_utime + r.ru_stime, 2), "test": test}
    try:
        with open(os.environ["FUNDGRPO_CENSUS_OUT"], "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\\n")
    except OSError:
        pass


if os.environ.get("FUNDGRPO_CENSUS_OUT"):
    atexit.register(_census)
"""
HOOK_NAME = "fundgrpo_suite_census"


@contextmanager
def census_hook(out: Path, site: Path | None = None) -> Iterator[dict[str, str]]:
    """The census installed in `site` (this interpreter's site-packages) for the block; yields the
    environment that makes each Python process write its line into `out`."""
    site = site or Path(sysconfig.get_paths()["purelib"])
    module, pth = site / f"{HOOK_NAME}.py", site / f"{HOOK_NAME}.pth"
    module.write_text(HOOK, encoding="utf-8")
    pth.write_text(f"import {HOOK_NAME}\n", encoding="utf-8")
    try:
        yield {"FUNDGRPO_CENSUS_OUT": str(out)}
    finally:
        pth.unlink(missing_ok=True)
        module.unlink(missing_ok=True)


def command_name(argv: list[str]) -> str:
    """A process's command, as the census groups it.

    >>> command_name(["/r/.venv/lib/python3.11/site-packages/dvc/__main__.py", "repro"])
    'dvc repro'
    >>> command_name(["/tmp/pytest-of-x/gw0/repo/stages/register.py"])
    'stages/register.py'
    >>> command_name(["-c", "--x"]), command_name(["/r/.venv/bin/pytest", "-q"])
    ('pytest worker', 'pytest')
    >>> command_name(["/r/.venv/lib/python3.11/site-packages/uvicorn/__main__.py", "--app-dir"])
    'uvicorn'
    """
    if not argv or argv[0] == "-c":
        return "pytest worker"  # pytest-xdist starts its workers with `python -c`
    path = Path(argv[0])
    if path.name == "__main__.py":
        name = path.parent.name
        return f"{name} {argv[1]}" if name == "dvc" and len(argv) > 1 else name
    if path.parent.name == "bin":
        return f"{path.name} {argv[1]}" if path.name == "dvc" and len(argv) > 1 else path.name
    return f"{path.parent.name}/{path.name}"


def census(records: list[dict]) -> dict:
    """Processes and CPU seconds by command, and CPU by the test file that started them.

    >>> c = census([{"argv": ["/x/stages/sft.py"], "cpu": 2.0, "test": "tests/a.py::t"},
    ...             {"argv": ["/x/stages/sft.py"], "cpu": 1.5, "test": "tests/b.py::t"}])
    >>> c["commands"], c["files"]
    ({'stages/sft.py': [2, 3.5]}, {'tests/a.py': 2.0, 'tests/b.py': 1.5})
    """
    commands: dict[str, list] = defaultdict(lambda: [0, 0.0])
    files: dict[str, float] = defaultdict(float)
    for r in records:
        entry = commands[command_name(r["argv"])]
        entry[0] += 1
        entry[1] = round(entry[1] + r["cpu"], 2)
        files[r["test"].split("::")[0] or "(between tests)"] += r["cpu"]
    return {
        "processes": len(records),
        "cpu_s": round(sum(r["cpu"] for r in records), 1),
        "commands": dict(sorted(commands.items(), key=lambda kv: -kv[1][1])),
        "files": {k: round(v, 2) for k, v in sorted(files.items(), key=lambda kv: -kv[1])},
    }


def make_test(makefile: str, workers: int) -> list[str]:
    """The pytest command of the Makefile's `test` recipe, with TEST_WORKERS set to `workers`: the Makefile is
    its one home, so the timed suite is the one CI runs.

    >>> make_test('lint:\\n\\truff .\\ntest: setup lint ## x\\n\\tpytest -q -n $(TEST_WORKERS) -m "not research"\\n', 2)
    ['pytest', '-q', '-n', '2', '-m', 'not research']
    >>> make_test("test:\\n\\techo\\n", 2)
    Traceback (most recent call last):
    ValueError: Makefile: the `test` recipe has no pytest line
    """
    found = re.search(r"^test:.*\n(?:\t.*\n)*?\t(pytest .*)$", makefile, re.M)  # as mlflow_ui.py reads its recipe
    if found is None:
        raise ValueError("Makefile: the `test` recipe has no pytest line")
    return shlex.split(found.group(1).replace("$(TEST_WORKERS)", str(workers)))


def machine_cpu() -> float | None:
    """Seconds of CPU the whole machine has used since boot (every process: the servers and browsers that
    the run's own accounting misses among them), from /proc/stat; None where there is none."""
    try:
        first = Path("/proc/stat").read_text(encoding="utf-8").splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run(workers: int, label: str, extra: list[str]) -> Path:
    """The suite once, timed; its figures into RESULTS/<label>.json."""
    command = [sys.executable, "-m", *make_test((REPO / "Makefile").read_text(encoding="utf-8"), workers), *extra]
    with tempfile.TemporaryDirectory() as tmp:
        timeline = Path(tmp) / "timeline.jsonl"
        logged = Path(tmp) / "census.jsonl"
        with census_hook(logged) as census_vars:
            env = {**os.environ, "FUNDGRPO_TIMELINE_OUT": str(timeline), **census_vars}
            before, machine, start = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu(), time.monotonic()
            done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
            wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
            machine_after = machine_cpu()
        rows = [json.loads(line) for line in timeline.read_text(encoding="utf-8").splitlines()]
        lines = logged.read_text(encoding="utf-8").splitlines() if logged.exists() else []
        processes = census([json.loads(line) for line in lines])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    result = {
        "label": label,
        "commit": commit.stdout.strip(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "command": shlex.join(["pytest", *command[3:]]),
        "returncode": done.returncode,
        "outcome": (done.stdout.strip().splitlines() or [""])[-1].strip("= "),
        "failed": [line.split()[1] for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))],
        "wall_s": round(wall, 1),
        "user_s": round(after.ru_utime - before.ru_utime, 1),
        "sys_s": round(after.ru_stime - before.ru_stime, 1),
        "machine_cpu_s": None if machine is None or machine_after is None else round(machine_after - machine, 1),
        "tests": sorted(rows, key=lambda r: r["start"]),
        "census": processes,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{label}.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    # pytest's own report (each failure's traceback) beside the run, not committed: too long for the page
    report = Path(tempfile.gettempdir()) / f"suite-{label}.log"
    report.write_text(done.stdout + done.stderr, encoding="utf-8")
    print(f"{result['outcome']}: {wall / 60:.1f} min wall, {(result['user_s'] + result['sys_s']) / 60:.1f} min CPU")
    print(f"pytest's report: {report}")
    return out


def by_file(tests: list[dict]) -> list[dict]:
    """Per test file: its tests, worker, wall seconds (first start to last end) and CPU seconds, longest first.

    >>> rows = [{"test": "a.py::t1", "worker": "gw0", "start": 0, "end": 5, "cpu_self": 1, "cpu_children": 3},
    ...         {"test": "a.py::t2", "worker": "gw0", "start": 5, "end": 6, "cpu_self": 1, "cpu_children": 0},
    ...         {"test": "b.py::t", "worker": "gw1", "start": 0, "end": 2, "cpu_self": 2, "cpu_children": 0}]
    >>> by_file(rows)[0]
    {'file': 'a.py', 'tests': 2, 'worker': 'gw0', 'wall': 6, 'cpu': 5}
    """
    files: dict[str, list[dict]] = defaultdict(list)
    for t in tests:
        files[t["test"].split("::")[0]].append(t)
    out = [
        {
            "file": name,
            "tests": len(rows),
            "worker": "/".join(sorted({r["worker"] for r in rows})),
            "wall": max(r["end"] for r in rows) - min(r["start"] for r in rows),
            "cpu": sum(r["cpu_self"] + r["cpu_children"] for r in rows),
        }
        for name, rows in files.items()
    ]
    return sorted(out, key=lambda f: -f["wall"])


def workers(tests: list[dict], wall: float) -> list[dict]:
    """Per worker: seconds in tests, and the seconds it stood idle at the end while another still ran.

    >>> rows = [{"worker": "gw0", "start": 10, "end": 50}, {"worker": "gw1", "start": 10, "end": 30}]
    >>> [(w["worker"], w["busy"], w["idle_at_end"]) for w in workers(rows, 60)]
    [('gw0', 40, 0), ('gw1', 20, 20)]
    """
    last = max(t["end"] for t in tests)
    out = []
    for name in sorted({t["worker"] for t in tests}):
        rows = [t for t in tests if t["worker"] == name]
        out.append(
            {
                "worker": name,
                "tests": len(rows),
                "busy": sum(t["end"] - t["start"] for t in rows),
                "idle_at_end": last - max(t["end"] for t in rows),
            }
        )
    return out


def render(result: dict, top: int = 15) -> list[str]:
    tests, wall = result["tests"], result["wall_s"]
    cpu = result["user_s"] + result["sys_s"]
    lines = [
        "",
        f"## {result['label']}: commit {result['commit']}, {result['date']}",
        "",
        f"`{result['command']}` on {result['cores']} cores: **{wall / 60:.1f} min** wall, "
        f"{result['user_s'] / 60:.1f} min user + {result['sys_s'] / 60:.1f} min system CPU "
        f"({cpu / wall:.2f} cores busy on average); {result['outcome']}. The first test started "
        f"{_startup(result):.0f} s after pytest did (collection, starting the workers).",
    ]
    if result.get("machine_cpu_s"):
        lines[-1] += (
            f" The whole machine (every process, /proc/stat: servers and browsers too) used "
            f"{result['machine_cpu_s'] / 60:.1f} min of CPU, {result['machine_cpu_s'] / wall:.2f} cores busy."
        )
    if result.get("failed"):
        lines += ["", "Failed: " + ", ".join(f"`{t}`" for t in result["failed"]) + "."]
    lines += [
        "",
        "| worker | tests | seconds in tests | idle at the end (s) |",
        "|---|---|---|---|",
    ]
    for w in workers(tests, wall):
        lines.append(f"| {w['worker']} | {w['tests']} | {w['busy']:.0f} | {w['idle_at_end']:.0f} |")
    files = by_file(tests)
    lines += [
        "",
        f"The {top} longest test files (wall from their first test's start to their last test's end; CPU of the",
        f"worker and the processes it waited for). All {len(files)} files: "
        f"{sum(f['cpu'] for f in files) / 60:.1f} min of CPU.",
        "",
        "| file | tests | worker | wall (s) | CPU (s) |",
        "|---|---|---|---|---|",
    ]
    for f in files[:top]:
        lines.append(f"| `{f['file']}` | {f['tests']} | {f['worker']} | {f['wall']:.0f} | {f['cpu']:.0f} |")
    return lines + render_census(result.get("census"), cpu, top)


def render_census(found: dict | None, cpu: float, top: int = 15) -> list[str]:
    """The census's table: the commands whose processes used the most CPU (runs recorded before the
    census have none)."""
    if not found:
        return []
    lines = [
        "",
        f"The census: {found['processes']} Python processes logged the CPU they used when they exited, "
        f"{found['cpu_s'] / 60:.1f} min together ({found['cpu_s'] / cpu:.0%} of the run's CPU; the rest is "
        "processes that are not Python or were killed, the browsers among them). The "
        f"{top} commands that used the most:",
        "",
        "| command | processes | CPU (s) | CPU a process (s) |",
        "|---|---|---|---|",
    ]
    for name, (n, seconds) in list(found["commands"].items())[:top]:
        lines.append(f"| `{name}` | {n} | {seconds:.0f} | {seconds / n:.1f} |")
    files = [(name, seconds) for name, seconds in found["files"].items() if name.startswith("tests/")]
    lines += [
        "",
        f"The {top} test files whose processes used the most CPU (the processes a test started, servers and queue",
        "workers included, whether or not pytest reaped them; not the worker's own CPU):",
        "",
        "| file | CPU of its processes (s) |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {seconds:.0f} |" for name, seconds in files[:top]]
    return lines


def _startup(result: dict) -> float:
    """Seconds from pytest's start to the first test: the run's wall less the span the tests cover."""
    tests = result["tests"]
    return max(0.0, result["wall_s"] - (max(t["end"] for t in tests) - min(t["start"] for t in tests)))


def file_seconds(folder: Path = RESULTS) -> dict[str, float]:
    """Each test file's wall seconds in the newest run recorded in `folder` (none recorded: empty); the
    suite's order reads it (tests/conftest.py)."""
    runs = load(folder)
    return {f["file"]: f["wall"] for f in by_file(runs[-1]["tests"])} if runs else {}


def load(folder: Path = RESULTS) -> list[dict]:
    return sorted((json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")), key=lambda r: r["date"])


def report() -> str:
    lines = [
        "# Where the test suite's time goes",
        "",
        "Generated by `python benchmarks/time/suite.py report` from the runs under `research/results/suite/`",
        "(`python benchmarks/time/suite.py run`, on an idle machine). The figure `suite.png` shows the latest run's",
        "tests on each worker over time, the longest files named.",
        "",
        "| run | commit | workers | wall (min) | CPU (min) | cores busy | outcome |",
        "|---|---|---|---|---|---|---|",
    ]
    runs = load()
    for r in runs:
        cpu = r["user_s"] + r["sys_s"]
        workers_n = r["command"].split("-n ")[1].split()[0]
        lines.append(
            f"| {r['label']} | {r['commit']} | {workers_n} | {r['wall_s'] / 60:.1f} | {cpu / 60:.1f} "
            f"| {cpu / r['wall_s']:.2f} | {r['outcome']} |"
        )
    for r in runs:
        lines += render(r)
    notes = RESEARCH / "notes" / "suite_notes.md"  # written by hand: what the runs say
    if notes.exists():
        lines += ["", notes.read_text(encoding="utf-8").rstrip()]
    return "\n".join(lines) + "\n"


def figure(result: dict, out: Path, named: int = 10) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tests = result["tests"]
    t0 = min(t["start"] for t in tests) - _startup(result)
    names = [f["file"] for f in by_file(tests)[:named]]
    colours = {name: plt.get_cmap("tab10")(i) for i, name in enumerate(names)}
    rows = sorted({t["worker"] for t in tests})
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.6 * len(rows)))
    for t in tests:
        name = t["test"].split("::")[0]
        ax.barh(
            rows.index(t["worker"]),
            (t["end"] - t["start"]) / 60,
            left=(t["start"] - t0) / 60,
            color=colours.get(name, "0.8"),
            edgecolor="white",
            linewidth=0.2,
        )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[n]) for n in names]
    ax.legend(handles, [n.replace("tests/", "") for n in names], fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_xlim(0, result["wall_s"] / 60)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("minutes since pytest started (grey: the other files; white: no test running)")
    ax.set_title(f"{result['label']} ({result['commit']}): {result['wall_s'] / 60:.1f} min on {len(rows)} workers")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the suite with a timeline into research/results/suite/<label>.json")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--label", default=None, help="the run's name (default: n<workers>)")
    r.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    sub.add_parser("report", help="write research/suite.md and suite.png")
    args = ap.parse_args()
    if args.command == "run":
        run(args.workers, args.label or f"n{args.workers}", args.pytest_args)
    page = report()
    PAGE.write_text(page, encoding="utf-8")
    runs = load()
    if runs:
        figure(runs[-1], FIGURE)
    print(f"wrote {PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
