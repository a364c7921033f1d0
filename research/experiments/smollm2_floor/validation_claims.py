"""A workspace's models on its validation funds, greedy, as `calibrate` generates them: valid answers, the
written grade's agreement with the experts, and the evaluation's claims (how many, the share misstated, the share
of answers complete). The figures a prompt layout is chosen on (`prepare.show_bands` was, over three seeds).

    python research/experiments/smollm2_floor/validation_claims.py [--models models/sft models/policy]

Run in a workspace where `grpo` has run (e.g. one kept by `benchmarks/time/pipeline.py --keep`), with this checkout's
`fundgrpo` on `PYTHONPATH`; the params' generation dtype and batch size. Prints one JSON line a model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["models/sft", "models/policy"])
    args = ap.parse_args()

    from fundgrpo import io
    from fundgrpo.evaluation import agreement
    from fundgrpo.methodology.compiler import load_compiled
    from fundgrpo.model import inference, modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure

    configure()
    p = load_params()
    rows = io.read_jsonl(Path(p.prepare.out_dir) / "validation.jsonl")
    methodology, schema = load_compiled(Path(p.methodology.out_dir))
    for folder in args.models:
        model, tok = modelling.load(folder, p.generation.dtype)
        model.eval()
        preds = inference.answer(
            model, tok, rows, methodology, schema, p.generation.max_new_tokens, p.generation.batch_size, folder
        )
        valid = [x for x in preds if x["valid"]]
        made = sum(x.get("claims", 0) for x in valid)
        found = agreement.metrics(rows, preds, methodology.grades)
        print(json.dumps({
            "model": folder,
            "funds": len(rows),
            "valid": len(valid),
            "exact": found["exact"],
            "qwk": found["qwk"],
            "claims_per_answer": round(made / len(valid), 2) if valid else None,
            "misstated": round(sum(len(x.get("unsupported", [])) for x in valid) / made, 4) if made else None,
            "complete": round(sum(bool(x.get("complete")) for x in valid) / len(valid), 4) if valid else None,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
