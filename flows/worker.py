"""Start a Prefect worker that stops on SIGTERM: `python -m flows.worker [--pool fund-grpo ...]`.

`prefect worker start` turns SIGTERM into SIGINT to itself. A process started in the background
by a shell (`cmd &`, nohup) or by some service managers inherits SIGINT *ignored*, so that SIGINT
never arrives and the worker runs on after `kill`, `systemctl stop` or a container stop (measured
with prefect 3.8.8: still running 10 s after SIGTERM; with SIGINT restored, stopped in 2 s). This
restores SIGINT's default and then becomes `prefect worker start` with the same arguments.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not any(a == "--pool" or a.startswith("--pool=") or a == "-p" for a in argv):
        argv = ["--pool", "fund-grpo", *argv]
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # survives exec; Python then installs its own handler
    prefect = Path(sys.executable).parent / "prefect"
    os.execv(str(prefect), [str(prefect), "worker", "start", *argv])


if __name__ == "__main__":
    main()
