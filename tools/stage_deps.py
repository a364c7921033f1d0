"""The project modules each DVC stage runs: the import closure of its command, for `dvc.yaml`'s deps.

    python tools/stage_deps.py           # list what each stage's deps miss or list in excess (exit 1 if any)
    python tools/stage_deps.py --write   # rewrite the .py deps of every stage in dvc.yaml and synthetic/dvc.yaml

A stage's command is `python -m <module>`; its closure is every file of this repository that
the module imports, directly or through other project modules, at the top or inside a function
(a lazy import still runs), plus the `__init__.py` of each package on the way. Non-Python deps
(data, the methodology file, pretrained-models.txt) are left as they are.
`tests/test_stage_deps.py` fails when a stage's deps and its closure differ, naming the file.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
import sys
from functools import cache
from pathlib import Path

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedSeq

from fundgrpo.params import Params

REPO = Path(__file__).resolve().parents[1]
DVC_FILES = ("dvc.yaml", "synthetic/dvc.yaml")
COMMAND = re.compile(r"^python -m ([\w.]+)")
# `p.grpo...` / `params.model...` in a stage module: the params sections it reads (the stages
# load all of params.yaml, then hand each library function its section).
SECTIONS = tuple(f.name for f in dataclasses.fields(Params))  # every section params.py defines
SECTION_READ = re.compile(rf"\b(?:p|params)\.({'|'.join(SECTIONS)})\b")


def module_file(name: str) -> Path | None:
    """The repository file of module `name` (a package's `__init__.py`), or None outside the project.

    >>> module_file("fundgrpo.params").relative_to(REPO).as_posix()
    'fundgrpo/params.py'
    >>> module_file("fundgrpo").relative_to(REPO).as_posix(), module_file("yaml")
    ('fundgrpo/__init__.py', None)
    """
    base = REPO.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_names(path: Path) -> set[str]:
    """Every absolute module name `path` imports; for `from a import b`, both `a` and `a.b`
    (b may be a submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@cache
def closure(module: str) -> frozenset[Path]:
    """The project files that running `python -m module` imports (itself included)."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__.py and a/b/__init__.py first
            path = module_file(".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(imported_names(path))
    return frozenset(seen)


def stage_commands() -> dict[tuple[str, str], tuple[str, Path]]:
    """(dvc file, stage) -> (the module its command runs, the folder its paths are relative to)."""

    out = {}
    for dvc_file in DVC_FILES:
        stages = yaml.safe_load((REPO / dvc_file).read_text(encoding="utf-8"))["stages"]
        for stage, spec in stages.items():
            m = COMMAND.match(spec["cmd"])
            if not m:
                raise SystemExit(f"{dvc_file}: stage {stage}: command {spec['cmd']!r} is not `python -m <module>`")
            wdir = (REPO / dvc_file).parent / spec.get("wdir", ".")
            out[(dvc_file, stage)] = (m.group(1), wdir.resolve())
    return out


def expected(module: str, wdir: Path) -> list[str]:
    """The .py deps a stage running `module` must list, relative to its working folder, sorted."""
    return sorted(p.relative_to(wdir).as_posix() for p in closure(module))


def sections_read(module: str) -> list[str]:
    """The params sections the stage module reads, in `Params` order.

    >>> sections_read("stages.sft")
    ['prepare', 'model', 'sft']
    """
    path = module_file(module)
    found = set(SECTION_READ.findall(path.read_text(encoding="utf-8"))) if path else set()
    return [s for s in SECTIONS if s in found]


def missing_sections(module: str, params: list) -> list[str]:
    """Sections read but neither listed whole nor by one of their keys (`model.pretrained`)."""
    listed = [str(next(iter(p)) if isinstance(p, dict) else p) for p in params]
    return [s for s in sections_read(module) if not any(x == s or x.startswith(s + ".") for x in listed)]


def differences() -> list[str]:
    """One line per .py file a stage's deps miss or list without importing it, and per params
    section it reads but does not list."""

    problems = []
    for (dvc_file, stage), (module, wdir) in stage_commands().items():
        spec = yaml.safe_load((REPO / dvc_file).read_text(encoding="utf-8"))["stages"][stage]
        listed = {d for d in spec.get("deps", []) if str(d).endswith(".py")}
        want = set(expected(module, wdir))
        problems += [f"{dvc_file}: stage {stage} imports {f} but its deps miss it" for f in sorted(want - listed)]
        problems += [f"{dvc_file}: stage {stage} lists {f} but does not import it" for f in sorted(listed - want)]
        problems += [
            f"{dvc_file}: stage {stage} reads params section {s} but its params miss it"
            for s in missing_sections(module, spec.get("params", []))
        ]
    return problems


def write() -> None:
    """Rewrite each stage's .py deps as its closure (comments and the other deps kept)."""

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    commands = stage_commands()
    for dvc_file in DVC_FILES:
        path = REPO / dvc_file
        doc = yaml.load(path.read_text(encoding="utf-8"))
        for stage, spec in doc["stages"].items():
            module, wdir = commands[(dvc_file, stage)]
            others = [d for d in spec.get("deps", []) if not str(d).endswith(".py")]
            deps = CommentedSeq(expected(module, wdir) + others)
            deps.fa.set_block_style()
            spec["deps"] = deps
            for section in missing_sections(module, spec.get("params", [])):
                spec["params"].append(section)
        with path.open("w", encoding="utf-8") as f:
            yaml.dump(doc, f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite the .py deps in the dvc.yaml files")
    args = ap.parse_args(argv)
    if args.write:
        write()
    problems = differences()
    print("\n".join(problems) or "every stage's deps cover the modules it imports")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
