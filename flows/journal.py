"""A flow run's own record in the workspace, and the reconciliation that makes the Prefect
server's record true again after the server was unreachable.

The Prefect client sends task states and logs to the server as they happen. When the server is
stopped mid-run for longer than the client's retries (measured with a server stopped for a
minute), the work still finishes, but on the server the run stays `Running` forever, the task
that was running stays `Running`, later tasks are missing and their logs are gone. So a training
run also writes `reports/flow-runs/<flow_run_id>.jsonl`: its log records, each task's final
state, and the run's own final state. `reconcile` compares every unreconciled journal with the
server and sets what differs: the task runs' and the flow run's final states (forced, the
message naming the journal; a task run the journal has no outcome for and the server left unfinished
or without a state becomes `Crashed`) and the missing log lines. It runs at the start of every training
run and as

    python -m flows.journal            # reconcile this workspace's journals now (after a restart)

A run whose process died before its end has no final record: it is left to Prefect's own
crash detection (the worker reports the process as crashed).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from uuid import UUID

if TYPE_CHECKING:
    from prefect import Task

from fundgrpo.params import FlowsParams, ParamsError, load_params

FINAL = {"COMPLETED": "Completed", "FAILED": "Failed"}


def folder(root: Path | str) -> Path:
    """Where the workspace's flow runs keep their journals (`flows.journal_dir` in its params.yaml)."""
    try:
        journal_dir = load_params(Path(root) / "params.yaml").flows.journal_dir
    except ParamsError:  # the run still gets its journal; the flow reports the bad params itself
        journal_dir = FlowsParams().journal_dir
    return Path(root) / journal_dir


class Journal(logging.Handler):
    """Appends the run's log records, task outcomes and final state to its JSONL file."""

    def __init__(self, root: Path, flow_run_id: UUID | str):
        super().__init__(level=logging.INFO)
        self.flow_run_id = str(flow_run_id)
        self.path = folder(root) / f"{self.flow_run_id}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, row: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")

    def emit(self, record: logging.LogRecord) -> None:
        if str(getattr(record, "flow_run_id", "")) != self.flow_run_id:
            return  # another run's, or not a run logger's
        task_run_id = getattr(record, "task_run_id", None)
        self.write(
            {
                "kind": "log",
                "name": record.name,
                "level": record.levelno,
                "message": record.getMessage(),
                "timestamp": record.created,
                "task_run_id": str(task_run_id) if task_run_id else None,
            }
        )

    def task(self, task_: Task, *args: Any, label: str | None = None) -> Any:
        """Run a task, record its final state, return its result (raising as the task did)."""
        state = task_(*args, return_state=True)
        self.write(
            {
                "kind": "task",
                "task_run_id": str(state.state_details.task_run_id),
                "name": label or task_.name,
                "state": state.type.value,
                "state_name": state.name,
                "message": state.message or "",
            }
        )
        return state.result()

    def finish(self, state: str, message: str) -> None:
        self.write({"kind": "flow", "state": state, "message": message, "timestamp": time.time()})


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def reconcile(root: Path, log: Callable[[str], None] = print) -> list[str]:
    """Make the server's record of each finished, unreconciled run in `root` match its journal;
    one line per run changed."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import LogCreate
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, LogFilter, LogFilterFlowRunId
    from prefect.exceptions import ObjectNotFound
    from prefect.states import State, StateType

    changed = []
    journals = folder(root)
    with get_client(sync_client=True) as client:
        for path in sorted(journals.glob("*.jsonl")) if journals.exists() else []:
            rows = read(path)
            final = next((r for r in rows if r["kind"] == "flow"), None)
            if final is None or any(r["kind"] == "reconciled" for r in rows):
                continue
            try:
                run = client.read_flow_run(UUID(path.stem))
            except ObjectNotFound:  # another server's run: nothing to correct here
                continue
            note = f"reconciled from {path}: the Prefect server was unreachable when the run reported it"
            fixes, known = [], set()
            for t in (r for r in rows if r["kind"] == "task"):
                try:
                    task_run = client.read_task_run(UUID(t["task_run_id"]))
                except ObjectNotFound:
                    fixes.append(f"task {t['name']} {t['state_name']} (missing on the server; its logs restored)")
                    continue
                known.add(t["task_run_id"])
                if task_run.state is None or task_run.state.type.value != t["state"]:
                    client.set_task_run_state(
                        task_run.id,
                        State(
                            type=StateType(t["state"]), name=t["state_name"], message=f"{t['message']} ({note})".strip()
                        ),
                        force=True,
                    )
                    fixes.append(
                        f"task {task_run.name} {task_run.state.name if task_run.state else 'none'} -> {t['state_name']}"
                    )
            # Task runs the server holds and the journal does not, left without a state or unfinished (a
            # server killed between creating a task run and recording its state leaves one with none): the
            # run has ended, so they did not finish; marked crashed, saying why, never left `Running`.
            listed = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
            for task_run in listed:
                if str(task_run.id) in known or (task_run.state is not None and task_run.state.is_final()):
                    continue
                client.set_task_run_state(
                    task_run.id,
                    State(type=StateType.CRASHED, name="Crashed", message=f"no outcome in the journal ({note})"),
                    force=True,
                )
                fixes.append(f"task {task_run.name} {task_run.state.name if task_run.state else 'none'} -> Crashed")
            have, offset = set(), 0
            while True:
                page = client.read_logs(
                    LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), limit=200, offset=offset
                )
                have |= {(round(entry.timestamp.timestamp(), 3), entry.message) for entry in page}
                offset += len(page)
                if len(page) < 200:
                    break
            missing = [
                LogCreate(
                    name=r["name"],
                    level=r["level"],
                    message=r["message"],
                    flow_run_id=run.id,
                    timestamp=datetime.fromtimestamp(r["timestamp"], tz=timezone.utc),
                    task_run_id=UUID(r["task_run_id"]) if r["task_run_id"] in known else None,
                )
                for r in rows
                if r["kind"] == "log" and (round(r["timestamp"], 3), r["message"]) not in have
            ]
            if missing:
                client.create_logs(missing)
                fixes.append(f"{len(missing)} log lines restored")
            if run.state is None or run.state.type.value != final["state"]:
                client.set_flow_run_state(
                    run.id,
                    State(
                        type=StateType(final["state"]),
                        name=FINAL.get(final["state"]),
                        message=f"{final['message']} ({note})",
                    ),
                    force=True,
                )
                fixes.append(
                    f"run {run.state.name if run.state else 'none'} -> {FINAL.get(final['state'], final['state'])}"
                )
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"kind": "reconciled", "timestamp": time.time(), "fixes": fixes}) + "\n")
            if fixes:
                line = f"flow run {run.name} ({run.id}): " + "; ".join(fixes)
                log(line)
                changed.append(line)
    return changed


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.journal [ROOT]`: reconcile the workspace's journals with the server."""
    ap = argparse.ArgumentParser(prog="python -m flows.journal", description=main.__doc__)
    ap.add_argument("root", nargs="?", default=".", help="the workspace whose journals to reconcile (default: here)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    changed = reconcile(Path(args.root))
    print(f"{len(changed)} run(s) corrected" if changed else "every finished run's record on the server is true")
    return 0


if __name__ == "__main__":
    sys.exit(main())
