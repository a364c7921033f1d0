"""Bad input at every entry point, against a workspace whose last run was good.

One workspace runs ingest -> validate -> methodology -> prepare on a small canonical CSV export.
Each case then breaks one input (the source file, params.yaml, a profile, the methodology file,
flow overrides, model completions), runs the entry point as a user would (`python -m stages.X`,
in-process here to keep the suite fast), and asserts three things: the exit status, that the
message names the problem (file, column, row, field), and that every output of the last good run
is byte-identical afterwards. The inputs are restored between cases.

`python tools/robustness.py` runs this suite and writes the figures (benchmarks/robustness.md).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import io
import json
import os
import shutil
import sys
import traceback
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
import yaml

from fundgrpo import profiles
from fundgrpo.data import synthetic
from fundgrpo.params import Params, from_dict, render
from tests.support import REPO

SOURCE = "data/raw/funds.csv"
STAGES = ("ingest", "validate", "methodology", "decisions", "evidence", "prepare")
OUTPUTS = (
    "data/canonical",
    "data/validated",
    "data/schema",
    "data/evidence",
    "data/prepared",
    "metrics",
    "reports/validation",
)
INPUTS = ("params.yaml", SOURCE, "methodology", "profiles", "documents", *OUTPUTS)


@dataclass
class Case:
    name: str
    entry: str  # the stage (or entry point) run after the input is broken
    breaks: Callable[[Path], None]
    names: tuple[str, ...]  # each must appear in the message (case-insensitive)
    exit: int = 1
    area: str = "source"
    after: tuple[str, ...] = field(default=())  # stages that must run (and succeed) before `entry`
    reported: bool = False  # undecidable for certain: accepted, and the doubt named in the report


# ------------------------------------------------------------------ breakers


def csv_text(root: Path) -> str:
    return (root / SOURCE).read_text(encoding="utf-8")


def set_csv(root: Path, text: str, encoding: str = "utf-8") -> None:
    (root / SOURCE).write_bytes(text.encode(encoding, errors="replace"))  # a Western export has no Hangul: "?" instead


def edit_csv(fn: Callable[[list[str]], list[str]]) -> Callable[[Path], None]:
    def breaks(root: Path) -> None:
        lines = csv_text(root).splitlines()
        set_csv(root, "\n".join(fn(lines)) + "\n")

    return breaks


def cell(column: str, row: int, value: str) -> Callable[[Path], None]:
    """Set one cell (row counted from 1 after the header)."""

    def fn(lines: list[str]) -> list[str]:
        header = lines[0].split(",")
        fields = lines[row].split(",")
        fields[header.index(column)] = value
        lines[row] = ",".join(fields)
        return lines

    return edit_csv(fn)


def named(value: str, encoding: str) -> Callable[[Path], None]:
    """The first row's name set to `value`, the whole file saved in `encoding`."""

    def breaks(root: Path) -> None:
        lines = csv_text(root).splitlines()
        fields = lines[1].split(",")
        fields[lines[0].split(",").index("name")] = value
        lines[1] = ",".join(fields)
        set_csv(root, "\n".join(lines) + "\n", encoding)

    return breaks


def drop_column(column: str) -> Callable[[Path], None]:
    def fn(lines: list[str]) -> list[str]:
        at = lines[0].split(",").index(column)
        return [",".join(f for i, f in enumerate(line.split(",")) if i != at) for line in lines]

    return edit_csv(fn)


