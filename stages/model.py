"""Stage `model`: the starting model, in `models/base/`.

- `model.pretrained` empty (the embedded default): train a tokenizer on the training
  prompts and answers and build a compact Qwen3, saved with `save_pretrained`.
- a GGUF file (`package:<module>/<file>.gguf` or a path): convert it once into a Hugging
  Face folder (safetensors, tokenizer with chat template, generation config;
  `fundgrpo/training/pretrained.py`).
- a Hugging Face folder or hub name (e.g. `Qwen/Qwen3-0.6B`): write a pointer that later
  stages pass to `from_pretrained`; nothing is copied.

A failed run leaves the last good `models/base/` in place (atomic output).
"""

from __future__ import annotations

import json
from pathlib import Path

from fundgrpo import io
from fundgrpo.cli import run_stage
from fundgrpo.params import ModelParams, load_params
from fundgrpo.training import modelling, pretrained


def corpus(rows: list[dict]) -> list[str]:
    """Texts the tokenizer learns from: prompts and reference answers (training split only)."""
    texts = []
    for r in rows:
        texts.extend(m["content"] for m in r["prompt"])
        texts.append(r["reference"])
    return texts


def run(params: ModelParams, train_rows: list[dict], out_dir: Path) -> dict:
    """Write the base model (or its pointer) into `out_dir`; return a description."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if params.pretrained and pretrained.parse(params.pretrained) is not None:
        return pretrained.convert(params.pretrained, out_dir, params.chat_template, params.dtype)
    if params.pretrained:
        (out_dir / modelling.POINTER).write_text(json.dumps({"name_or_path": params.pretrained}) + "\n")
        return {"pretrained": params.pretrained}
    tokenizer = modelling.build_tokenizer(corpus(train_rows), params.arch.vocab_size)
    model = modelling.build_model(params.arch, tokenizer)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"parameters": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer)}


def main() -> None:
    def body() -> None:
        p = load_params()
        rows = io.read_jsonl(Path(p.prepare.out_dir) / "train.jsonl")
        with io.atomic_path(p.model.out_dir) as tmp:
            info = run(p.model, rows, tmp)
        print(f"model: {info}")

    run_stage("model", body)


if __name__ == "__main__":
    main()
