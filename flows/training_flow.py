"""Prefect flow `training`: the DVC pipeline, one task per stage, ending in the registry gate.

DVC owns the DAG (dvc.yaml), the caching and the skip decisions: the run asks `dvc status` once,
then each task runs `dvc repro --single-item <stage>` in DVC's own order (`dvc dag`) for a stage
DVC found changed or one downstream of a stage that ran; any other is up to date by DVC's own
status and skipped without a DVC process, while the Prefect UI still shows every stage's state,
duration and log.
The last stage, register, logs the candidate to MLflow and moves `champion` only through
the gate; the flow returns (and logs) that decision from metrics/register.json.

Overrides are `dvc exp run -S` pairs: the flow parameter {"grpo.beta": "0.04"} is the
CLI's `dvc exp run -S grpo.beta=0.04`; they are written to params.yaml for this run only and the
file is restored when the run ends, however it ends, so the next scheduled run trains with the
committed parameters again (DVC then sees them differ from dvc.lock and reruns what they touch).

A whole run holds a file lock on the workspace, so two runs queue instead of colliding
(DVC's own lock would fail the second at once) and alias moves happen one at a time.
A stage that fails after its retries fails the flow: the stages write atomically, so
the earlier outputs, the registry and the champion stay as they were.

    python -m flows.training_flow                              # one run, here
    python -m flows.training_flow grpo.learning_rate=0.0001    # with overrides
"""

from __future__ import annotations

import json
import logging
import sys
from contextlib import nullcontext
from pathlib import Path

from prefect import flow, get_run_logger, runtime, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed

from flows import common, journal
from fundgrpo.cli import lean_exit
from fundgrpo.params import load_params

REGISTER = "register"
# `quick=True`: minutes instead of hours, to check a deployment end to end (dvc exp run -S pairs).
# A wiring check registers nothing (no version, no alias) and leaves the workspace's outputs as they were.
QUICK = {"sft.epochs": "1", "grpo.max_steps": "4", "grpo.eval_steps": "2", "grpo.save_steps": "2"}


@task(name="params", cache_policy=NO_CACHE)
def apply_params(root: str, overrides: dict[str, str]) -> list[str]:
    changes = common.apply_overrides(Path(root) / "params.yaml", overrides)
    get_run_logger().info("params.yaml: %s (CLI: dvc exp run -S %s)", ", ".join(changes), " -S ".join(changes))
    return changes


@task(name="mlflow-check", cache_policy=NO_CACHE)
def mlflow_check(uri: str) -> str:
    status = common.check_tracking(uri)
    get_run_logger().info(status)
    return status


@task(name="dvc-status", cache_policy=NO_CACHE)
def dvc_status(root: str) -> set[str]:
    changed = common.changed_stages(Path(root))
    get_run_logger().info("dvc status: %s", ", ".join(sorted(changed)) or "every stage up to date")
    return changed


@task(name="dvc-stage", task_run_name="{stage}", cache_policy=NO_CACHE)
def dvc_stage(root: str, stage: str, needed: bool = True):
    """One DVC stage; its result is True when DVC ran it, False when it was up to date (a Completed
    state named "Skipped", so the Prefect UI shows which stages ran and which DVC skipped). `needed`
    False: `dvc status` found it and everything upstream of it up to date, so no `dvc repro` is started."""
    logger = get_run_logger()
    if not needed:
        logger.info("%s: up to date (dvc status), skipped", stage)
        return Completed(name="Skipped", message="up to date: dvc status", data=False)
    if common.repro_stage(Path(root), stage, logger.info):
        return Completed(message="ran", data=True)
    return Completed(name="Skipped", message="up to date: DVC skipped it", data=False)


@task(name="reconcile", cache_policy=NO_CACHE)
def reconcile_task(root: str) -> list[str]:
    return journal.reconcile(Path(root), get_run_logger().info)


@task(name="gate-decision", cache_policy=NO_CACHE)
def read_decision(path: str) -> dict | None:
    file = Path(path)
    return json.loads(file.read_text(encoding="utf-8")) if file.exists() else None


def report(stages: list[str], ran: list[str], decision: dict | None, registered: bool, message: str) -> str:
    """The run as a markdown table: each stage ran or skipped, and the gate's decision.

    >>> print(report(["prepare", "register"], ["register"], {"version": 3, "promoted": True, "alias": "champion",
    ...       "metric": "qwk", "candidate": 0.8, "baseline": 0.7, "baseline_name": "rule", "reason": "r"}, True, "m"))
    ### m
    <BLANKLINE>
    | stage | DVC |
    |---|---|
    | prepare | skipped (up to date) |
    | register | ran |
    <BLANKLINE>
    | gate | version | alias | qwk | against | reason |
    |---|---|---|---|---|---|
    | promoted | v3 | champion | 0.8 | rule 0.7 | r |
    """
    out = [f"### {message}", "", "| stage | DVC |", "|---|---|"]
    out += [f"| {s} | {'ran' if s in ran else 'skipped (up to date)'} |" for s in stages]
    if decision is not None:
        d = decision
        verdict = ("promoted" if d["promoted"] else "refused") if registered else "no new candidate (last decision)"
        out += [
            "",
            f"| gate | version | alias | {d.get('metric', 'metric')} | against | reason |",
            "|---|---|---|---|---|---|",
            f"| {verdict} | v{d['version']} | {d.get('alias', '')} | {d.get('candidate')} "
            f"| {d.get('baseline_name', '')} {d.get('baseline')} | {d['reason']} |",
        ]
    return "\n".join(out)


