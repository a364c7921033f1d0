"""The shape of the code base: one name per module, tests that mirror the package, one home for
output paths (fundgrpo/params.py), and imports at the top of modules except the heavy ones."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections import defaultdict

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

from tests.support import REPO

# Packages that take seconds to import (trl 10 s, peft 7 s, evidently 5 s, great_expectations 5 s,
# mlflow 3 s, torch, transformers, prefect ...) or serve one optional path: imported inside the
# functions that use them, so the params loader, a stage's --help and test collection stay fast.
# The heaviest are pyproject.toml's list (ruff bans them at module level: TID253, the one home of
# that list); the others may sit at the top of a module that always needs them (the API, the dashboard).
BANNED = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"][
    "flake8-tidy-imports"
]["banned-module-level-imports"]
LAZY = {
    *BANNED, "prefect", "matplotlib", "sklearn", "scipy", "uvicorn", "fastapi", "sqlalchemy", "pgserver", "psycopg",
    "tokenizers", "threadpoolctl", "streamlit",
}  # fmt: skip
CODE = ("fundgrpo", "stages", "flows", "monitoring", "tools")
OUTPUT = re.compile(r"^(data|models|metrics|plots|reports|mlartifacts)/")


def tracked(*folders: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", *folders], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in out.stdout.split() if f.endswith(".py") and (REPO / f).exists()]


def test_no_two_modules_share_a_name():
    by_name = defaultdict(list)
    for f in tracked():
        name = f.rsplit("/", 1)[-1]
        if name not in ("__init__.py", "__main__.py", "conftest.py"):
            by_name[name].append(f)
    assert {n: fs for n, fs in by_name.items() if len(fs) > 1} == {}


def test_tests_mirror_the_package():
    """tests/fundgrpo/<package>/test_<module>.py tests fundgrpo/<package>/<module>.py."""
    orphans = []
    for f in tracked("tests/fundgrpo"):
        folder, name = f.rsplit("/", 1)
        module = REPO / folder.replace("tests/", "", 1) / name.removeprefix("test_")
        if name.startswith("test_") and not (module.exists() or module.with_suffix("").is_dir()):
            orphans.append(f)
    assert orphans == []


def string_constants(tree: ast.AST):
    """(line, text) of every string literal that is not a docstring."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_output_paths_live_in_params_only():
    """A path under data/, models/, metrics/, plots/ or reports/ written as a literal anywhere in the
    code but fundgrpo/params.py is a second home: stages and flows read them from params."""
    found = []
    for f in tracked("fundgrpo", "stages", "flows", "monitoring"):
        if f == "fundgrpo/params.py":
            continue
        for line, text in string_constants(ast.parse((REPO / f).read_text(encoding="utf-8"))):
            if OUTPUT.match(text):
                found.append(f"{f}:{line}: {text!r}")
    assert found == []


def test_dvc_yaml_takes_every_output_path_from_params():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    literal = []
    for name, spec in stages.items():
        for kind in ("deps", "outs", "metrics", "plots"):
            for entry in spec.get(kind, []):
                path = str(next(iter(entry)) if isinstance(entry, dict) else entry)
                if OUTPUT.match(path):
                    literal.append(f"{name}.{kind}: {path}")
    assert literal == [], "write these as ${section.key} from params.yaml"


