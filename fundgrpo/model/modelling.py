"""Models: build the compact embedded default, load any causal LM, generate answers.

The embedded default is a small Qwen3 with a byte-level BPE tokenizer trained on
the project's own prompts, saved with `save_pretrained`; everything downstream
loads it with `from_pretrained(path)`, the same call that loads
`Qwen/Qwen3-0.6B` from a user's cache. Nothing here downloads.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

from tqdm.auto import tqdm

from fundgrpo.methodology import citations
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import pretrained
from fundgrpo.params import ModelArchParams, ModelParams

# TRL's trainers read transformers' deprecated `is_gradient_checkpointing`: a warning at every step that
# no user of this project can act on.
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
POINTER = "pretrained.json"  # models/base holds this instead of weights for a named model


def build_tokenizer(corpus: Iterable[str], vocab_size: int, merges: str = "words"):
    """A byte-level BPE tokenizer trained on `corpus`, digits split one by one.

    Digit-level tokens let a small model compare numbers; byte-level BPE covers
    any UTF-8 text (Korean included) with no unknown token. `merges`: "words" merges
    within a word only (GPT-2's split at spaces and punctuation); "phrases" splits at
    digits only, so the template's recurring text between two numbers (`%", "score": `,
    ` Sharpe ratio top `) can become one token.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=merges == "words"),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        padding_side="left",
    )
    fast.chat_template = CHATML
    return fast


