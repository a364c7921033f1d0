"""Apply a params profile: deep-merge `profiles/<name>.yaml` into params.yaml.

    python -m fundgrpo.profiles apply tiny        # writes params.yaml (a diff git shows)
    python -m fundgrpo.profiles show morningstar  # prints the merged params, writes nothing

params.yaml stays the one file DVC tracks, so `dvc repro` and `dvc exp` see a
profile as ordinary parameter changes. Comments in params.yaml are not kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from fundgrpo.params import Params, deep_merge, from_dict, read_yaml


def merged(name: str, params_path: Path = Path("params.yaml"), profiles_dir: Path = Path("profiles")) -> dict:
    profile = profiles_dir / f"{name}.yaml"
    if not profile.exists():
        known = sorted(p.stem for p in profiles_dir.glob("*.yaml"))
        raise SystemExit(f"no profile {name!r}; known: {known}")
    data = deep_merge(read_yaml(params_path), read_yaml(profile))
    from_dict(Params, data)  # refuse a profile with unknown or mistyped keys
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["apply", "show"])
    parser.add_argument("name")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args()
    data = merged(args.name, args.params, args.params.parent / "profiles")
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if args.action == "show":
        print(text)
    else:
        args.params.write_text(f"# params.yaml with profile '{args.name}' applied\n" + text, encoding="utf-8")
        print(f"applied profile {args.name} to {args.params}")


if __name__ == "__main__":
    main()
