"""flows/journal.py's reconcile against a real Prefect server (the session's test server): a finished run
whose server record stayed `Running` is set to its journal's final state, and task runs the journal has no
outcome for, left running, pending or with no state at all (a killed server left one without its state in
CI; the API cannot make one, so the test makes the unfinished kinds), are marked crashed, saying why; a task
that finished is left alone; a second reconcile changes nothing."""

from __future__ import annotations

import json
import time
from uuid import UUID

from flows import journal


def test_task_runs_the_journal_has_no_outcome_for_are_not_left_unfinished(prefect_api, tmp_path):
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.states import Running

    @task
    def step() -> int:
        return 1

    @flow
    def journaled() -> int:
        return step()

    run_id = journaled(return_state=True).state_details.flow_run_id
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Running(), force=True)  # as a server killed mid-run shows it
        running = client.create_task_run(step, run_id, "left-running", state=Running())
        # a task run the server recorded but never started (given no state, the API makes it Pending)
        pending = client._client.post(
            "/task_runs/",
            json={"flow_run_id": str(run_id), "task_key": "step", "dynamic_key": "never-ran", "name": "step-pending"},
        ).json()
        assert pending["state"]["type"] == "PENDING"
        pending = UUID(pending["id"])
    root = tmp_path / "repo"
    path = journal.folder(root) / f"{run_id}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"kind": "flow", "state": "COMPLETED", "message": "done", "timestamp": time.time()}) + "\n"
    )

    lines = journal.reconcile(root, log=lambda line: None)
    assert len(lines) == 1 and "step-pending Pending -> Crashed" in lines[0] and "run Running -> Completed" in lines[0]
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(run_id).state.type.value == "COMPLETED"
        for task_run_id in (running.id, pending):
            state = client.read_task_run(task_run_id).state
            assert state.type.value == "CRASHED" and "no outcome in the journal" in state.message
        ours = FlowRunFilter(id=FlowRunFilterId(any_=[run_id]))
        finished = [t for t in client.read_task_runs(flow_run_filter=ours) if t.id not in (running.id, pending)]
        assert finished and all(t.state.type.value == "COMPLETED" for t in finished)  # a finished task untouched
    assert journal.reconcile(root, log=lambda line: None) == []  # reconciled once
