"""Hyperparameter sweeps as queued DVC experiments, and one table comparing them.

`plan()` turns one-factor-at-a-time factors into `dvc exp run --queue` command lines
(DVC's own sweep syntax, `-S 'grpo.loss_type=grpo,dr_grpo'`); tools/sweep.py runs them.
`compare()` joins `dvc exp show --json` (params, metrics/*.json) with the MLflow runs the
register stage logged (tagged `dvc.exp_name`) into one pandas table; tools/compare_runs.py
prints and writes it. DVC is called through its command line (its Python API is not stable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fundgrpo.params import Params, ParamsError, from_dict, load_params
from fundgrpo.registry import mlflow_registry

# One factor at a time around params.yaml's values (a value equal to the current one is dropped).
DEFAULT_FACTORS = {
    "grpo.loss_type": ["grpo", "dr_grpo", "dapo", "cispo"],
    "grpo.num_generations": [4, 16],
    "grpo.beta": [0.0, 0.04],
    "grpo.reward_weights.grade": [1.0, 4.0],
}


def dvc_env() -> dict[str, str]:
    """The environment for dvc subprocesses: this interpreter's bin first (the queue workers
    DVC spawns run `dvc` from PATH and inherit this environment), telemetry off."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def dvc(args: list[str], root: Path, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["dvc", *args], cwd=root, env=dvc_env(), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"dvc {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


# ------------------------------------------------------------------------ planning


def get(data: dict, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def with_value(data: dict, key: str, value: Any) -> dict:
    """A copy of the nested dict with `key` (dotted) set."""
    head, _, rest = key.partition(".")
    out = dict(data)
    out[head] = with_value(out.get(head) or {}, rest, value) if rest else value
    return out


def parse_factor(text: str) -> tuple[str, list[Any]]:
    """'grpo.beta=0.0,0.04' -> ('grpo.beta', [0.0, 0.04]); values read as YAML, as DVC does.

    >>> parse_factor("grpo.loss_type=grpo,dr_grpo")
    ('grpo.loss_type', ['grpo', 'dr_grpo'])
    """
    key, sep, values = text.partition("=")
    if not sep or not key or not values:
        raise ValueError(f"expected KEY=V1,V2,...; got {text!r}")
    return key.strip(), [yaml.safe_load(v.strip()) for v in values.split(",")]


def check_member(data: dict) -> None:
    """Refuse a sweep member the pipeline would refuse later (after minutes in the queue)."""
    params: Params = from_dict(Params, data)
    g = params.grpo
    completions = g.per_device_train_batch_size * g.gradient_accumulation_steps
    if completions % g.num_generations:
        raise ParamsError(
            f"grpo.num_generations={g.num_generations} does not divide the {completions} completions per step "
            f"(per_device_train_batch_size x gradient_accumulation_steps); TRL refuses it. "
            f"Pick a divisor, or sweep per_device_train_batch_size with it in a separate run"
        )


def plan(params: dict, factors: dict[str, list[Any]], common: dict[str, Any]) -> list[list[str]]:
    """`dvc exp run --queue` argument lists: one per factor, DVC's `-S key=v1,v2` sweep syntax.

    `params` is params.yaml as a dict; `common` overrides go into every member (and, when they
    change training, into one control member with no factor changed, the sweep's like-for-like
    baseline). Values equal to the current ones are dropped; every member is checked first.

    >>> p = {"grpo": {"loss_type": "dapo", "max_steps": 100, "per_device_train_batch_size": 8, "num_generations": 4}}
    >>> plan(p, {"grpo.loss_type": ["grpo", "dapo"]}, {"register.promote": False})
    [['exp', 'run', '--queue', '-S', 'grpo.loss_type=grpo', '-S', 'register.promote=false']]
    >>> [c[4:] for c in plan(p, {"grpo.loss_type": ["grpo"]}, {"grpo.max_steps": 2})]
    [['grpo.max_steps=2'], ['grpo.loss_type=grpo', '-S', 'grpo.max_steps=2']]
    >>> plan(p, {"grpo.num_generations": [16]}, {})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fundgrpo.params.ParamsError: grpo.num_generations=16 does not divide the 8 completions per step
    (per_device_train_batch_size x gradient_accumulation_steps); TRL refuses it.
    Pick a divisor, or sweep per_device_train_batch_size with it in a separate run
    """
    base = params
    for key, value in common.items():
        base = with_value(base, key, value)
    check_member(base)
    common_args = [a for key, value in common.items() for a in ("-S", f"{key}={dump(value)}")]
    commands = []
    if any(get(params, k) != v for k, v in common.items() if not k.startswith("register.")):
        commands.append(["exp", "run", "--queue", *common_args])  # the control
    for key, values in factors.items():
        if key in common:
            raise ParamsError(f"{key} is both swept and fixed")
        kept = [v for v in values if v != get(params, key)]
        for value in kept:
            check_member(with_value(base, key, value))
        if kept:
            commands.append(["exp", "run", "--queue", "-S", f"{key}={','.join(dump(v) for v in kept)}", *common_args])
    return commands


def dump(value: Any) -> str:
    """A value as `-S` text: false, 0.04, dr_grpo."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def uncached_untracked_outputs(root: Path, skip: tuple[str, ...] = ("grpo", "backtest", "register")) -> list[str]:
    """Outputs in dvc.yaml with `cache: false` that git ignores and that exist here.

    A queued experiment runs in a fresh git copy, where these are missing, so DVC would rerun
    their stages (validate, baseline: minutes) in every member; tools/sweep.py copies them in
    (`dvc exp run -C`). The stages a GRPO sweep reruns anyway (`skip`) start clean.
    """
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    paths = []
    for name, stage in stages.items():
        if name in skip:
            continue
        for kind in ("outs", "metrics", "plots"):
            for out in stage.get(kind) or []:
                if isinstance(out, dict):
                    [(path, opts)] = out.items()
                    if (opts or {}).get("cache") is False and (root / path).exists():
                        # DVC copies a file without making its folder: copy the folder
                        paths.append(path if (root / path).is_dir() else str(Path(path).parent))
    paths = sorted(set(paths) - {"."})
    if not paths:
        return []
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=root, capture_output=True, text=True).stdout.split()
    return [p for p in paths if p in ignored]


def start_queue(root: Path, jobs: int) -> str:
    """`dvc queue start -j jobs`; returns its message.

    Its output goes to a file, not a pipe: the worker it leaves behind holds the output open
    until the queue is empty, and reading a pipe would wait for that.
    """

    with tempfile.TemporaryFile("w+") as out:
        code = subprocess.run(
            ["dvc", "queue", "start", "-j", str(jobs)], cwd=root, env=dvc_env(), stdout=out, stderr=subprocess.STDOUT
        ).returncode
        out.seek(0)
        text = out.read().strip()
    if code != 0:
        raise RuntimeError(f"dvc queue start failed ({code}): {text}")
    return text


def needs_worker(states: dict[str, str]) -> bool:
    """True when a member waits and none runs: no queue worker is taking it.

    DVC's worker stops itself when its monitor sees an empty queue, and under load it can
    do so with experiments still queued (treeverse/dvc#10562): they then wait forever.

    >>> needs_worker({"a": "Success", "b": "Queued"})
    True
    >>> needs_worker({"a": "Running", "b": "Queued"}), needs_worker({"a": "Success"})
    (False, False)
    """
    values = set(states.values())
    return "Queued" in values and "Running" not in values


def start_now(
    states: dict[str, str], queue_started: bool, stalled_since: float | None, now: float, restart_after: float
) -> tuple[bool, float | None]:
    """(start the queue now?, since when members have waited with none running).

    The first time at once; afterwards only when the stall has lasted `restart_after`
    seconds: between two members a live worker leaves the next one queued for a moment.

    >>> start_now({"a": "Queued"}, False, None, 0.0, 30.0)
    (True, 0.0)
    >>> start_now({"a": "Success", "b": "Queued"}, True, None, 50.0, 30.0)  # a just finished: wait and see
    (False, 50.0)
    >>> start_now({"a": "Success", "b": "Queued"}, True, 50.0, 70.0, 30.0)
    (False, 50.0)
    >>> start_now({"a": "Success", "b": "Queued"}, True, 50.0, 81.0, 30.0)  # the worker is gone
    (True, 81.0)
    >>> start_now({"a": "Success", "b": "Running"}, True, 50.0, 81.0, 30.0)
    (False, None)
    """
    if not needs_worker(states):
        return False, None
    if not queue_started or (stalled_since is not None and now - stalled_since >= restart_after):
        return True, now
    return False, now if stalled_since is None else stalled_since


def wait(
    root: Path, names: list[str], jobs: int, poll: float, timeout: float | None = None, restart_after: float = 30.0
) -> dict[str, str]:
    """Start the queue and wait until none of `names` is Queued or Running; returns their states.

    The queue is (re)started whenever a member has been waiting with none running for
    `restart_after` seconds (longer than a live worker takes to pick the next one up; a
    worker already there makes `dvc queue start` a no-op). After `timeout` seconds, raises
    TimeoutError with the queue's status and the running members' log tails.
    """
    started = time.monotonic()
    queue_started, stalled_since = False, None
    last = None
    while True:
        now = time.monotonic()
        states = queue_states(root)
        mine = {n: states.get(n, "?") for n in names}
        summary = ", ".join(
            f"{s} {sum(v == s for v in mine.values())}"
            for s in ("Queued", "Running", "Success", "Failed")
            if s in mine.values()
        )
        if summary != last:
            print(f"[{now - started:6.0f} s] {summary}", flush=True)
            last = summary
        if not any(s in ("Queued", "Running") for s in mine.values()):
            return mine
        start, since = start_now(mine, queue_started, stalled_since, now, restart_after)
        if start:
            if queue_started and stalled_since is not None:
                print(
                    f"[{now - started:6.0f} s] members queued, none running for {now - stalled_since:.0f} s: "
                    "starting the queue again",
                    flush=True,
                )
            print(start_queue(root, jobs), flush=True)
            queue_started = True
        stalled_since = since
        if timeout is not None and now - started > timeout:
            logs = "".join(
                f"\n--- dvc queue logs {n} (last 2000 characters):\n"
                f"{dvc(['queue', 'logs', n], root, check=False).stdout[-2000:]}"
                for n, s in mine.items()
                if s == "Running"
            )
            raise TimeoutError(
                f"sweep not done after {timeout:.0f} s: {summary}\n"
                f"{dvc(['queue', 'status'], root, check=False).stdout}{logs}\n"
                f"the queue is left as it is: `dvc queue status`, `dvc queue kill NAME`, `dvc queue stop`"
            )
        time.sleep(poll)


def queue_states(root: Path) -> dict[str, str]:
    """{experiment name: status} from `dvc queue status` (Queued, Running, Success, Failed)."""
    states = {}
    for line in dvc(["queue", "status"], root).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[-1] in ("Queued", "Running", "Success", "Failed"):
            states[parts[1]] = parts[-1]
    return states


# ---------------------------------------------------------------------- comparing

COLUMNS = {  # table column -> dotted path in a row's params/metrics
    "loss_type": "params.grpo.loss_type",
    "num_generations": "params.grpo.num_generations",
    "beta": "params.grpo.beta",
    "max_steps": "params.grpo.max_steps",
    "train_reward": "grpo.reward_last",
    "eval_reward": "grpo.best_eval_reward",
    "exact": "backtest.models.grpo.exact",
    "within_one": "backtest.models.grpo.within_one",
    "qwk": "backtest.models.grpo.qwk",
    "spearman": "backtest.models.grpo.spearman",
    "valid_json": "backtest.models.grpo.valid_json",
}
WEIGHTS = ("json", "grade", "score", "evidence", "length", "judge")
MLFLOW_METRICS = {  # table column -> MLflow metric of the register stage's run (fills gaps)
    "train_reward": "grpo.reward_last",
    **{m: f"backtest.grpo.{m}" for m in ("exact", "within_one", "qwk", "spearman", "valid_json")},
}


def dvc_rows(show: list[dict]) -> list[dict]:
    """Flatten `dvc exp show --json`: the baseline commit(s) and their experiments, one dict each."""

    def row(rev: dict, name: str, baseline: str, state: str) -> dict:
        data = rev.get("data") or {}
        metrics = {Path(k).stem: (v or {}).get("data", {}) for k, v in (data.get("metrics") or {}).items()}
        if state not in ("baseline", "success"):
            metrics = {}  # a queued, running or failed member shows its baseline's metrics files
        params = ((data.get("params") or {}).get("params.yaml") or {}).get("data", {})
        return {"exp": name, "rev": rev["rev"][:7], "baseline": baseline, "state": state, "params": params, **metrics}

    rows = []
    for commit in show:
        if commit["rev"] == "workspace":
            continue
        rows.append(row(commit, commit.get("name") or commit["rev"][:7], commit["rev"], "baseline"))
        for exp in commit.get("experiments") or []:
            state = ((exp.get("executor") or {}).get("state") or "success").lower()
            rows.append(row(exp["revs"][0], exp.get("name") or exp["revs"][0]["rev"][:7], commit["rev"], state))
    return rows


def weights_text(params: dict) -> str | None:
    """'json 1 / grade 2 / ...' for the weights that are on (compact, for the table)."""
    weights = get(params, "grpo.reward_weights") or {}
    return " / ".join(f"{k} {weights[k]:g}" for k in WEIGHTS if weights.get(k)) or None


def mlflow_runs(tracking_uri: str, experiment: str):
    """The register stage's runs, newest first, as a DataFrame (`run_id`, `tags.*`, `metrics.*`
    columns, as mlflow.search_runs names them), or None when there are none.

    Through a client: `mlflow.set_tracking_uri` would also export MLFLOW_TRACKING_URI to every
    later subprocess of this process (MLflow 3 does), queue workers included.
    """
    from mlflow import MlflowClient

    if tracking_uri.startswith("sqlite:///") and not Path(tracking_uri[len("sqlite:///") :]).exists():
        return None  # no store yet (and reading must not create one)
    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=5000)
    rows = [
        {
            "run_id": r.info.run_id,
            **{f"tags.{k}": v for k, v in r.data.tags.items()},
            **{f"metrics.{k}": v for k, v in r.data.metrics.items()},
        }
        for r in runs
    ]
    return pd.DataFrame(rows) if rows else None


def compare(root: Path, names: list[str] | None = None, tracking_uri: str | None = None):
    """One table: a row per DVC experiment (and its baseline commit), MLflow's run beside it.

    Rows are matched to MLflow runs by the `dvc.exp_name` tag, else by the run id in the
    row's metrics/register.json (the baseline commit's run has no experiment name). MLflow
    fills metrics DVC lacks. `names`: only these experiments (the baseline rows are kept).
    """

    show = json.loads(dvc(["exp", "show", "--json"], root).stdout)
    rows = [r for r in dvc_rows(show) if names is None or r["state"] == "baseline" or r["exp"] in names]
    register = load_params(root / "params.yaml").register
    uri = mlflow_registry.local_uri(tracking_uri or mlflow_registry.tracking_uri(register), root)
    runs = mlflow_runs(uri, register.experiment)

    table = []
    for r in rows:
        out = {"exp": r["exp"], "rev": r["rev"], "state": r["state"]}
        flat = {"params": r["params"], "grpo": r.get("grpo", {}), "backtest": r.get("backtest", {})}
        out.update({col: get(flat, path) for col, path in COLUMNS.items()})
        out["reward_weights"] = weights_text(r["params"])
        decision = r.get("register") or {}
        if decision:
            passed = decision.get("gate_passed", decision.get("promoted"))
            out["gate"] = f"{decision.get('alias')} (gate {'passed' if passed else 'failed'})"
        run = None
        if runs is not None:
            tagged = (
                runs[runs["tags.dvc.exp_name"] == r["exp"]] if "tags.dvc.exp_name" in runs.columns else runs.iloc[:0]
            )
            by_id = runs[runs["run_id"] == decision.get("run_id")]
            match = tagged if len(tagged) else by_id
            run = match.iloc[0] if len(match) else None
        if run is not None:
            out["mlflow_run"] = run["run_id"][:8]
            for col, metric in MLFLOW_METRICS.items():
                if out.get(col) is None and f"metrics.{metric}" in run:
                    out[col] = run[f"metrics.{metric}"]
            if "gate" not in out and "tags.gate.promote" in run:
                out["gate"] = f"gate.promote={run['tags.gate.promote']}"
        table.append(out)
    order = [
        "exp",
        "rev",
        "state",
        "loss_type",
        "num_generations",
        "beta",
        "reward_weights",
        "max_steps",
        "train_reward",
        "eval_reward",
        "exact",
        "within_one",
        "qwk",
        "spearman",
        "valid_json",
        "gate",
        "mlflow_run",
    ]
    return pd.DataFrame(table, columns=order)


def write(table, out_dir: Path) -> str:
    """Write comparison.md and comparison.csv under out_dir; return the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = table.astype(object).where(table.notna(), None).to_markdown(index=False, floatfmt=".4g", missingval="")
    (out_dir / "comparison.md").write_text(markdown + "\n", encoding="utf-8")
    table.to_csv(out_dir / "comparison.csv", index=False)
    return markdown