def build_model(arch: ModelArchParams, tokenizer) -> Any:
    """A randomly initialised compact Qwen3 sized for a laptop CPU."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(arch.seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=arch.hidden_size,
        intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_hidden_layers,
        num_attention_heads=arch.num_attention_heads,
        num_key_value_heads=arch.num_key_value_heads,
        head_dim=arch.head_dim,
        max_position_embeddings=arch.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def resolve(path: str | Path) -> str:
    """What to pass to `from_pretrained`: a folder, or the name a pointer file in it names.

    >>> import tempfile, json, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / POINTER).write_text(json.dumps({"name_or_path": "Qwen/Qwen3-0.6B"}))
    >>> resolve(d)
    'Qwen/Qwen3-0.6B'
    """
    pointer = Path(path) / POINTER
    if pointer.exists():
        return json.loads(pointer.read_text())["name_or_path"]
    return str(path)


# What decides a folder's greedy answers (tokenizer.json is left out: GRPO re-saves it with
# padding settings that `load` overrides anyway).
ANSWER_FILES = (
    "config.json",
    "generation_config.json",
    "chat_template.jinja",
    "tokenizer_config.json",
    "adapter_config.json",
    POINTER,
)


def answer_fingerprint(path: str | Path) -> str | None:
    """A hash of the files that decide a model folder's greedy answers (weights, configs,
    chat template), or None when it holds no weights: two folders with the same fingerprint
    answer alike, so the backtest answers once (GRPO that keeps its start re-saves the SFT weights).

    >>> import tempfile, pathlib
    >>> a, b = (pathlib.Path(tempfile.mkdtemp()) for _ in range(2))
    >>> for d in (a, b): _ = (d / "model.safetensors").write_bytes(b"w"); _ = (d / "config.json").write_text("{}")
    >>> answer_fingerprint(a) == answer_fingerprint(b)
    True
    >>> _ = (b / "config.json").write_text('{"x": 1}')
    >>> answer_fingerprint(a) == answer_fingerprint(b), answer_fingerprint(tempfile.mkdtemp())
    (False, None)
    """

    folder = Path(path)
    weights = sorted([*folder.glob("*.safetensors"), *folder.glob("*.bin")])
    if not weights and not (folder / POINTER).exists():
        return None
    digest = hashlib.sha256()
    for f in [*weights, *(folder / n for n in ANSWER_FILES)]:
        if f.exists():
            digest.update(f.name.encode())
            with f.open("rb") as stream:
                for chunk in iter(lambda: stream.read(1 << 24), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load(path: str | Path, dtype: str = "float32", load_in_4bit: bool = False):
    """Load (model, tokenizer) for generation, its weights in `dtype` (`generation.dtype` where funds
    are evaluated); `path` may hold a PEFT adapter."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve(path)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    kwargs: dict[str, Any] = {"dtype": torch_dtype(dtype)}
    if load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
    if (Path(source) / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(source, **kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if torch.cuda.is_available() and not load_in_4bit:
        model = model.to("cuda")
    model.eval()
    return model, tokenizer


def generate(
    model,
    tokenizer,
    conversations: list[list[dict]],
    max_new_tokens: int = 96,
    batch_size: int = 32,
    desc: str = "generate",
    deadline: float | None = None,
    on_batch: Callable | None = None,
    shown: list[tuple[int, ...]] | None = None,
) -> list[str]:
    """Greedy answers for chat conversations, in batches, with a progress bar. With `shown` (per
    conversation, the sentence count of each document its prompt showed: `citations.sentence_counts`) an answer
    cites only those (`CitingShown`). With `deadline` (a
    `time.monotonic()` instant) generation stops there: the answers cut short are incomplete (and so
    invalid), and batches not started get none; a server uses it to free the model at a request's timeout.
    `on_batch(start, sequences, prompt_mask, cache, answers)` sees each batch with the key-value cache its
    generation left (the belief is read there: `belief.from_cache`). The beginning a batch's prompts share
    runs once (`prompt_batch`)."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class Until(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            late = deadline is not None and time.monotonic() > deadline
            return torch.full((input_ids.shape[0],), late, dtype=torch.bool)

    stopping = StoppingCriteriaList([Until()]) if deadline is not None else None
    texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
    out: list[str] = []
    for start in tqdm(range(0, len(texts), batch_size), desc=desc, unit="batch"):
        if deadline is not None and time.monotonic() > deadline:
            out.extend([""] * len(texts[start : start + batch_size]))
            continue
        with torch.no_grad():
            batch = prompt_batch(model, tokenizer, texts[start : start + batch_size])
            width = batch["input_ids"].shape[1]
            citing = [CitingShown(tokenizer, shown[start : start + batch_size], width)] if shown else None
            ids = model.generate(
                **batch,
                logits_processor=citing,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                stopping_criteria=stopping,
                return_dict_in_generate=on_batch is not None,
            )
        sequences = ids.sequences if on_batch is not None else ids
        answers = tokenizer.batch_decode(sequences[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        if on_batch is not None:
            on_batch(start, sequences, batch["attention_mask"], ids.past_key_values, answers)
        out.extend(answers)
    return out


class CitingShown:
    """A logits processor for greedy decoding: where the best next token would make a citation name a
    document or sentence its row's prompt did not show (`citations.citable`), the best of the next
    `tries` that keeps every citation citable is taken instead; where none does, the model's own. The
    answer's tail (`look` tokens) is enough to read the citation being written."""

    def __init__(self, tokenizer, shown: list[tuple[int, ...]], width: int, look: int = 32, tries: int = 64):
        self.tokenizer, self.shown, self.width, self.look, self.tries = tokenizer, shown, width, look, tries

    def __call__(self, input_ids, scores):
        written = input_ids.shape[1] - self.width
        if written == 0:
            return scores
        for row, counts in enumerate(self.shown):
            tail = self.tokenizer.decode(input_ids[row, -min(written, self.look) :], skip_special_tokens=True)
            if '"' not in tail:
                continue
            best = scores[row].topk(min(self.tries, scores.shape[1])).indices.tolist()
            for rank, token in enumerate(best):
                if citations.citable(tail + self.tokenizer.decode([token]), counts):
                    scores[row, best[:rank]] = float("-inf")
                    break
        return scores


def shared_length(rows: list[list[int]]) -> int:
    """How many leading tokens every row of `rows` shares, each row keeping at least one of its own
    (generation starts from a row's last prompt token).

    >>> shared_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
    2
    >>> shared_length([[1, 2], [1, 2]]), shared_length([[1, 2, 3]]), shared_length([[7], [8]])
    (1, 2, 0)
    """
    n, most = 0, min(len(r) for r in rows) - 1
    while n < most and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n


def prompt_batch(model, tokenizer, texts: list[str]) -> dict:
    """`model.generate`'s inputs for a batch of prompt texts: `input_ids`, `attention_mask` and, where two or
    more prompts share a beginning (the system message, the task's first line), `past_key_values`.

    The shared beginning runs once and its key-value cache is copied to every row; each row is laid out as
    shared tokens, its padding, its own tokens, and the mask hides the padding (positions count real tokens
    only, as `generate` derives them from the mask), so every row computes what it would alone, to float
    rounding: the same answers in float32, the same work less the copies. A lone prompt,
    prompts that share nothing and models with sliding-window layers get the tokenizer's own left-padded batch."""
    import torch
    from transformers import DynamicCache

    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    cache = DynamicCache(config=model.config)
    # a sliding-window layer (Gemma 3's) attends to the last columns, padding included: those pad left
    slides = any(getattr(layer, "is_sliding", False) for layer in cache.layers)
    shared = shared_length(rows) if len(rows) > 1 and not slides else 0
    if shared == 0:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        return {k: v.to(model.device) for k, v in batch.items()}
    width, pad = max(len(r) for r in rows), tokenizer.pad_token_id
    ids = [r[:shared] + [pad] * (width - len(r)) + r[shared:] for r in rows]
    mask = [[1] * shared + [0] * (width - len(r)) + [1] * (len(r) - shared) for r in rows]
    input_ids = torch.tensor(ids, device=model.device)
    model(input_ids=input_ids[:1, :shared], past_key_values=cache, use_cache=True)
    cache.batch_repeat_interleave(len(rows))
    return {"input_ids": input_ids, "attention_mask": torch.tensor(mask, device=model.device), "past_key_values": cache}


def corpus(rows: list[PromptRecord]) -> list[str]:
    """Texts the tokenizer learns from: prompts and reference answers (training split only)."""
    texts: list[str] = []
    for r in rows:
        texts.extend(m["content"] for m in r.prompt)
        texts.append(r.reference or "")
    return texts


def build_base(params: ModelParams, train_rows: list[PromptRecord], out_dir: Path) -> dict:
    """Write the base model (or its pointer) into `out_dir`; return a description."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if params.pretrained and pretrained.parse(params.pretrained) is not None:
        return pretrained.convert(params.pretrained, out_dir, params.chat_template, params.dtype)
    if params.pretrained:
        (out_dir / POINTER).write_text(json.dumps({"name_or_path": params.pretrained}) + "\n")
        return {"pretrained": params.pretrained}
    tokenizer = build_tokenizer(corpus(train_rows), params.arch.vocab_size, params.tokenizer_merges)
    model = build_model(params.arch, tokenizer)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"parameters": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer)}