def test_imports_sit_at_the_top_except_heavy_packages():
    late = []
    for f in tracked(*CODE):
        tree = ast.parse((REPO / f).read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                else:
                    continue
                late += [f"{f}:{node.lineno}: {n}" for n in names if n.split(".")[0] not in LAZY]
    assert late == [], "move these imports to the top of their module (or document the package in LAZY)"


# The library's layers, bottom to top: a module may import its own layer and those below, never
# one above (docs/pipeline.md). So the `baseline` stage runs no model code, a backtest figure
# reruns no training, and serving and the registry run the model (`model`) without the training
# code. The modules at the bottom are shared by all; the monitoring checks and the flows that
# orchestrate everything (top-level packages beside fundgrpo) sit on top.
LAYERS = (
    ("params", "io", "cli", "threads", "profiles"),
    ("data",),
    ("methodology",),
    ("evaluation",),
    ("model",),
    ("training",),
    ("registry",),
    ("serving",),
    ("monitoring",),
    ("flows",),
)
LAYER = {part: i for i, parts in enumerate(LAYERS) for part in parts}
TOP_LEVEL = ("monitoring", "flows")  # packages beside fundgrpo, layered with its parts


def layer_of(name: str) -> str | None:
    """The layer part a module name belongs to: fundgrpo's second name, or a top-level package's."""
    bits = name.split(".")
    if bits[0] == "fundgrpo" and len(bits) > 1:
        return bits[1]
    return bits[0] if bits[0] in TOP_LEVEL else None


def upward_imports(path: str, source: str) -> list[str]:
    """`path:line: a -> b` for each import (top or lazy) of a layered part above the module's own.
    (`test_the_checks_see_what_they_look_for` tries it on made-up modules.)
    """
    part = layer_of(path.removesuffix(".py").replace("/", "."))
    assert part is not None, path
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            other = layer_of(name)
            if other is not None and LAYER.get(other, -1) > LAYER[part]:
                found.append(f"{path}:{node.lineno}: {part} -> {other}")
    return found


def test_layers_import_downwards():
    parts = {f.split("/")[1].removesuffix(".py") for f in tracked("fundgrpo")} - {"__init__"}
    assert parts <= set(LAYER), f"place {sorted(parts - set(LAYER))} in LAYERS"
    files = tracked("fundgrpo", *TOP_LEVEL)
    up = [u for f in files for u in upward_imports(f, (REPO / f).read_text(encoding="utf-8"))]
    assert up == [], "an import points up the layers: move the code it needs down, or the caller up"


# The library says what the code does, not how it came to be: the research record (research/: the
# experiments, notes and per-run results; the benchmarks; the issues) keeps the history, so no comment
# or docstring of fundgrpo/ cites it, and no comment dates a change.
HISTORY = re.compile(r"research/|benchmarks/|experiments/|_notes\.md|\bissues? ?#?\d+")
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def history_lines(path: str, source: str) -> list[str]:
    """`path:line: text` for each comment naming the research record or a date, and each line of prose
    in a string (doctest lines aside: their dates are data) naming the research record."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and (HISTORY.search(tok.string) or DATED.search(tok.string)):
            found.append(f"{path}:{tok.start[0]}: {tok.string.strip()}")
        elif tok.type == tokenize.STRING:
            for i, line in enumerate(tok.string.splitlines()):
                if not line.lstrip().startswith((">>>", "...")) and HISTORY.search(line):
                    found.append(f"{path}:{tok.start[0] + i}: {line.strip()}")
    return found


def test_the_library_names_no_benchmark_experiment_issue_or_date():
    found = [h for f in tracked("fundgrpo") for h in history_lines(f, (REPO / f).read_text(encoding="utf-8"))]
    assert found == [], "say what the code does; the history belongs to research/ and the issues"


# A reader follows a function in one screen or two: past 80 lines (docstring included) it is several
# steps that want names.
MAX_FUNCTION_LINES = 80


def test_functions_stay_short():
    long = [
        f"{f}:{node.lineno}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for f in tracked("fundgrpo")
        for node in ast.walk(ast.parse((REPO / f).read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], "split these into named steps"


# A call a reader can check: past six arguments by position, which value is which is lost; name them.
# (SQLAlchemy's Table takes its columns by position; `super()` calls pass a library's own signature.)
MAX_POSITIONAL = 6


def crowded_calls(path: str, text: str) -> list[str]:
    return [
        f"{path}:{node.lineno}: {ast.unparse(node.func)} ({len(node.args)} by position)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and len(node.args) > MAX_POSITIONAL
        and not ast.unparse(node.func).startswith(("sa.Table", "super()"))
    ]


def test_calls_name_their_arguments():
    crowded = [c for f in tracked("fundgrpo") for c in crowded_calls(f, (REPO / f).read_text(encoding="utf-8"))]
    assert crowded == [], "pass these by keyword"


# Records cross modules typed, never as dicts whose keys come and go: a parameter that holds an evaluator's
# answers is a `Prediction` (or the backtest's per-fund row, `report.FundRow`), one that holds prompt records a
# `records.PromptRecord`, a calibration fit a `calibration.CalibrationFit`, the gate's record of a version a
# `mlflow_registry.GateRecord`, what the review rule reads a `review.Case`; a parameter named `rows` holds no
# free-form dict either (indices and arrays are fine).
TYPED = re.compile(r"\b(Prediction|FundRow)\b")
PROMPT_RECORD = re.compile(r"\bPromptRecord\b")
RECORD_TYPES = {
    **dict.fromkeys(("pred", "preds", "prediction", "predictions"), TYPED),
    **dict.fromkeys(("record", "records", "train_rows", "eval_rows"), PROMPT_RECORD),
    **dict.fromkeys(("fit", "fits"), re.compile(r"\bCalibrationFit\b")),
    "gate": re.compile(r"\b(GateRecord|GateParams)\b"),  # what the gate decided for a version, or its settings
    "case": re.compile(r"\bCase\b"),  # what the review rule reads of an evaluation
}
FREE_FORM = re.compile(r"\b(dict|Mapping|Any)\b|^no annotation$")


def untyped_records(path: str, text: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                kind = ast.unparse(a.annotation) if a.annotation is not None else "no annotation"
                wanted = RECORD_TYPES.get(a.arg)
                if (wanted and not wanted.search(kind)) or (a.arg == "rows" and FREE_FORM.search(kind)):
                    out.append(f"{path}:{node.lineno}: {node.name}({a.arg}: {kind})")
    return out


def test_records_cross_modules_typed():
    found = [u for f in tracked("fundgrpo") for u in untyped_records(f, (REPO / f).read_text(encoding="utf-8"))]
    assert found == [], (
        "annotate predictions Prediction (or FundRow), prompt records PromptRecord, fits CalibrationFit, "
        "gate records GateRecord"
    )


# A module does one job: past 600 lines it does several (params.py, the one home of every setting,
# aside); a stage reads params, calls the library and writes, in 60 lines at most.
MAX_MODULE_LINES, MAX_STAGE_LINES = 600, 60


def test_modules_and_stages_stay_small():
    long = {}
    for f in tracked("fundgrpo", "stages", "flows", "monitoring"):
        n = len((REPO / f).read_text(encoding="utf-8").splitlines())
        limit = MAX_STAGE_LINES if f.startswith("stages/") else MAX_MODULE_LINES
        if n > limit and f != "fundgrpo/params.py":
            long[f] = n
    assert long == {}, f"split these by job (stages: move the logic into the library): {long}"


def test_the_offline_switches_have_one_home():
    """The Makefile and the Dockerfile set exactly fundgrpo/cli.py's OFFLINE (they cannot import it)."""
    from fundgrpo.cli import OFFLINE

    make = dict(re.findall(r"^export (\w+)=(\S+)$", (REPO / "Makefile").read_text(encoding="utf-8"), re.M))
    docker = (REPO / "Dockerfile").read_text(encoding="utf-8")
    env = dict(re.findall(r"(\w+)=(\S+)", docker.split("\nENV ", 1)[1].split("\n\n", 1)[0]))
    assert make == OFFLINE
    assert env == OFFLINE


# The test split is read once per design: by the `backtest` and `register` stages (and the benchmark
# collectors in benchmarks/); every other stage, flow, monitor and experiment decides and reports on
# validation. A reader names the test file or selects the split: `== "test"`, `.eq("test")`, or
# "test" in a tuple or list of splits (not `"test" in splits`, `!= "test"` or `--test-share`).
TEST_READERS = ("backtest", "register")
TEST_SPLIT = re.compile(
    r"""\btest\.jsonl|==\s*["']test["']|["']test["']\s*==|\.eq\(\s*["']test["']"""
    r"""|,\s*["']test["']\s*[)\]]|[(\[]\s*["']test["']\s*,"""
)
# The monitoring flow scores the new candidate on a monitoring batch's newly rated test-split funds,
# after the register stage's gate has decided: a report on new labels, not a design choice.
TEST_SPLIT_ALLOWED = {"flows/monitoring_flow.py": ('r.split == "test"',)}


def test_only_the_backtest_register_and_collectors_read_the_test_split():
    """No dvc.yaml stage but `backtest` and `register` depends on the test rows (or the whole
    prepared folder), and no other stage, flow, monitor or experiment reads or selects them."""
    test_file = "test" + ".jsonl"
    assert all(
        TEST_SPLIT.search(s) for s in (f'read(out / "{test_file}")', 'r["split"] == "test"', "('train', 'test')")
    )
    assert not any(TEST_SPLIT.search(s) for s in ('"test" in args.splits', 'split != "test"', '"--test-share"'))
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    deps = [
        f"{name}: {dep}"
        for name, spec in stages.items()
        if name not in TEST_READERS
        for dep in (str(next(iter(e)) if isinstance(e, dict) else e) for e in spec.get("deps", []))
        if dep.rstrip("/") == "${prepare.out_dir}" or TEST_SPLIT.search(dep)
    ]
    readers = [
        f"{f}:{n}: {line.strip()}"
        for f in tracked("stages", "flows", "monitoring", "research/experiments")
        if f not in [f"stages/{s}.py" for s in TEST_READERS]
        for n, line in enumerate((REPO / f).read_text(encoding="utf-8").splitlines(), 1)
        if TEST_SPLIT.search(line) and not any(a in line for a in TEST_SPLIT_ALLOWED.get(f, ()))
    ]
    assert deps + readers == [], "design and report on validation (or cross-validation over train + validation)"


def test_the_checks_see_what_they_look_for():
    """The checks above are not vacuous: each finds its target in a made-up module."""
    tree = ast.parse('"""doc: data/x.parquet"""\ndef f():\n    import json\n    return "models/base"\n')
    assert [t for _, t in string_constants(tree)] == ["models/base"]
    assert OUTPUT.match("models/base") and not OUTPUT.match("fundgrpo/data/x.py")
    assert upward_imports("fundgrpo/data/x.py", "def f():\n    from fundgrpo.serving import batch\n") == [
        "fundgrpo/data/x.py:2: data -> serving"
    ]
    assert upward_imports("fundgrpo/serving/x.py", "from fundgrpo.data import peers\n") == []
    assert crowded_calls("m.py", "f(1, 2, 3, 4, 5, 6, 7)\nf(1, 2, 3, 4, 5, 6, g=7)\n") == ["m.py:1: f (7 by position)"]
    typed = (
        "def f(preds: list[dict], p: dict, prediction: Prediction, rows: list[dict], records: list[PromptRecord]): ..."
    )
    assert untyped_records("m.py", typed + "\ndef g(rows: np.ndarray, record: dict): ...\n") == [
        "m.py:1: f(preds: list[dict])",
        "m.py:1: f(rows: list[dict])",
        "m.py:2: g(record: dict)",
    ]
    made_up = (
        "x = 1  # 1.6x faster (issue 34)\ny = 2  # since 2026-11-29\n"
        '"""See benchmarks/seeds.md.\n>>> f("2024-01-01")\n"""\n'
    )
    assert [h.split(": ")[0] for h in history_lines("m.py", made_up)] == ["m.py:1", "m.py:2", "m.py:3"]
    assert upward_imports("monitoring/x.py", "from flows import common\n") == ["monitoring/x.py:1: monitoring -> flows"]
    assert upward_imports("fundgrpo/model/x.py", "import fundgrpo.training.rewards\n") == [
        "fundgrpo/model/x.py:1: model -> training"
    ]
