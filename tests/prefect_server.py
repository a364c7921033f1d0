"""One Prefect test server for a whole pytest-xdist session (tests/support.py, `prefect_server`).

    python -m tests.prefect_server URL_FILE CONTROLLER_PID

Runs Prefect's own test harness (a server on a temporary sqlite database) in this process, writes
the server's API URL to URL_FILE once it answers, and stops it when the pytest process that runs the
session (CONTROLLER_PID) has exited, or on SIGTERM. Each worker starting a server of its own cost
~10 s of CPU (imports and the database's migrations) and kept it idling beside the other's.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def main(url_file: Path, controller: int) -> None:
    from fundgrpo.cli import offline

    offline()
    import prefect.settings
    from prefect.testing.utilities import prefect_test_harness

    def stop(*_) -> None:
        raise SystemExit(0)  # leaves the harness through its own exit: the server stops, the database goes

    signal.signal(signal.SIGTERM, stop)
    with prefect_test_harness(server_startup_timeout=120):
        written = url_file.with_suffix(".tmp")
        written.write_text(prefect.settings.PREFECT_API_URL.value(), encoding="utf-8")
        written.replace(url_file)  # whole or absent: a worker reads it as soon as it exists
        while alive(controller):
            time.sleep(1)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1]), int(sys.argv[2]))
