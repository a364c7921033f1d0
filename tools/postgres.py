"""A PostgreSQL server on loopback TCP, for the API's evaluation store and an MLflow backend.

    python tools/postgres.py start DIR [--port 5433] [--database fundgrpo --database mlflow]
    python tools/postgres.py stop DIR

`start` initialises DIR once (a cluster with trust authentication, which is why it listens on
127.0.0.1 only), starts the server, creates the databases and prints one SQLAlchemy URL per
database, e.g. `postgresql+psycopg://postgres@127.0.0.1:5433/fundgrpo` for `FUNDGRPO_DB_URL`.
The binaries are the `pgserver` wheel's (a dev dependency: no download, no OS package); as root it
runs the server as the `pgserver` system user, since PostgreSQL refuses to run as root.
A shared server for a team is an ordinary PostgreSQL with a password in the URL, taken from the
environment, never from this script.
"""

from __future__ import annotations

import argparse
import os
import pwd
import socket
import sys
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(pgdata: Path, port: int, databases: list[str]) -> list[str]:
    """Start (or restart on `port`) the cluster in `pgdata`; the URLs of `databases`."""
    import pgserver
    import psycopg
    from pgserver._commands import pg_ctl

    pgdata = pgdata.resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # pgserver creates the cluster (and its system user when run as root) and starts it on a
    # unix socket only; restarting with -h/-p adds the loopback TCP listener.
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    sockets = server.get_postmaster_info().socket_dir
    pg_ctl(
        ["-w", "-o", f"-h 127.0.0.1 -p {port} -k {sockets}", "-l", str(pgdata / "log"), "restart"],
        pgdata=pgdata,
        user=server.system_user,
        timeout=60,
    )
    base = f"postgresql://postgres@127.0.0.1:{port}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        existing = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
        for name in databases:
            if name not in existing:
                conn.execute(f'CREATE DATABASE "{name}"')
    return [f"postgresql+psycopg://postgres@127.0.0.1:{port}/{name}" for name in databases]


def stop(pgdata: Path) -> None:

    from pgserver._commands import pg_ctl

    pgdata = pgdata.resolve()
    user = None
    if os.geteuid() == 0:
        user = pwd.getpwuid(pgdata.stat().st_uid).pw_name
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user=user, timeout=60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start", help="initialise if needed, start on 127.0.0.1, create the databases")
    up.add_argument("dir", type=Path)
    up.add_argument("--port", type=int, default=5433)
    up.add_argument("--database", action="append", default=None, help="repeatable (default: fundgrpo and mlflow)")
    down = sub.add_parser("stop", help="stop the server of DIR")
    down.add_argument("dir", type=Path)
    args = ap.parse_args(argv)
    if args.command == "start":
        for url in start(args.dir, args.port, args.database or ["fundgrpo", "mlflow"]):
            print(url)
    else:
        stop(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
