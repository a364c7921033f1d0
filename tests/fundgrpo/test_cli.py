"""fundgrpo/cli.py: what every stage's process does around its body."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support import REPO


def test_lean_exit_collects_garbage_then_freezes_what_is_alive(tmp_path):
    """The garbage left at exit is collected (its finalizer writes a file); what survives is frozen,
    so the shutdown's collections skip it; handlers registered before it run after it."""
    finalized, seen = tmp_path / "finalized", tmp_path / "frozen"
    script = textwrap.dedent(
        f"""
        import atexit, gc, pathlib
        atexit.register(lambda: pathlib.Path({str(seen)!r}).write_text(str(gc.get_freeze_count())))
        from fundgrpo.cli import lean_exit
        lean_exit()

        class Cycle:
            def __del__(self):
                pathlib.Path({str(finalized)!r}).write_text("yes")

        gc.disable()  # nothing collects the cycle before exit but lean_exit
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
        del a, b
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert finalized.read_text() == "yes"
    assert int(seen.read_text()) > 1000  # the interpreter's own objects, at least
