"""dvc.yaml's deps are the code each stage runs: its import closure, checked here so the graph
cannot drift; and DVC acts on them (a touched module reruns the stages that import it, only those)."""

from __future__ import annotations

from tests.support import run, tiny_copy
from tools import stage_deps


def test_every_stage_lists_the_modules_it_imports_and_the_params_it_reads():
    problems = stage_deps.differences()
    assert not problems, (
        "dvc.yaml is out of step with the code (`python tools/stage_deps.py --write` fixes it):\n" + "\n".join(problems)
    )


def test_closure_follows_lazy_imports_and_packages():
    files = {p.relative_to(stage_deps.REPO).as_posix() for p in stage_deps.closure("stages.grpo")}
    # the trainer, what it imports, and each package's __init__ on the way
    assert {
        "stages/grpo.py",
        "fundgrpo/training/grpo_trainer.py",
        "fundgrpo/training/rewards.py",
        "fundgrpo/model/modelling.py",
        "fundgrpo/training/__init__.py",
        "fundgrpo/model/__init__.py",
        "fundgrpo/__init__.py",
    } <= files
    assert "fundgrpo/serving/api/app.py" not in files


def test_a_missing_dep_is_named(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "stages").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "stages" / "one.py").write_text("from lib import helper\n", encoding="utf-8")
    (root / "lib" / "__init__.py").write_text("", encoding="utf-8")
    (root / "lib" / "helper.py").write_text("import json\n", encoding="utf-8")
    (root / "dvc.yaml").write_text(
        "stages:\n  one:\n    cmd: python -m stages.one\n    deps: [stages/one.py]\n", encoding="utf-8"
    )
    monkeypatch.setattr(stage_deps, "REPO", root)
    monkeypatch.setattr(stage_deps, "DVC_FILES", ("dvc.yaml",))
    stage_deps.closure.cache_clear()
    try:
        problems = stage_deps.differences()
        assert stage_deps.main([]) == 1  # the command fails too, printing the same lines
    finally:
        stage_deps.closure.cache_clear()
    assert "dvc.yaml: stage one imports lib/helper.py but its deps miss it" in problems
    assert "dvc.yaml: stage one imports lib/__init__.py but its deps miss it" in problems


def test_editing_an_imported_module_reruns_its_stage_only(tmp_path):
    """Real DVC in a temp git repo: after a first `dvc repro`, a comment added to a module that
    `ingest` imports (and `methodology` does not) reruns ingest and leaves methodology alone."""
    root = tiny_copy(tmp_path / "repo")
    targets = ["ingest", "methodology"]
    run(["dvc", "repro", *targets], root)  # the synthetic source is generated first (synthetic/dvc.yaml)
    assert "didn't change" in run(["dvc", "repro", *targets], root).stdout.replace("did not change", "didn't change")
    module = root / "fundgrpo" / "data" / "navmetrics.py"
    assert module.relative_to(root).as_posix() not in stage_deps.expected("stages.methodology", stage_deps.REPO)
    module.write_text(module.read_text(encoding="utf-8") + "\n# touched\n", encoding="utf-8")
    out = run(["dvc", "repro", *targets], root).stdout
    assert "Running stage 'ingest'" in out, out
    assert "Running stage 'methodology'" not in out, out
