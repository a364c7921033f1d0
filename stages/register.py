"""Stage `register`: log the run to MLflow, register the model, apply the promotion gate.

The stage reads params.yaml and calls `fundgrpo.registry.registration`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import json
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.evaluation.calibration import CalibrationFit
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.registry.registration import register, unreachable


def main() -> None:
    def body() -> None:
        p = load_params()
        backtest = json.loads(Path(p.backtest.metrics).read_text())
        train = json.loads(Path(p.grpo.metrics).read_text())
        curves = json.loads(Path(p.grpo.reward_curves).read_text())
        rows = PromptRecord.read(Path(p.prepare.out_dir) / "test.jsonl")
        schema_dir = Path(p.methodology.out_dir)
        methodology, schema = load_compiled(schema_dir)
        artifacts = [*map(Path, p.register.artifacts), schema_dir, Path(p.calibrate.out)]
        calibration = CalibrationFit.of(json.loads(Path(p.calibrate.out).read_text(encoding="utf-8")))
        try:
            decision = register(p, backtest, train, curves, rows, methodology, schema, artifacts, calibration)
        except Exception as err:
            raise unreachable(mlflow_registry.tracking_uri(p.register)) or err
        io.write_json(decision, p.register.decision)
        verb = "promoted to champion" if decision["promoted"] else "kept as challenger"
        print(f"register: {decision['model_name']} v{decision['version']} {verb}: {decision['reason']}")

    run_stage("register", body)


if __name__ == "__main__":
    main()
