"""What would take SmolLM2 to 5 funds/s on two cores? Greedy answers to the same validation prompts in one
batch, four ways: today's prompts left-padded (the tokenizer's batch, generation's layout until 2026-11-29);
the same with their shared beginning run once and its key-value cache copied to every row
(`modelling.prompt_batch`, as `modelling.generate` now does); a layout that states the methodology's fixed text
(weights, legend, answer format) first, in the system message, so that the shared beginning is half the prompt;
and that layout with a key-value cache that grows in place instead of by concatenation. Seconds and funds/s;
nothing is written.

Run in a checkout where `prepare` has run (e.g. a run kept by `benchmarks/time/pipeline.py --keep`), on its
validation prompts (the default's compact English prompts):

    python research/experiments/shared_prefix/shared_prefix.py --model FOLDER --funds 128 --max-new-tokens 48 --dtype bfloat16

FOLDER is a model folder (default: the params' `grpo.out_dir`), e.g. a converted SmolLM2. Each figure is the
median of `repeats` timed calls after one untimed. The model is not trained on the fixed-text-first layout: its
timing is the point, its answers are not. CPU minutes: not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path


def fixed_text_first(prompt: list[dict]) -> list[dict]:
    """The compact prompt with its fund-independent text moved into the system message: the weights (in the
    methodology's order, not the fund's), the legend and the answer format; the user turn keeps the fund's
    category, its percentiles with their bands, and the methodology's verdict."""
    lines = prompt[1]["content"].split("\n")
    head, legend, answer = lines[0], lines[1], lines[-1]
    title, category = head.split(" Category: ")
    rows, rest = [], []
    for line in lines[2:-1]:
        found = re.fullmatch(r"(.+?) (\d+|n/a)(.*) \((\d+%|context)\)", line)
        (rows if found else rest).append(found or line)
    weights = sorted(
        {(m.group(1), m.group(4)) for m in rows},
        key=lambda w: (w[1] == "context", -int(w[1][:-1]) if w[1] != "context" else 0, w[0]),
    )
    system = f"{prompt[0]['content']} {title} Weights: " + ", ".join(f"{a} {b}" for a, b in weights)
    system += f". {legend.split(',')[0]}. {answer}"
    user = [f"Category: {category}"] + [f"{m.group(1)} {m.group(2)}{m.group(3)}" for m in rows] + rest
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(user)}]


def grow_in_place() -> None:
    """Make transformers' `DynamicLayer` write new keys and values into a buffer with room to spare and
    return views of its filled part, instead of concatenating a new tensor every token."""
    from transformers.cache_utils import DynamicLayer

    def update(self, keys, values, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(keys, values)
        n = getattr(self, "filled", 0) if self.keys.numel() else 0
        if not self.keys.numel() or n + keys.shape[-2] > self.keys.shape[-2]:
            room = keys.new_empty(*keys.shape[:2], n + keys.shape[-2] + 64, keys.shape[-1])
            old_keys, old_values, self.keys, self.values = self.keys, self.values, room, room.clone()
            if n:
                self.keys[:, :, :n], self.values[:, :, :n] = old_keys[:, :, :n], old_values[:, :, :n]
        self.keys[:, :, n : n + keys.shape[-2]] = keys
        self.values[:, :, n : n + keys.shape[-2]] = values
        self.filled = n + keys.shape[-2]
        return self.keys[:, :, : self.filled], self.values[:, :, : self.filled]

    DynamicLayer.update = update
    DynamicLayer.get_seq_length = lambda self: getattr(self, "filled", 0) if self.is_initialized else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a model folder (default: the params' grpo.out_dir)")
    ap.add_argument("--funds", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch

    from fundgrpo import io
    from fundgrpo.model import modelling
    from fundgrpo.params import load_params
    from fundgrpo.threads import configure

    configure()
    params = load_params()
    rows = io.read_jsonl(Path(params.prepare.out_dir) / "validation.jsonl")[: args.funds]
    model, tok = modelling.load(args.model or Path(params.grpo.out_dir), args.dtype)
    model.eval()
    pad = tok.pad_token_id

    def texts(layout) -> list[str]:
        return [tok.apply_chat_template(layout(r["prompt"]), tokenize=False, add_generation_prompt=True) for r in rows]

    def left_padded(prompts: list[str]):
        batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=pad)
        return tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)

    def shared_once(prompts: list[str]):
        with torch.no_grad():
            batch = modelling.prompt_batch(model, tok, prompts)  # the shared beginning run once
            out = model.generate(**batch, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=pad)
        return tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)

    def timed(fn, prompts):
        fn(prompts)  # warm-up
        seconds, answers = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            answers = fn(prompts)
            seconds.append(time.perf_counter() - started)
        return statistics.median(seconds), answers

    today, moved = texts(lambda p: p), texts(fixed_text_first)
    runs = [
        ("today's prompts, left-padded", left_padded, today),
        ("today's prompts, shared beginning once", shared_once, today),
        ("fixed text first, shared beginning once", shared_once, moved),
    ]
    answers: dict[str, list[str]] = {}
    for name, fn, prompts in [*runs, ("fixed text first, shared once, cache grown in place", shared_once, moved)]:
        if name.endswith("in place"):
            grow_in_place()
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in prompts]
        seconds, answers[name] = timed(fn, prompts)
        reference = answers[runs[0][0] if prompts is today else runs[2][0]]
        record = {
            "layout": name,
            "funds": len(rows),
            "prompt_tokens": round(sum(map(len, ids)) / len(ids), 1),
            "shared_tokens": modelling.shared_length(ids),
            "seconds": round(seconds, 2),
            "funds_per_s": round(len(rows) / seconds, 2),
            "answers_as_layouts_first_run": sum(a == b for a, b in zip(answers[name], reference)),
        }
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
