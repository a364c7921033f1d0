"""How much of greedy generation is the model's arithmetic: `model.generate` against a bare loop over
the model's forward with its key-value cache (argmax, no logits processors or stopping criteria), and
the prefill alone, on a workspace's policy and test prompts; and the project's own `modelling.generate`
(the prompts' shared beginning run once, `modelling.prompt_batch`) on the same prompts in one batch.
Prints seconds; nothing is written.

    python benchmarks/time/generation_floor.py ROOT [--funds 128] [--max-new-tokens 96] [--model FOLDER]
        [--dtype bfloat16]

ROOT is a workspace where `dvc repro` has run; `--model` times another model folder (e.g. a converted
SmolLM2) on ROOT's prompts instead of ROOT's policy. Each figure is the second of two runs (the first warms up).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed(fn) -> tuple[float, object]:
    fn()  # warm-up
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--funds", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--model", type=Path, help="a model folder to time instead of ROOT's policy")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="generation.dtype")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parents[1]))
    import torch
    from transformers import DynamicCache

    from fundgrpo.model import modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure

    configure()
    p = load_params(args.root / "params.yaml")
    model, tok = modelling.load(args.model or args.root / p.grpo.out_dir, args.dtype)
    model.eval()
    lines = (args.root / p.prepare.out_dir / "test.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[: args.funds]]
    texts_in = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    batch = tok(texts_in, return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = batch["input_ids"], batch["attention_mask"]

    def generate():
        with torch.no_grad():
            out = model.generate(
                **batch, max_new_tokens=args.max_new_tokens, do_sample=False,
                pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
            )  # fmt: skip
        return out[:, ids.size(1) :]

    def bare():
        m, pos, cache = mask, (mask.cumsum(-1) - 1).clamp(min=0), DynamicCache()
        done = torch.zeros(ids.size(0), dtype=torch.bool)
        picked = []
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=m, position_ids=pos, past_key_values=cache, logits_to_keep=1)
            for _ in range(args.max_new_tokens):
                token = out.logits[:, -1].argmax(-1).masked_fill(done, tok.pad_token_id)
                picked.append(token)
                done |= token == tok.eos_token_id
                if done.all():
                    break
                m = torch.cat([m, torch.ones_like(m[:, :1])], dim=1)
                pos = pos[:, -1:] + 1
                out = model(input_ids=token[:, None], attention_mask=m, position_ids=pos, past_key_values=cache)
        return torch.stack(picked, dim=1)

    def project():
        return modelling.generate(model, tok, [r["prompt"] for r in rows], args.max_new_tokens, len(rows))

    def prefill():
        with torch.no_grad():
            return model(**batch, logits_to_keep=1)

    n_params = model.num_parameters()
    threads = torch.get_num_threads()
    shape = f"{args.funds} prompts of {ids.size(1)} tokens (padded), {n_params:,} parameters"
    print(f"{shape}, {args.dtype}, {threads} threads")
    s_generate, a = timed(generate)
    s_bare, b = timed(bare)
    s_prefill, _ = timed(prefill)
    s_project, texts = timed(project)
    plain = tok.batch_decode(a, skip_special_tokens=True)
    shared = modelling.shared_length([tok(t, add_special_tokens=False)["input_ids"] for t in texts_in])
    width = min(a.size(1), b.size(1))
    same = bool(torch.equal(a[:, :width], b[:, :width]))
    flops = 2 * n_params * int(mask.sum()) / s_prefill / 1e9
    print(f"model.generate {s_generate:.2f} s ({args.funds / s_generate:.1f} funds/s)")
    print(f"bare loop      {s_bare:.2f} s, the same tokens: {same}")
    print(f"prefill        {s_prefill:.2f} s (~{flops:.0f} GFLOP/s at 2 FLOPs a parameter a token)")
    same_texts = sum(x == y for x, y in zip(plain, texts))
    print(
        f"modelling.generate {s_project:.2f} s ({args.funds / s_project:.1f} funds/s), the first {shared} tokens "
        f"shared; answers as model.generate's: {same_texts} of {args.funds}"
    )


if __name__ == "__main__":
    main()
