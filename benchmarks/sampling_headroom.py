"""Is there anything for GRPO to sharpen? Greedy answers against k sampled answers per prompt.

GRPO mostly moves a policy's single sample towards what its best samples already do. Where the
majority vote of k samples (maj@k) beats the greedy answer, sharpening has headroom; where greedy
is already ahead, GRPO can only add through new information in its reward (labels the start has
not fitted). Run in a checkout with a profile applied and `prepare` done:

    python benchmarks/sampling_headroom.py models/sft 8            # MODEL K [TEMPERATURE]
    python benchmarks/sampling_headroom.py models/sft 8 0.7

Prints exact / within one / QWK / Spearman per split for greedy, one sample, maj@k and the mean
of the k grades rounded, plus pass@k (the expert's grade among the k samples) and the share of
prompts whose samples disagree. CPU minutes: not a test.
"""
import collections
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from fundgrpo import io, modelling
from fundgrpo.backtesting import predictions_from_texts
from fundgrpo.evaluation import grade_metrics
from fundgrpo.methodology import load_compiled
from fundgrpo.params import load_params

p = load_params()
model_dir, k = Path(sys.argv[1]), int(sys.argv[2])
temperature = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
rubric, schema = load_compiled(Path(p.methodology.out_dir))
source = modelling.resolve(model_dir)
tokenizer = AutoTokenizer.from_pretrained(source)
tokenizer.padding_side = "left"
model = AutoModelForCausalLM.from_pretrained(source).eval()
torch.manual_seed(p.grpo.seed)


def sampled_grades(rows: list[dict], batch_size: int = 32) -> list[list[int]]:
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            ids = model.generate(**batch, max_new_tokens=p.grpo.max_completion_length, do_sample=True, temperature=temperature,
                                 num_return_sequences=k, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
        grades = [a["grade"] for a in predictions_from_texts(tokenizer.batch_decode(ids[:, batch["input_ids"].shape[1] :], skip_special_tokens=True), rubric, schema)]
        out += [grades[i : i + k] for i in range(0, len(grades), k)]
    return out


print(f"model {source}, k={k}, temperature={temperature}")
print("| split | decision | exact | within one | QWK | Spearman |\n|---|---|---|---|---|---|")
notes = []
for name in ("validation", "test"):
    rows = io.read_jsonl(Path(p.prepare.out_dir) / f"{name}.jsonl")
    expert = [r["expert_grade"] for r in rows]
    samples = sampled_grades(rows)
    greedy = [a["grade"] for a in predictions_from_texts(modelling.generate(model, tokenizer, [r["prompt"] for r in rows], p.grpo.max_completion_length, 64), rubric, schema)]
    decisions = {
        "greedy": greedy,
        "one sample": [s[0] for s in samples],
        f"maj@{k}": [collections.Counter(s).most_common(1)[0][0] for s in samples],
        f"mean@{k}": [int(round(np.mean(s))) for s in samples],
    }
    for label, pred in decisions.items():
        m = grade_metrics(expert, pred, rubric["grades"])
        print(f"| {name} | {label} | {m['exact']:.3f} | {m['within_one']:.3f} | {m['qwk']:.3f} | {m['spearman']:.3f} |")
    notes.append(f"{name}: pass@{k} {np.mean([e in s for e, s in zip(expert, samples)]):.3f}, "
                 f"samples disagree on {np.mean([len(set(s)) > 1 for s in samples]):.3f} of prompts")
print("\n".join(notes))
