"""Stage `model`: the starting model, in `models/base/`.

- `model.pretrained` empty (the embedded default): train a tokenizer on the training
  prompts and answers and build a compact Qwen3, saved with `save_pretrained`.
- a GGUF file (`package:<module>/<file>.gguf` or a path): convert it once into a Hugging
  Face folder (safetensors, tokenizer with chat template, generation config;
  `fundgrpo/model/pretrained.py`).
- a Hugging Face folder or hub name (e.g. `Qwen/Qwen3-0.6B`): write a pointer that later
  stages pass to `from_pretrained`; nothing is copied.

A failed run leaves the last good `models/base/` in place (atomic output).
"""

from __future__ import annotations

from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model.modelling import build_base
from fundgrpo.params import load_params


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = PromptRecord.read(Path(p.prepare.out_dir) / "train.jsonl")
        with io.atomic_path(p.model.out_dir) as tmp:
            info = build_base(p.model, rows, tmp)
        print(f"model: {info}")

    run_stage("model", body)


if __name__ == "__main__":
    main()