def set_params(**changes) -> Callable[[Path], None]:
    """Change params.yaml (dotted keys); values written as YAML."""

    def breaks(root: Path) -> None:
        data = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
        for key, value in changes.items():
            node = data
            *parts, last = key.split("__")
            for part in parts:
                node = node.setdefault(part, {})
            node[last] = value
        (root / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")

    return breaks


def drop_estimate(root: Path) -> None:
    """The evidence table loses one labelled share class (as if computed before it arrived)."""
    path = root / "data/evidence/estimates.parquet"
    table = pd.read_parquet(path)
    table[table["split"] != "unlabelled"].iloc[1:].to_parquet(path, index=False)


def methodology(fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def breaks(root: Path) -> None:
        path = root / "methodology/default.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        fn(data)
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")

    return breaks


def write_file(rel: str, content: bytes) -> Callable[[Path], None]:
    def breaks(root: Path) -> None:
        (root / rel).write_bytes(content)

    return breaks


def gz(root: Path) -> None:
    (root / SOURCE).write_bytes(gzip.compress(csv_text(root).encode()))


def zipped(root: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("funds.csv", csv_text(root))
    (root / SOURCE).write_bytes(buffer.getvalue())


def criterion(**change) -> Callable[[dict], None]:
    def fn(m: dict) -> None:
        m["criteria"][0].update(change)

    return fn


HOSTILE = {
    "message content None": [{"role": "assistant", "content": None}],
    "not a message list": [{"role": "assistant"}, "stray", None, 7],
    "JSON nested past the recursion limit": "[" * 100_000,
    "NaN score": '{"grade": 3, "score": NaN, "reasoning": "Sharpe ratio top 10%"}',
    "Infinity score": '{"grade": 3, "score": 1e999, "reasoning": "Sharpe ratio top 10%"}',
    "NUL bytes only": "\x00" * 64,
}

CASES = [
    # -- the source file (ingest)
    Case("source file missing", "ingest", lambda r: (r / SOURCE).unlink(), ("funds.csv",)),
    Case(
        "source path is a folder",
        "ingest",
        lambda r: ((r / SOURCE).unlink(), (r / SOURCE).mkdir()),
        ("funds.csv", "folder"),
    ),
    Case("empty file", "ingest", write_file(SOURCE, b""), ("funds.csv", "empty")),
    Case(
        "document about an unknown fund",
        "ingest",
        write_file(
            "documents/note.md", b"---\nfund_id: NOPE1\ndate: 2024-03-01\nkind: news\n---\nThe lead manager left."
        ),
        ("note.md", "field fund_id", "NOPE1"),
        area="documents",
    ),
    Case(
        "document with a bad date",
        "ingest",
        write_file("documents/note.md", b"---\ncompany: X\ndate: 2024-02-30\nkind: news\n---\nThe regulator fined it."),
        ("note.md", "field date", "2024-02-30"),
        area="documents",
    ),
    Case("header only", "ingest", edit_csv(lambda lines: lines[:1]), ("no rows",)),
    Case(
        "UTF-16 without a byte-order mark",
        "ingest",
        lambda r: set_csv(r, csv_text(r), "utf-16-le"),
        ("UTF-16", "ingest.encoding"),
    ),
    Case("gzip file named .csv", "ingest", gz, ("gzip",)),
    Case("zip file named .csv", "ingest", zipped, ("zip",)),
    Case("binary junk", "ingest", write_file(SOURCE, bytes(range(256)) * 8), ("funds.csv",)),
    Case("NUL byte in a name", "ingest", cell("name", 3, "Fund\x00X"), ("NUL", "data row 3 (line 4)")),
    Case("required column missing", "ingest", drop_column("category"), ("category",)),
    Case("text in a numeric column", "ingest", cell("return_1y", 2, "a lot"), ("return_1y", "a lot")),
    Case(
        "row cut short",
        "ingest",
        edit_csv(lambda lines: lines[:5] + [",".join(lines[5].split(",")[:4])] + lines[6:]),
        ("data row 5 has 4",),
    ),
    Case(
        "row with extra fields",
        "ingest",
        edit_csv(lambda lines: lines[:4] + [lines[4] + ",9,9"] + lines[5:]),
        ("data row 4 has",),
    ),
    Case(
        "unclosed quote swallowing the rest",
        "ingest",
        edit_csv(lambda lines: lines[:3] + [lines[3].replace(",", ',"', 1)] + lines[4:]),
        ("funds.csv", "line 4", "never closed"),
    ),
    Case("only blank lines", "ingest", write_file(SOURCE, b"\n\n  \n\n"), ("funds.csv", "blank lines")),
    Case(
        "a line of megabytes (no line ends)",
        "ingest",
        write_file(SOURCE, b"fund," * 400_000),
        ("line 1", "2,000,000 characters", "MAX_LINE_CHARS"),
    ),
    Case(
        "delimiter setting does not match the file",
        "ingest",
        set_params(ingest__delimiter=";"),
        ("ingest.delimiter", "','"),
    ),
    Case(
        "N/A in a numeric column (no NA markers configured)",
        "ingest",
        cell("return_1y", 2, "N/A"),
        ("return_1y", "N/A", "na_values"),
    ),
    Case(
        "repeated share class id",
        "validate",
        edit_csv(lambda lines: lines + [lines[1]]),
        ("share_class_id",),
        after=("ingest",),
    ),
    Case("expert grade as text", "ingest", cell("expert_grade", 2, "five"), ("expert_grade", "five")),
    Case(
        "decimal commas not configured",
        "ingest",
        lambda r: set_csv(r, csv_text(r).replace(",", ";").replace(".", ",")),
        ("decimal",),
    ),
    # -- doubts that cannot be decided for certain: accepted, and named in ingest's line and the validation report
    Case(
        "Windows-1252 accents read as cp949",
        "validate",
        named("Åland £Growth Fund", "cp1252"),
        ("encoding guessed as cp949", "cp1252"),
        exit=0,
        after=("ingest",),
        reported=True,
    ),
    Case(
        "Windows-1252 quotes read as latin-1",
        "validate",
        named("“Alpha” Société Fund", "cp1252"),
        ("U+0080-U+009F", "cp1252"),
        exit=0,
        after=("ingest",),
        reported=True,
    ),
    Case(
        "last row without a line end",
        "validate",
        lambda r: set_csv(r, csv_text(r).rstrip("\n")),
        ("no line end",),
        exit=0,
        after=("ingest",),
        reported=True,
    ),
    # -- validation (Great Expectations) on what ingest accepted
    Case("absurd volatility", "validate", cell("volatility_3y", 2, "-40"), ("volatility_3y",), after=("ingest",)),
    Case("absurd ongoing charge", "validate", cell("ongoing_cost", 3, "250"), ("ongoing_cost",), after=("ingest",)),
    Case(
        "no expert grades",
        "validate",
        edit_csv(
            lambda lines: (
                [lines[0]]
                + [
                    ",".join(
                        "" if i == lines[0].split(",").index("expert_grade") else f
                        for i, f in enumerate(line.split(","))
                    )
                    for line in lines[1:]
                ]
            )
        ),
        ("expert_grade",),
        after=("ingest",),
    ),
    Case("too few rows", "validate", edit_csv(lambda lines: lines[:4]), ("rows",), after=("ingest",)),
    # -- params.yaml
    Case("params key misspelled", "ingest", set_params(ingest__encodng="utf-8"), ("encodng", "ingest"), area="params"),
    Case("params section misspelled", "validate", set_params(validat={"min_rows": 3}), ("validat",), area="params"),
    Case(
        "params wrong type",
        "validate",
        set_params(validate__min_rows="many"),
        ("validate.min_rows", "many"),
        area="params",
    ),
    Case(
        "params choice not allowed",
        "prepare",
        set_params(prepare__prompt_style="short"),
        ("prompt_style", "short"),
        area="params",
    ),
    Case(
        "params not YAML",
        "ingest",
        write_file("params.yaml", b"ingest: [unclosed\n  path: x\n"),
        ("params.yaml",),
        area="params",
    ),
    Case(
        "invalid regular expression in fund_id_strip",
        "ingest",
        set_params(ingest__fund_id_strip=["(direct"]),
        ("ingest.fund_id_strip[0]", "(direct"),
        area="params",
    ),
    Case("params.yaml missing", "ingest", lambda r: (r / "params.yaml").unlink(), ("params.yaml",), area="params"),
    Case(
        "params shares out of range", "prepare", set_params(prepare__train_share=1.4), ("train_share",), area="params"
    ),
    Case(
        "GRPO with one completion a prompt (no advantage to learn from)",
        "prepare",  # refused by the first stage that loads params, not when GRPO starts after SFT
        set_params(grpo__num_generations=1),
        ("grpo.num_generations", "at least 2"),
        area="params",
    ),
    Case(
        "a drift share no batch could reach",
        "ingest",
        set_params(monitor__drift_share=1.5),
        ("monitor.drift_share", "at most 1"),
        area="params",
    ),
    Case(
        "a stage given an argument",
        "ingest:profiles/tiny.yaml",
        lambda r: None,
        ("params.yaml only",),
        exit=2,
        area="params",
    ),
    # -- the methodology file
    Case(
        "methodology file missing",
        "methodology",
        lambda r: (r / "methodology/default.yaml").unlink(),
        ("default.yaml",),
        area="methodology",
    ),
    Case(
        "methodology not YAML",
        "methodology",
        write_file("methodology/default.yaml", b"criteria: [\n"),
        ("default.yaml",),
        area="methodology",
    ),
    Case(
        "grade labels as a list",
        "methodology",
        methodology(lambda m: m["grades"][0].update(label=["poor", "매우 부진"])),
        ("grade band 1", "label", "list"),
        area="methodology",
    ),
    Case(
        "criterion metric unknown",
        "methodology",
        methodology(criterion(metric="alpha_9y")),
        ("alpha_9y",),
        area="methodology",
    ),
    Case(
        "expert score as a criterion",
        "methodology",
        methodology(criterion(metric="expert_score")),
        ("expert_score", "label"),
        area="methodology",
    ),
    Case("weights do not sum to one", "methodology", methodology(criterion(weight=5)), ("weight",), area="methodology"),
    Case("negative weight", "methodology", methodology(criterion(weight=-0.2)), ("weight",), area="methodology"),
    Case(
        "bands overlap",
        "methodology",
        methodology(lambda m: m["grades"][0].update(max=m["grades"][1]["max"])),
        ("grade",),
        area="methodology",
    ),
    Case(
        "band bound not a number",
        "methodology",
        methodology(lambda m: m["grades"][0].update(min="low")),
        ("min", "low"),
        area="methodology",
    ),
    Case(
        "reasoning min above max",
        "methodology",
        methodology(
            lambda m: m.setdefault("output", {}).setdefault("reasoning", {}).update(min_chars=300, max_chars=100)
        ),
        ("min_chars", "max_chars"),
        area="methodology",
    ),
    Case(
        "two grade bands where the experts give five",
        "evidence",
        methodology(
            lambda m: m.update(
                grades=[
                    {"grade": 1, "min": 0, "max": 50, "label": {"en": "low", "ko": "낮음"}},
                    {"grade": 2, "min": 50, "max": 100, "label": {"en": "high", "ko": "높음"}},
                ]
            )
        ),
        ("expert_grade 3, 4, 5", "bands must cover"),
        area="methodology",
        after=("methodology",),
    ),
    Case(
        "language not supported",
        "methodology",
        methodology(lambda m: m.update(language="fr")),
        ("language", "fr"),
        area="methodology",
    ),
    Case(
        "repeated criterion",
        "methodology",
        methodology(lambda m: m["criteria"].append(dict(m["criteria"][0]))),
        ("criteri",),
        area="methodology",
    ),
    Case(
        "grades do not cover the data's",
        "prepare",
        methodology(lambda m: (m["grades"][-2].update(max=100), m["grades"].pop())),
        ("expert_grade 5", "data rows"),
        area="methodology",
        after=("methodology",),
    ),
    Case(
        "criterion without a weight",
        "methodology",
        methodology(lambda m: m["criteria"][0].pop("weight")),
        ("criterion 1", "weight"),
        area="methodology",
    ),
    Case("no grade bands", "methodology", methodology(lambda m: m.pop("grades")), ("grades",), area="methodology"),
    # -- the statistical evidence (stage evidence) that prepare shows and checks
    Case(
        "evidence file missing",
        "prepare",
        lambda r: (r / "data/evidence/estimates.parquet").unlink(),
        ("data/evidence/estimates.parquet", "dvc repro evidence"),
        area="evidence",
    ),
    Case(
        "evidence from another split",
        "prepare",
        set_params(prepare__seed=99),
        ("data/evidence/estimates.parquet", "another split", "dvc repro evidence"),
        area="evidence",
    ),
    Case(
        "stale evidence (a share class missing)",
        "prepare",
        drop_estimate,
        ("no estimate for 1 share class", "stale", "dvc repro evidence"),
        area="evidence",
    ),
    Case(
        "confidence threshold outside 0-1",
        "prepare",
        set_params(evaluate__review_below=1.5),
        ("evaluate.review_below", "between 0 and 1"),
        area="params",
    ),
    # -- model completions, as the GRPO step hands them to the rewards: scored 0, never an exception
    *[
        Case(f"completion: {label}", f"rewards:{i}", lambda r: None, (), exit=0, area="completions")
        for i, label in enumerate(HOSTILE)
    ],
    # -- profiles and flow parameters
    Case("unknown profile", "profiles:nosuch", lambda r: None, ("nosuch",), area="flow"),
    Case(
        "profile with an unknown key",
        "profiles:broken",
        write_file("profiles/broken.yaml", b"grpo: {betta: 1}\n"),
        ("betta",),
        area="flow",
    ),
    Case("flow override unknown key", "flow:grpo.betta=1", lambda r: None, ("betta",), area="flow"),
    Case("flow override wrong type", "flow:grpo.beta=high", lambda r: None, ("grpo.beta", "number"), area="flow"),
    Case("flow override not key=value", "flow:grpo.beta", lambda r: None, ("key=value",), exit=2, area="flow"),
]


# ------------------------------------------------------------------ workspace


def digest(root: Path, paths=OUTPUTS) -> dict[str, str]:
    out = {}
    for rel in paths:
        base = root / rel
        for f in (
            sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else ([base] if base.exists() else [])
        ):
            out[str(f.relative_to(root))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def run_entry(root: Path, entry: str, capsys) -> tuple[object, str]:
    """(exit status, or "traceback"; stdout + stderr) of one entry point, run in `root`."""
    old_cwd, old_argv = Path.cwd(), sys.argv
    os.chdir(root)
    try:
        kind, _, arg = entry.partition(":")
        if kind == "rewards":  # every reward function on one hostile completion: all 0, none raises

            def main() -> None:
                from fundgrpo.methodology import compiler as meth
                from fundgrpo.params import GrpoParams
                from fundgrpo.training.rewards import bind

                m = meth.load("methodology/documents.yaml")  # every reward reads, those of documents too
                completion = list(HOSTILE.values())[int(arg)]
                for name, fn in bind(m, meth.output_schema(m), GrpoParams()).items():
                    got = fn(
                        [completion],
                        expert_grade=[3],
                        expert_score=[50.0],
                        evidence=['{"sharpe_3y": 80}'],
                        shown_grade=[3],
                        rule_grade=[3],
                        documents=['{"D1": "The lead manager resigned."}'],
                        pillars=['{"people": {"judgement": -1, "evidence": []}}'],
                    )
                    if got != [0.0]:
                        sys.exit(f"{name} reward gave {got}")
                print("every reward 0, none raised")
        elif kind == "profiles":
            sys.argv = ["fundgrpo.profiles", "apply", arg]
            main = importlib.import_module("fundgrpo.profiles").main
        elif kind == "flow":  # what the training flow does with its overrides, before any stage
            from flows import common
            from flows.training_flow import main as flow_main

            def main() -> None:
                pairs = [arg]
                if any("=" not in p for p in pairs):
                    sys.exit(flow_main(pairs))
                common.apply_overrides(root / "params.yaml", dict(p.split("=", 1) for p in pairs))
        else:
            sys.argv = [f"stages.{kind}", *([arg] if arg else [])]
            main = importlib.import_module(f"stages.{kind}").main
        try:
            main()
            code: object = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - a library error class counts as clear only with a clear message
            from fundgrpo.params import ParamsError

            code = 1 if isinstance(e, ParamsError) else "traceback"
            print(f"{type(e).__name__}: {e}" if code == 1 else traceback.format_exc(), file=sys.stderr)
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A workspace with a small canonical export as its source."""
    root = tmp_path_factory.mktemp("bad-input") / "repo"
    root.mkdir()
    shutil.copytree(REPO / "methodology", root / "methodology")
    shutil.copytree(REPO / "profiles", root / "profiles")
    (root / "documents").mkdir()  # the default documents folder: none yet
    params = profiles.load("tiny", REPO / "params.yaml", REPO / "profiles")
    data = yaml.safe_load(render(params))
    data["ingest"].update(source="table", path=SOURCE)
    (root / "params.yaml").write_text(render(from_dict(Params, data)), encoding="utf-8")
    funds = synthetic.later_batch(params.synthetic, 1).drop(columns=["as_of"], errors="ignore")
    (root / SOURCE).parent.mkdir(parents=True)
    funds.to_csv(root / SOURCE, index=False)
    return root


def restore(root: Path, pristine: Path) -> None:
    for rel in INPUTS:
        target, source = root / rel, pristine / rel.replace("/", "__")
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)


@pytest.fixture(scope="module")
def good_run(workspace):
    """The workspace after a good run of the data stages, and a pristine copy of its inputs and outputs."""
    root = workspace
    capture = _Capture()
    for stage in STAGES:
        code, text = run_entry(root, stage, capture)
        assert code == 0, f"{stage}: {text}"
    pristine = root.parent / "pristine"
    pristine.mkdir()
    for rel in INPUTS:
        (shutil.copytree if (root / rel).is_dir() else shutil.copy2)(root / rel, pristine / rel.replace("/", "__"))
    return root, pristine


class _Capture:
    """capsys for a module-scoped fixture: the entry points print, nothing is checked."""

    def readouterr(self):
        return type("Out", (), {"out": "", "err": ""})()


RESULTS: list[dict] = []


def headline(text: str, names: tuple[str, ...]) -> str:
    """The line of the output that names the problem (for the table), shortened."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    hits = [line for line in lines if names and names[0].lower() in line.lower()]
    return ((hits or lines or [""])[0])[:160]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_named_and_loses_nothing(case: Case, good_run, capsys):
    root, pristine = good_run
    restore(root, pristine)
    try:
        case.breaks(root)
        for stage in case.after:  # the stages before the one under test, as `dvc repro` would run them
            code, text = run_entry(root, stage, capsys)
            assert code == 0, f"{stage} should accept this input: {text}"
        good = digest(root)  # the last good run's outputs, as the entry under test finds them
        code, text = run_entry(root, case.entry, capsys)
        unchanged = None if case.reported else digest(root) == good  # a reported case is accepted: its outputs are new
        named = all(n.lower() in text.lower() for n in case.names)
        RESULTS.append(
            {
                "case": case.name,
                "area": case.area,
                "entry": case.entry,
                "exit": code,
                "clear": named and code == case.exit,
                "unchanged": unchanged,
                "reported": case.reported,
                "message": headline(text, case.names),
            }
        )
        assert code == case.exit, text
        assert named, f"expected {case.names} in: {text}"
        assert unchanged is not False, "an output of the last good run changed"
        if case.reported:
            report = json.loads((root / "reports/validation/summary.json").read_text(encoding="utf-8"))
            assert any(
                case.names[0].lower() in n.lower() for n in report["ingest_notes"]
            )  # in the validation report too
    finally:
        restore(root, pristine)


def test_the_trust_table_counts_this_suite():
    """The README's trust table (research/results/robustness.json, from `python tools/robustness.py`)
    counts the cases this suite has now: a case added or removed means running the tool again."""
    summary = json.loads((REPO / "research/results/robustness.json").read_text(encoding="utf-8"))
    counted = next(s["cases"] for s in summary if s["area"] == "all")
    assert counted == len(CASES), (
        f"{counted} cases counted, {len(CASES)} in the suite: run `python tools/robustness.py`"
    )
