"""Stage `sft`: supervised cold start on the reference answers (TRL `SFTTrainer`).

The stage reads params.yaml and calls `fundgrpo.training.sft_trainer`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.params import load_params
from fundgrpo.training.sft_trainer import run
from fundgrpo.training.shared import is_main_process


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
        if not is_main_process():  # another rank of `accelerate launch`: trains alongside rank 0, writes nothing
            with tempfile.TemporaryDirectory() as scratch:
                run(p.sft, p.model, Path(p.model.out_dir), rows, Path(scratch))
            return
        with io.atomic_path(p.sft.out_dir) as tmp:
            info = run(p.sft, p.model, Path(p.model.out_dir), rows, tmp)
            import shutil

            shutil.rmtree(tmp / "checkpoints", ignore_errors=True)
        io.write_json(info, "metrics/sft.json")
        print(f"sft: {info}")

    run_stage("sft", body)


if __name__ == "__main__":
    main()
