"""Stage `sft`: supervised cold start on the reference answers (TRL `SFTTrainer`).

The stage reads params.yaml and calls `fundgrpo.training.sft_trainer`; the logic, and its documentation, live there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.params import load_params
from fundgrpo.training.sft_trainer import run
from fundgrpo.training.shared import train_into


def main() -> None:
    def body() -> None:
        p = load_params()
        # the training funds with a written reference evaluation (all, unless prepare.reference_share < 1)
        rows = [r for r in PromptRecord.read(Path(p.prepare.out_dir) / "train.jsonl") if r.referenced]
        checkpoints = Path(p.sft.checkpoint_dir)
        info = train_into(
            p.sft.out_dir,
            lambda out: run(p.sft, p.model, Path(p.model.out_dir), rows, out, checkpoint_dir=checkpoints),
        )
        if info is None:  # another rank of `accelerate launch`
            return
        shutil.rmtree(checkpoints, ignore_errors=True)  # finished: nothing to resume
        io.write_json(info, p.sft.metrics)
        print(f"sft: {info}")

    run_stage("sft", body)


if __name__ == "__main__":
    main()
