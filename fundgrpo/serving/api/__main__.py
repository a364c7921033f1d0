"""`python -m fundgrpo.serving.api add-key NAME --role ROLE | --scopes ... | --client FIRM`, `list-keys`,
`revoke-key NAME`, `entitle FIRM ID...` / `disentitle FIRM ID...`, `serve`."""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from pathlib import Path

import fundgrpo.serving.api as api_package
from fundgrpo.cli import lean_exit, offline
from fundgrpo.serving.api.app import create_app, store_url
from fundgrpo.serving.api.keys import ROLES, SCOPES, add_key, entitle, list_keys, revoke_key
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.api.store import Store


def main(argv: list[str] | None = None) -> int:

    ap = argparse.ArgumentParser(
        prog="python -m fundgrpo.serving.api",
        description=api_package.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    k = sub.add_parser("add-key", help="create an API key (printed once; only its hash is stored)")
    k.add_argument("name")
    k.add_argument("--scopes", default="read,evaluate", help=f"the firm's: among {', '.join(SCOPES)}")
    k.add_argument("--role", choices=sorted(ROLES), help="the firm's role, as its scopes: " + "; ".join(
        f"{r} {','.join(s)}" for r, s in ROLES.items()))  # fmt: skip
    k.add_argument("--client", default=None, help="a client firm's key: published ratings of its share classes only")
    for command, what in (("entitle", "let a client firm read"), ("disentitle", "stop a client firm reading")):
        e = sub.add_parser(command, help=f"{what} these share classes' published ratings (audited)")
        e.add_argument("client")
        e.add_argument("share_class_ids", nargs="+")
    sub.add_parser("list-keys", help="the keys' names and scopes (a running server follows the file)")
    r = sub.add_parser("revoke-key", help="remove a key; a running server refuses it from its next request")
    r.add_argument("name")
    s = sub.add_parser("serve", help="serve the API with uvicorn")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    args = ap.parse_args(argv)
    settings = ApiSettings.from_env()
    if args.command == "add-key":
        scopes = [x.strip() for x in args.scopes.split(",") if x.strip()] if args.client is None else []
        if args.role is not None:
            if args.client is not None:
                print("add-key failed: a client key has no firm role (drop --role)", file=sys.stderr)
                return 1
            scopes = list(ROLES[args.role])
        try:
            key = add_key(settings.keys_file, args.name, scopes, args.client)
        except ValueError as err:
            print(f"add-key failed: {err}", file=sys.stderr)
            return 1
        print(key)
        print(f"(stored as a SHA-256 hash in {settings.keys_file}; the key is not shown again)", file=sys.stderr)
        return 0
    if args.command == "list-keys":
        for entry in list_keys(settings.keys_file):
            print(f"{entry['name']}\t{','.join(entry['scopes'])}\t{entry['client'] or 'firm'}")
        return 0
    if args.command in ("entitle", "disentitle"):
        try:
            now = entitle(settings.keys_file, args.client, args.share_class_ids, remove=args.command == "disentitle")
        except ValueError as err:
            print(f"{args.command} failed: {err}", file=sys.stderr)
            return 1
        store = Store(store_url(Path("."), settings))
        for sid in args.share_class_ids:  # who may read what is audited like every read
            store.log(getpass.getuser(), args.command, sid, {"client": args.client})
        print(f"{args.client}: {len(now)} share classes")
        return 0
    if args.command == "revoke-key":
        try:
            revoke_key(settings.keys_file, args.name)
        except ValueError as err:
            print(f"revoke-key failed: {err}", file=sys.stderr)
            return 1
        print(f"revoked {args.name}")
        return 0
    import uvicorn

    offline()
    lean_exit()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # on SIGTERM: stop accepting, fail the queued requests, let the running generation finish (it
    # stops by itself at its request's timeout) for at most that long
    uvicorn.run(
        create_app(Path("."), settings),
        host=args.host,
        port=args.port,
        access_log=False,
        timeout_graceful_shutdown=int(settings.timeout_s) + 5,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