def describe(decision: dict | None, registered: bool) -> str:
    """One line for the log and the flow result.

    >>> describe({"model_name": "m", "version": 2, "promoted": False, "reason": "qwk 0.3 does not beat x"}, True)
    'm v2 kept as challenger: qwk 0.3 does not beat x'
    >>> describe(None, False)
    'pipeline up to date: no new candidate, no decision on record'
    """
    if decision is None:
        return "pipeline up to date: no new candidate, no decision on record"
    verb = "promoted to champion" if decision["promoted"] else "kept as challenger"
    line = f"{decision['model_name']} v{decision['version']} {verb}: {decision['reason']}"
    return line if registered else f"pipeline up to date: no new candidate (last decision: {line})"


@flow(name="training")
def training(
    root: str = ".",
    overrides: dict[str, str] | None = None,
    retries: int = 2,
    retry_delay_s: float = 30.0,
    lock_timeout_s: float = -1,
    quick: bool = False,
) -> dict:
    """Run the DVC stages (retrying transient failures), register, gate; return the decision.
    `quick`: a short run to check the wiring (QUICK's overrides under any given ones, for this run only):
    every stage but `register`, then the workspace's outputs put back (dvc.lock and `dvc checkout`)."""
    if quick:
        overrides = {**QUICK, **(overrides or {})}

    logger = get_run_logger()
    workspace = Path(root).resolve()
    reconcile_task(str(workspace))  # earlier runs the server lost track of (flows/journal.py)
    record = journal.Journal(workspace, runtime.flow_run.id)
    run_loggers = [logging.getLogger(name) for name in ("prefect.flow_runs", "prefect.task_runs")]
    for run_logger in run_loggers:
        run_logger.addHandler(record)
    try:
        with (
            common.workspace_lock(workspace, lock_timeout_s, logger.info),
            common.restored(workspace / "params.yaml", logger.info),
            common.outputs_kept(workspace, logger.info) if quick else nullcontext(),
        ):
            if overrides:
                record.task(apply_params, str(workspace), overrides)
            params = load_params(workspace / "params.yaml")
            uri = common.tracking_uri(params.register, workspace)
            check = mlflow_check.with_options(retries=retries, retry_delay_seconds=retry_delay_s)
            record.task(check, uri)  # fail before hours of training, not after
            stages, upstream = common.stage_graph(workspace)
            changed = record.task(dvc_status, str(workspace))
            if quick:  # a wiring check: nothing registered, no alias moved
                stages = [s for s in stages if s != REGISTER]
            logger.info("stages in DVC order: %s", " -> ".join(stages))
            ran: list[str] = []
            for stage in stages:
                if stage == REGISTER:
                    record.task(check, uri)  # again: nothing may be half-registered
                task_ = dvc_stage.with_options(retries=retries, retry_delay_seconds=retry_delay_s)
                needed = stage in changed or bool(upstream[stage] & set(ran))
                if record.task(task_, str(workspace), stage, needed, label=stage):
                    ran.append(stage)
            decision = None if quick else record.task(read_decision, str(workspace / params.register.decision))
        registered = REGISTER in ran
        message = (
            f"quick run: the wiring works ({len(ran)} of {len(stages)} stages ran); nothing registered, "
            "the workspace's outputs restored"
            if quick
            else describe(decision, registered)
        )
        logger.info(message)
        common.markdown_artifact(
            "training-gate", report(stages, ran, decision, registered, message), message, logger.warning
        )
        record.finish("COMPLETED", message)
    except BaseException as e:
        record.finish("FAILED", f"{type(e).__name__}: {e}")
        raise
    finally:
        for run_logger in run_loggers:
            run_logger.removeHandler(record)
    result = {"stages": stages, "stages_run": ran, "registered": registered, "decision": decision, "message": message}
    return Completed(message=message, data=result)  # the gate's decision is the run's state message


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.training_flow [key=value ...]`: one run in this folder."""
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["-h"], ["--help"]):
        print(f"usage: python -m flows.training_flow [KEY=VALUE ...]\n\n{__doc__}")
        return 0
    bad = [a for a in argv if "=" not in a]
    if bad:
        print(f"expected key=value overrides (as for dvc exp run -S), got {bad}", file=sys.stderr)
        return 2
    lean_exit()
    result = training(overrides=dict(a.split("=", 1) for a in argv) or None)
    print(result["message"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
