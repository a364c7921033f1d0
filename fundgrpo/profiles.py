"""Apply params profiles: deep-merge `profiles/<name>.yaml` files into params.yaml, in order.

    python -m fundgrpo.profiles apply tiny                  # writes params.yaml (a diff git shows)
    python -m fundgrpo.profiles apply morningstar smollm2   # a data profile, then a model profile
    python -m fundgrpo.profiles show morningstar            # prints the merged params, writes nothing

Profiles compose: a later one wins where both set a key. Data profiles (morningstar) set the
source, validation and methodology; model profiles (smollm2, gemma3-ko, gpu-qwen3) set the
model, prompt style and training, so apply the data profile first.

params.yaml stays the one file DVC tracks, so `dvc repro` and `dvc exp` see a
profile as ordinary parameter changes. The file is written as `python -m fundgrpo.params`
writes the defaults: every key, with its comment.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from fundgrpo.params import Params, deep_merge, from_dict, read_yaml, render


def merged(
    names: str | list[str], params_path: Path = Path("params.yaml"), profiles_dir: Path = Path("profiles")
) -> dict:
    """params.yaml with each named profile laid over it, in order."""
    names = [names] if isinstance(names, str) else list(names)
    data = read_yaml(params_path)
    for name in names:
        profile = profiles_dir / f"{name}.yaml"
        if not profile.exists():
            known = sorted(p.stem for p in profiles_dir.glob("*.yaml"))
            raise SystemExit(f"no profile {name!r}; known: {known}")
        data = deep_merge(data, read_yaml(profile))
    from_dict(Params, data)  # refuse a profile with unknown or mistyped keys
    return data


def load(
    names: str | list[str], params_path: Path = Path("params.yaml"), profiles_dir: Path = Path("profiles")
) -> Params:
    """The typed params that `apply` would write (for tests and benchmarks that must not write)."""
    return from_dict(Params, merged(names, params_path, profiles_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["apply", "show"])
    parser.add_argument("names", nargs="+", metavar="name", help="profiles/<name>.yaml, applied in order")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args()
    data = merged(args.names, args.params, args.params.parent / "profiles")
    if args.action == "show":
        print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        names = " + ".join(args.names)
        text = f"# params.yaml with profile(s) {names} applied\n" + render(from_dict(Params, data))
        assert from_dict(Params, yaml.safe_load(text)) == from_dict(Params, data)  # what the stages will read
        args.params.write_text(text, encoding="utf-8")
        print(f"applied profile(s) {names} to {args.params}")


if __name__ == "__main__":
    main()
