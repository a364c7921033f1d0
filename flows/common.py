"""What both flows share: the DVC stage order, params overrides, the workspace lock, MLflow checks.

Kept free of Prefect so each piece can be tested (and reused) on its own.
"""

from __future__ import annotations

import io as _io
import json
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import yaml
from filelock import FileLock, Timeout
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from fundgrpo import io
from fundgrpo.cli import OFFLINE
from fundgrpo.params import Params, ParamsError, RegisterParams, from_dict
from fundgrpo.registry import mlflow_registry
from fundgrpo.registry.mlflow_registry import MlflowUnavailable, check_tracking  # noqa: F401 - the flows' names

LOCK_FILE = ".dvc/tmp/fund-grpo-training.lock"  # .dvc/tmp is DVC's own, ignored by git


# ---------------------------------------------------------------------- DVC


def stage_env() -> dict[str, str]:
    """The environment for `dvc repro`: this interpreter's bin first (stage commands run `python`), offline."""

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for key, value in OFFLINE.items():
        env.setdefault(key, value)
    return env


def parse_dot(dot: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(nodes in order, edges) from `dvc dag --dot`.

    >>> parse_dot('strict digraph {\\n"a";\\n"b";\\n"a" -> "b";\\n}')
    (['a', 'b'], [('a', 'b')])
    """
    nodes, edges = [], []
    for line in dot.splitlines():
        edge = re.fullmatch(r'\s*"([^"]+)"\s*->\s*"([^"]+)";?\s*', line)
        node = re.fullmatch(r'\s*"([^"]+)";?\s*', line)
        if edge:
            edges.append((edge.group(1), edge.group(2)))
        elif node:
            nodes.append(node.group(1))
    return nodes, edges


def topological(nodes: list[str], edges: list[tuple[str, str]]) -> list[str]:
    """Upstream first; among stages that are ready, the order of `nodes` (dvc.yaml's).

    >>> topological(["c", "a", "b"], [("a", "b"), ("b", "c")])
    ['a', 'b', 'c']
    """
    upstream = {n: {a for a, b in edges if b == n} for n in nodes}
    order: list[str] = []
    while len(order) < len(nodes):
        ready = [n for n in nodes if n not in order and upstream[n] <= set(order)]
        if not ready:
            raise ValueError(f"dvc dag has a cycle among {sorted(set(nodes) - set(order))}")
        order.append(ready[0])
    return order


def stage_graph(root: Path) -> tuple[list[str], dict[str, set[str]]]:
    """The pipeline's stages in DVC's dependency order, and each stage's upstream stages, read from
    DVC itself (`dvc dag --dot`)."""
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "dag", "--dot", "dvc.yaml"],
        cwd=root,
        env=stage_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"dvc dag failed in {root}: {done.stderr.strip() or done.stdout.strip()}")
    nodes, edges = parse_dot(done.stdout)
    if not nodes:
        raise RuntimeError(f"dvc dag found no stage in {root}/dvc.yaml")
    return topological(nodes, edges), {n: {a for a, b in edges if b == n} for n in nodes}


def stage_order(root: Path) -> list[str]:
    """The pipeline's stages in DVC's dependency order (`stage_graph`)."""
    return stage_graph(root)[0]


def changed_stages(root: Path) -> set[str]:
    """The stages `dvc status` finds changed (deps, params, outputs, command; `always_changed` ones too).

    One DVC process for the whole pipeline: a stage it does not name, and none of whose upstream
    stages reruns, is up to date, so it needs no `dvc repro` process of its own (~1 s of CPU each).
    """
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json"],
        cwd=root,
        env=stage_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"dvc status failed in {root}: {done.stderr.strip() or done.stdout.strip()}")
    return set(status_names(done.stdout))


def status_names(out: str) -> list[str]:
    """The stage names in `dvc status --json` output (its last line: DVC may log before it), named as
    `dvc dag` names them (a stage of another dvc.yaml as "synthetic/dvc.yaml:generate").

    >>> status_names('{"prepare": [{"changed deps": {"params.yaml": "modified"}}], "decisions": ["always changed"]}')
    ['prepare', 'decisions']
    >>> status_names("{}")
    []
    """
    lines = [line for line in out.splitlines() if line.strip()]
    return list(json.loads(lines[-1])) if lines else []


def repro_stage(root: Path, stage: str, log: Callable[[str], None]) -> bool:
    """`dvc repro --single-item <stage>`, output streamed line by line to `log`; True when it ran.

    Raises RuntimeError with the output's tail when DVC fails.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "dvc", "repro", "--single-item", stage],
        cwd=root,
        env=stage_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    tail: list[str] = []
    ran = False
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.rstrip()
        if not line:
            continue
        log(line)
        tail = (tail + [line])[-30:]
        ran = ran or line.startswith(f"Running stage '{stage}'")
    code = proc.wait()
    if code != 0:
        raise RuntimeError(f"stage {stage!r} failed (dvc repro exit {code}):\n" + "\n".join(tail))
    return ran


# ----------------------------------------------------------------- overrides


def _value(text: str):
    """A value as `dvc exp run -S` reads it: YAML 1.2 (numbers, booleans, lists), else text.

    >>> _value("0.04"), _value("3e-4"), _value("true"), _value("[1, 2]"), _value("abc")
    (0.04, 0.0003, True, [1, 2], 'abc')
    """

    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return text


def _float(representer, value: float):
    """Write a float so PyYAML (the params loader) reads it back as a float: 1e-05 -> 1.0e-05.

    >>> import io; from ruamel.yaml import YAML
    >>> rt = YAML(); rt.representer.add_representer(float, _float); out = io.StringIO()
    >>> rt.dump({"lr": 1e-05, "beta": 0.04}, out); out.getvalue().splitlines()
    ['lr: 1.0e-05', 'beta: 0.04']
    """
    text = repr(value)
    if "e" in text:  # PyYAML needs a dot and a signed exponent
        mantissa, exponent = text.split("e")
        text = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{int(exponent):+03d}"
    return representer.represent_scalar("tag:yaml.org,2002:float", text)


@contextmanager
def restored(path: Path, log: Callable[[str], None] = print) -> Iterator[None]:
    """Put `path` back as it was when the block ends, however it ends (flow overrides are for one run)."""
    before = path.read_bytes()
    try:
        yield
    finally:
        if path.read_bytes() != before:
            with io.atomic_path(path) as tmp:
                tmp.write_bytes(before)
            log(f"{path.name} restored: the overrides applied to this run only")


@contextmanager
def outputs_kept(root: Path, log: Callable[[str], None] = print) -> Iterator[None]:
    """Put the pipeline's outputs back as they were when the block ends, however it ends: `dvc.lock`
    and the small files it names (metrics and plots, which DVC does not cache) restored byte for
    byte, then `dvc checkout` lays every cached output from DVC's cache (a quick run's models and
    figures are for checking the wiring, not for the workspace)."""
    lock = root / "dvc.lock"
    kept = {lock: lock.read_bytes() if lock.exists() else None}
    for out in locked_outputs(lock):
        path = root / out
        if path.is_file() and path.stat().st_size <= 16 * 2**20:
            kept[path] = path.read_bytes()
    try:
        yield
    finally:
        for path, before in kept.items():
            if before is None:
                path.unlink(missing_ok=True)
            elif not path.exists() or path.read_bytes() != before:
                with io.atomic_path(path) as tmp:
                    tmp.write_bytes(before)
        done = subprocess.run(
            [sys.executable, "-m", "dvc", "checkout", "--force", "--quiet"],
            cwd=root,
            env=stage_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"dvc checkout failed in {root}: {(done.stderr or done.stdout).strip()[-2000:]}")
        log("dvc.lock and the outputs it names restored from DVC's cache: the quick run changed nothing")


def locked_outputs(lock: Path) -> list[str]:
    """Every output path `dvc.lock` names (empty without a lock)."""
    if not lock.exists():
        return []
    stages = (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages") or {}
    return [o["path"] for stage in stages.values() for o in stage.get("outs") or [] if "path" in o]


def apply_overrides(path: Path, overrides: dict[str, str]) -> list[str]:
    """Set `section.key=value` pairs in params.yaml (comments kept), like `dvc exp run -S`.

    The result must still load as `Params` (an unknown key is an error naming it);
    the file is replaced atomically. Returns the changes as "key=value" lines.
    """

    rt = YAML()  # round trip: comments and order survive
    rt.preserve_quotes = True
    rt.representer.add_representer(float, _float)
    data = rt.load(path.read_text(encoding="utf-8")) or {}
    changes = []
    for key, text in overrides.items():
        parts = str(key).split(".")
        if not all(parts):
            raise ParamsError(f"override {key!r}: expected section.key=value")
        node = data
        for part in parts[:-1]:
            if part not in node:
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise ParamsError(f"override {key!r}: {part!r} is not a section")
        node[parts[-1]] = _value(str(text))
        changes.append(f"{key}={text}")
    buffer = _io.StringIO()
    rt.dump(data, buffer)
    text = buffer.getvalue()
    from_dict(Params, yaml.safe_load(text) or {})  # refuse unknown keys or wrong types before writing
    io.write_text(text, path)
    return changes


# ---------------------------------------------------------------------- lock


@contextmanager
def workspace_lock(root: Path, timeout_s: float = -1, log: Callable[[str], None] = print) -> Iterator[Path]:
    """Hold the cross-process training lock of `root` (wait up to `timeout_s`; -1 waits forever).

    Two training runs queue instead of colliding: DVC's own lock would fail the second
    at once, and the registry's alias move must happen one run at a time.
    """

    path = root / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log(f"another training run holds {path}; waiting" + ("" if timeout_s < 0 else f" up to {timeout_s:g} s"))
        try:
            lock.acquire(timeout=timeout_s)
        except Timeout as err:
            raise TimeoutError(f"another training run still holds {path} after {timeout_s:g} s") from err
    try:
        yield path
    finally:
        lock.release()


# -------------------------------------------------------------------- MLflow


def tracking_uri(register: RegisterParams, root: Path) -> str:
    """The tracking URI as the stages see it from `root` (MLFLOW_TRACKING_URI wins over params),
    a relative sqlite path made absolute so this process and the stages share one store."""

    return mlflow_registry.local_uri(mlflow_registry.tracking_uri(register), root)


def markdown_artifact(key: str, markdown: str, description: str, log: Callable[[str], None]) -> None:
    """A markdown artifact of the run (Prefect UI, Artifacts). A server that cannot be reached loses only
    the artifact: the run's journal and final message keep what it says, and the run does not fail for it."""
    from prefect.artifacts import create_markdown_artifact

    try:
        create_markdown_artifact(markdown=markdown, key=key, description=description)
    except Exception as err:  # noqa: BLE001 - the decision is made and recorded; only its display is lost
        log(f"artifact {key!r} not recorded ({type(err).__name__}: {err}): is the Prefect server reachable?")
