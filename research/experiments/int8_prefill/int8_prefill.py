"""Does int8 arithmetic beat bfloat16 on a CPU prefill? float32, bfloat16 and dynamic int8 (torch.ao's
`quantize_dynamic` of every linear layer) on the same validation prompts: seconds for one batched forward
pass, and how often each picks float32's next token.

Run in a checkout where `prepare` has run (e.g. a run kept by `benchmarks/time/pipeline.py --keep`), on its
validation prompts; it writes nothing:

    python research/experiments/int8_prefill/int8_prefill.py --model FOLDER --prompts 32 --repeats 3

FOLDER is a model folder (default: params' `model.out_dir`), e.g. a converted SmolLM2. Each figure is the
median of `repeats` timed passes after one untimed. CPU minutes: not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a model folder (default: the params' model.out_dir)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import torch

    from fundgrpo import io
    from fundgrpo.model import modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure

    configure()
    params = load_params()
    rows = io.read_jsonl(Path(params.prepare.out_dir) / "validation.jsonl")[: args.prompts]
    folder = args.model or Path(params.model.out_dir)

    def prepared(dtype: str):
        model, tok = modelling.load(folder, "float32" if dtype == "int8" else dtype)
        model.eval()
        if dtype == "int8":  # weights int8 per tensor, activations quantized on the fly
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
        return model, tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)

    reference = None
    for dtype in ("float32", "bfloat16", "int8"):
        model, batch = prepared(dtype)
        with torch.no_grad():
            model(**batch)  # warm-up
            seconds = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                logits = model(**batch).logits[:, -1].float()
                seconds.append(time.perf_counter() - started)
        picked = logits.argmax(-1)
        reference = picked if reference is None else reference
        record = {
            "dtype": dtype,
            "prompts": len(rows),
            "prompt_tokens": int(batch["input_ids"].shape[1]),
            "seconds": round(statistics.median(seconds), 3),
            "same_next_token_as_float32": int((picked == reference).sum()),
        }
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
