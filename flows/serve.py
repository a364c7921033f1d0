"""The `serve` alternative to prefect.yaml + a worker: one process that runs every schedule.

    prefect server start --host 127.0.0.1             # in another shell (docs/operations.md)
    PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.serve

Same deployments, names and crons as prefect.yaml; runs execute in this process's folder.
"""

from __future__ import annotations

import argparse
from typing import Any

from flows.evaluation_flow import evaluation
from flows.monitoring_flow import monitoring
from flows.training_flow import training
from fundgrpo.cli import offline

MONITORING_CRON = "0 6 * * *"  # daily, 06:00 UTC
TRAINING_CRON = "0 3 * * 0"  # weekly, Sunday 03:00 UTC
EVALUATION_CRON = "0 5 1 * *"  # monthly, the 1st at 05:00 UTC


def deployments(root: str = ".") -> list[Any]:
    """The three deployments, ready for `prefect.serve`."""

    return [
        monitoring.to_deployment(
            name="monitoring-daily",
            cron=MONITORING_CRON,
            parameters={"root": root},
            tags=["fund-grpo", "monitoring"],
            description="New batches -> drift -> relearn -> gate",
        ),
        training.to_deployment(
            name="training-weekly",
            cron=TRAINING_CRON,
            parameters={"root": root, "quick": False},
            tags=["fund-grpo", "training"],
            concurrency_limit=1,
            description="dvc repro stage by stage, register, champion gate",
        ),
        evaluation.to_deployment(
            name="evaluation-monthly",
            cron=EVALUATION_CRON,
            parameters={"root": root},
            tags=["fund-grpo", "evaluation"],
            description="The configured universe scored by the champion",
        ),
    ]


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    from prefect import serve

    offline()
    serve(*deployments())


if __name__ == "__main__":
    main()
