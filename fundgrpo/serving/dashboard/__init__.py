"""The analysts' dashboard (Streamlit), run in a workspace after `make run`:

    python -m fundgrpo.serving.dashboard [--host 127.0.0.1] [--port 8501]      # then open http://127.0.0.1:8501

Pages: Funds (by name, searched, filtered, sorted; a row opens the fund), Fund (its metrics against
its peers, the methodology's verdict, each evaluator's grade and the model's probabilities, the
reasoning, its grades across model versions and the analysts' decisions), Backtest (metrics,
confusion heatmaps, grade distributions, reliability, GRPO reward curves), Models (versions,
aliases, the gate's verdicts, metrics per version), Drift (drift and rating migration over time,
each batch's Evidently report), Review queue (the API's queue; decisions through the API with the
analyst's key). Every page names the model version it shows: the champion by default, any version
from the sidebar. Labels follow the methodology's language (English or Korean).

It has no login of its own and shows the firm's drafts: it binds to loopback, and refuses any other
address unless told it sits behind the firm's single sign-on (`--behind-sso`; docs/operations.md shows
the reverse proxy). The review page calls the API at FUNDGRPO_API_URL (default http://127.0.0.1:8000),
whose decisions need the analyst's own key.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fundgrpo.cli import offline

SCRIPT = Path(__file__).with_name("pages.py")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def refusal(host: str) -> str:
    """Why the dashboard will not listen on `host` by itself.

    >>> print(refusal("0.0.0.0"))  # doctest: +ELLIPSIS
    dashboard: not listening on 0.0.0.0: it has no login of its own ... pass --behind-sso
    """
    return (
        f"dashboard: not listening on {host}: it has no login of its own and shows the firm's drafts; bind it to "
        "127.0.0.1, or put it behind the firm's single sign-on (docs/operations.md) and pass --behind-sso"
    )


def command(host: str, port: int) -> list[str]:
    """`streamlit run` of the pages, lean for a 2-core box: no file watcher, no usage statistics.

    >>> command("0.0.0.0", 9000)[2:6]
    ['--server.address', '0.0.0.0', '--server.port', '9000']
    """
    return [
        "run", str(SCRIPT),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--server.fileWatcherType", "none", "--server.runOnSave", "false",
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
        "--global.developmentMode", "false",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fundgrpo.serving.dashboard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8501)
    ap.add_argument("--behind-sso", action="store_true", help="another address than loopback: a proxy signs users in")
    args = ap.parse_args(argv)
    if args.host not in LOOPBACK and not args.behind_sso:
        print(refusal(args.host), file=sys.stderr)
        return 2
    offline()
    from streamlit.web import cli

    return cli.main(command(args.host, args.port), standalone_mode=False) or 0
