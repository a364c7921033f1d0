"""Would a shorter prompt take SmolLM2's whole evaluation to 5 funds/s on this CPU? The API's evaluation
(`inference.answer`: generation, the answers parsed and checked, the `digits` belief read from the generation's
cache) of the same validation funds in one batch, with three prompt layouts: `compact` (the `smollm2` profile's),
the fixed text first (`../shared_prefix/`), and the fixed text first without the percentile bands ("(top 30%)"),
which leaves a fund's own lines as short as they can be while still naming each criterion. Seconds, funds/s,
prompt and answer tokens, valid answers; nothing is written.

    python research/experiments/smollm2_floor/layouts.py --model FOLDER --funds 128 --dtype bfloat16

Run in a workspace where `prepare` has run (e.g. a `smollm2` run kept by `benchmarks/time/pipeline.py --keep`). The
model is trained on `compact` only: the other layouts' timing is the point (their answers run to about the same
length), not their grades. Each figure is the median of `repeats` timed calls after one untimed. CPU minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared_prefix"))
from shared_prefix import fixed_text_first  # noqa: E402


def without_bands(prompt: list[dict]) -> list[dict]:
    """The fixed-text-first prompt less each criterion's band in parentheses: "Sharpe ratio 44 (bottom 50%)"
    becomes "Sharpe ratio 44"."""
    system, user = fixed_text_first(prompt)
    lines = [re.sub(r" \((top|bottom) \d+%\)$", "", line) for line in user["content"].split("\n")]
    return [system, {"role": "user", "content": "\n".join(lines)}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--funds", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    from fundgrpo import io
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.model import inference, modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure

    configure()
    params = load_params()
    rows = io.read_jsonl(Path(params.prepare.out_dir) / "validation.jsonl")[: args.funds]
    methodology, schema = load_compiled(Path(params.methodology.out_dir))
    model, tok = modelling.load(args.model, args.dtype)
    model.eval()
    layouts = [("compact", lambda p: p), ("fixed text first", fixed_text_first), ("... less the bands", without_bands)]
    for name, layout in layouts:
        laid = [r | {"prompt": layout(r["prompt"])} for r in rows]
        texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in laid]
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        seconds, preds, cached = [], [], {}
        for i in range(args.repeats + 1):
            cached = {"digits": []}
            started = time.perf_counter()
            preds = inference.answer(model, tok, laid, methodology, schema, 64, len(laid), name, cached=cached)
            if i:
                seconds.append(time.perf_counter() - started)
        took = statistics.median(seconds)
        record = {
            "layout": name,
            "funds": len(rows),
            "prompt_tokens": round(sum(map(len, ids)) / len(ids), 1),
            "shared_tokens": modelling.shared_length(ids),
            "answer_tokens": round(statistics.mean(len(tok(p["text"])["input_ids"]) for p in preds), 1),
            "valid": sum(p["valid"] for p in preds),
            "beliefs_read": sum(b != "unread" for b in cached["digits"]),
            "seconds": [round(s, 2) for s in seconds],
            "funds_per_s": round(len(rows) / took, 2),
        }
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
