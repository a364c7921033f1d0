"""How fast could SmolLM2-135M evaluate funds on this CPU if every multiply-add ran at the machine's own matrix
speed? Counts the multiply-adds of one fund's evaluation as the `smollm2` profile serves it (the prompt's own
tokens through every layer, each answer token through every layer and the output layer, the `digits` belief's
trie nodes likewise, attention over the context), times bfloat16 and float32 matrix products of the model's own
shapes at two threads, and prints the ceiling in funds a second: nothing else (padding, copies, attention
kernels, Python) is counted, so a real evaluation is slower.

    python research/experiments/smollm2_floor/floor.py --config MODEL_FOLDER/config.json

The token counts default to what the `smollm2` run measured (prompts of 195 tokens, 27 shared by a batch and run
once; answers of 41.5 tokens, a batch of 128 running 43 steps; 10 trie nodes). Prints only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def macs_per_token(cfg: dict, context: float, output_layer: bool) -> float:
    """Multiply-adds for one token through the decoder at a given context length (and the output layer)."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head = cfg.get("head_dim") or h // heads
    proj = h * heads * head * 2 + h * kv * head * 2  # q and o, k and v
    mlp = 3 * h * inter
    attention = 2 * heads * head * context  # scores and the weighted sum
    return cfg["num_hidden_layers"] * (proj + mlp + attention) + (h * cfg["vocab_size"] if output_layer else 0)


def gemm_rate(rows: int, k: int, n: int, dtype, repeats: int = 9) -> float:
    """Median GFLOP/s of a [rows, k] @ [k, n] product."""
    import torch

    a, b = torch.randn(rows, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    a @ b
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - started)
    return 2 * rows * k * n / statistics.median(times) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--prompt", type=float, default=195)
    ap.add_argument("--shared", type=float, default=27)
    ap.add_argument("--steps", type=float, default=43)
    ap.add_argument("--nodes", type=float, default=10)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(2)
    cfg = json.loads(args.config.read_text())
    own = args.prompt - args.shared
    prefill = own * macs_per_token(cfg, args.shared + own / 2, False)  # the last token's output layer: below
    decode = args.steps * macs_per_token(cfg, args.prompt + args.steps / 2, True)
    belief = args.nodes * macs_per_token(cfg, args.prompt + args.steps, True)
    total = prefill + decode + belief
    parts = {"prefill": prefill, "answer": decode, "belief": belief, "all": total}
    print("GFLOP a fund: " + ", ".join(f"{k} {2 * v / 1e9:.1f}" for k, v in parts.items()))
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    head = h * vocab  # the output layer's multiply-adds a token
    for dtype in (torch.bfloat16, torch.float32):
        rates = {
            "prefill": gemm_rate(int(args.batch * own), h, inter, dtype),
            "decoding": gemm_rate(args.batch, h, inter, dtype),
            "output layer": gemm_rate(args.batch, h, vocab, dtype),
        }
        # each part at the rate of its own shape: the prompt's big products, then a token a row at a time
        layers = decode + belief - (args.steps + args.nodes) * head
        seconds = (
            2 * prefill / rates["prefill"]
            + 2 * layers / rates["decoding"]
            + 2 * (args.steps + args.nodes + 1) * head / rates["output layer"]
        ) / 1e9
        shown = ", ".join(f"{k} {v:.0f}" for k, v in rates.items())
        print(
            f"{str(dtype)[6:]}: GFLOP/s {shown}; {seconds * args.batch:.1f} s for {args.batch} funds, "
            f"{1 / seconds:.2f} funds/s at most"
        )


if __name__ == "__main__":
    main()
