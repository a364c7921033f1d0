"""The workspace lock: a second training run (another process) waits instead of colliding."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flows import common
from tests.support import REPO

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from flows.common import workspace_lock
    root = Path(sys.argv[1])
    with workspace_lock(root):
        (root / "held").write_text("yes")
        time.sleep(float(sys.argv[2]))
    """
)


def hold(root: Path, seconds: float) -> subprocess.Popen:
    """Another process holding `root`'s lock for `seconds`; returns once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), str(seconds)], cwd=REPO)
    deadline = time.monotonic() + 60
    while not (root / "held").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the holder did not take the lock"
        time.sleep(0.05)
    return proc


@pytest.mark.fault("two training flows at once")
def test_a_second_run_waits_for_the_first(tmp_path):
    proc = hold(tmp_path, 2.0)
    messages: list[str] = []
    start = time.monotonic()
    with common.workspace_lock(tmp_path, timeout_s=60, log=messages.append):
        waited = time.monotonic() - start
    proc.wait(timeout=30)
    assert waited > 1.0  # it queued behind the holder
    assert messages and "waiting" in messages[0] and common.LOCK_FILE in messages[0]


@pytest.mark.fault("two training flows at once")
def test_a_bounded_wait_fails_with_a_clear_message(tmp_path):
    proc = hold(tmp_path, 3.0)
    try:
        with pytest.raises(TimeoutError, match="another training run still holds .* after 0.2 s"):
            with common.workspace_lock(tmp_path, timeout_s=0.2, log=lambda _: None):
                pass
    finally:
        proc.wait(timeout=30)
    with common.workspace_lock(tmp_path, timeout_s=0):  # free again once the holder is done
        pass
