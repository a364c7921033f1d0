"""The thin part of every stage's `main()`: offline switches, params, clean failure."""

from __future__ import annotations

import os
import sys
from typing import Callable

# No hub, no telemetry: nothing here may download or phone home (see README).
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "GX_ANALYTICS_ENABLED": "false",
    "DVC_NO_ANALYTICS": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}


def offline() -> None:
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)


class StageError(Exception):
    """A stage cannot go on; the message is meant for the user as it is."""


def run_stage(name: str, body: Callable[[], object]) -> None:
    """Run a stage body; expected failures print one clear message and exit 1."""
    from fundgrpo.methodology import MethodologyError
    from fundgrpo.params import ParamsError

    offline()
    try:
        body()
    except (StageError, MethodologyError, ParamsError, FileNotFoundError) as e:
        print(f"{name} failed: {e}", file=sys.stderr)
        sys.exit(1)
    except ValueError as e:  # e.g. IngestError: bad input named in the message
        print(f"{name} failed: {e}", file=sys.stderr)
        sys.exit(1)
