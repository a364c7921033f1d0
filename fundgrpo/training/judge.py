"""LLM-as-judge reward: a judge model grades each completion's reasoning, 0-5 per criterion.

Two backends, one interface (`Judge.ask(prompts) -> list[str]`):
  * `transformers`: any causal LM path loaded on this machine (`from_pretrained`);
  * `http`: an OpenAI-compatible `/chat/completions` endpoint (vLLM, TGI, a hosted API),
    called with bounded concurrency, a timeout and retries; the API key is read from the
    environment variable named in params, never from the repo.

Scores are parsed from the judge's JSON and normalised to 0-1 (mean over criteria).
Unparseable judge output returns None, which TRL leaves out of the mean: a judge's
failure must not read as a bad answer. A cache keyed by (prompt, completion, judge id,
judge prompt version) stops repeated completions from being judged again, and every
judge prompt, raw output and parsed score is appended to a JSONL log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from fundgrpo.model import modelling
from fundgrpo.params import JudgeParams
from fundgrpo.training.rewards import completion_text

PROMPT_VERSION = "v1"
INSTRUCTIONS = (
    "You are a senior fund analyst reviewing a junior analyst's fund evaluation.\n"
    "Grade the evaluation's reasoning from 0 (worst) to 5 (best) on each criterion:\n"
    "{criteria}\n"
    'Answer only with JSON, e.g. {{"{first}": 4}}.\n\n'
    "The fund data the junior analyst saw:\n{prompt}\n\nThe junior analyst's evaluation:\n{completion}"
)
CRITERIA = {
    "faithful": "faithful: every claim agrees with the fund data",
    "evidence": "evidence: it cites the metrics that weigh most in the methodology",
    "coherent": "coherent: the grade follows from the reasoning",
}


def judge_prompt(prompt: str, completion: str, criteria: tuple[str, ...]) -> str:
    lines = "\n".join(f"- {CRITERIA.get(c, c)}" for c in criteria)
    return INSTRUCTIONS.format(criteria=lines, first=criteria[0], prompt=prompt, completion=completion)


def parse_scores(text: str, criteria: tuple[str, ...]) -> float | None:
    """Mean score over criteria, normalised to 0-1; None when the output is unusable.

    >>> parse_scores('{"faithful": 5, "evidence": 2.5}', ("faithful", "evidence"))
    0.75
    >>> parse_scores('Sure! {"faithful": 4}', ("faithful",))
    0.8
    >>> parse_scores('{"faithful": 9}', ("faithful",)) is None, parse_scores("no", ("faithful",)) is None
    (True, True)
    """
    match = re.search(r"\{.*?\}", text, flags=re.S)
    if not match:
        return None
    try:
        obj = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    values = []
    for c in criteria:
        v = obj.get(c) if isinstance(obj, dict) else None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 5:
            return None
        values.append(float(v))
    return round(sum(values) / (5 * len(values)), 4)


def prompt_text(prompt: Any) -> str:
    """The user-visible text of a prompt, plain or conversational."""
    if isinstance(prompt, list):
        return "\n".join(m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") != "system")
    return str(prompt)


# ------------------------------------------------------------------- backends


class HttpJudge:
    """An OpenAI-compatible chat endpoint; bounded concurrency, timeout, retries."""

    def __init__(self, params: JudgeParams):
        if not params.url:
            raise ValueError("judge.url is empty: set it to the endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
        self.params = params
        self.id = f"http:{params.model}@{params.url}"

    def _one(self, prompt: str) -> str:
        p = self.params
        body = json.dumps(
            {
                "model": p.model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": p.max_new_tokens,
                "temperature": 0,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(p.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        last: Exception | None = None
        for attempt in range(p.retries + 1):
            try:
                req = urllib.request.Request(
                    p.url.rstrip("/") + "/chat/completions", data=body, headers=headers, method="POST"
                )
                with urllib.request.urlopen(req, timeout=p.timeout_s) as resp:
                    return json.loads(resp.read())["choices"][0]["message"]["content"]
            except (urllib.error.URLError, TimeoutError, KeyError, json.JSONDecodeError, OSError) as e:
                last = e
                time.sleep(min(2.0**attempt * 0.2, 5.0))
        return f"<judge error: {last}>"  # unparseable: the sample is excluded, not punished

    def ask(self, prompts: list[str]) -> list[str]:
        with ThreadPoolExecutor(max_workers=max(1, self.params.max_concurrency)) as pool:
            return list(pool.map(self._one, prompts))


class LocalJudge:
    """A causal LM loaded here with transformers (greedy answers)."""

    def __init__(self, params: JudgeParams):

        self.params = params
        self.id = f"transformers:{params.model}"
        self.model, self.tokenizer = modelling.load(params.model)

    def ask(self, prompts: list[str]) -> list[str]:

        conversations = [[{"role": "user", "content": p}] for p in prompts]
        return modelling.generate(
            self.model, self.tokenizer, conversations, self.params.max_new_tokens, batch_size=16, desc="judge"
        )


def make_backend(params: JudgeParams):
    if params.backend == "http":
        return HttpJudge(params)
    if params.backend == "transformers":
        return LocalJudge(params)
    raise ValueError(f"judge.backend must be 'http' or 'transformers', got {params.backend!r}")


# --------------------------------------------------------------------- reward


class JudgeReward:
    """TRL reward function `(prompts, completions, **kwargs) -> list[float | None]`."""

    __name__ = "judge_reward"

    def __init__(self, params: JudgeParams, backend=None, log_path: str | Path | None = None):
        self.params = params
        self.backend = backend or make_backend(params)
        self.criteria = tuple(params.criteria)
        self.log_path = Path(log_path or params.log_path)
        self.cache_path = Path(params.cache_path) if params.cache_path else None
        self.cache: dict[str, float | None] = {}
        self.calls = 0  # judge requests actually sent (cache misses)
        self._lock = threading.Lock()
        if self.cache_path and self.cache_path.exists():
            for line in self.cache_path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                self.cache[row["key"]] = row["score"]

    def key(self, prompt: str, completion: str) -> str:
        raw = json.dumps([prompt, completion, self.backend.id, PROMPT_VERSION, self.criteria], ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()

    def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        texts = [(prompt_text(p), completion_text(c)) for p, c in zip(prompts, completions)]
        keys = [self.key(p, c) for p, c in texts]
        todo = {k: pc for k, pc in zip(keys, texts) if k not in self.cache}
        if todo:
            asks = [judge_prompt(p, c, self.criteria) for p, c in todo.values()]
            raws = self.backend.ask(asks)
            self.calls += len(asks)
            rows = []
            for k, ask, raw in zip(todo, asks, raws):
                score = parse_scores(raw, self.criteria)
                self.cache[k] = score
                rows.append(
                    {
                        "key": k,
                        "judge": self.backend.id,
                        "prompt_version": PROMPT_VERSION,
                        "judge_prompt": ask,
                        "raw": raw,
                        "score": score,
                    }
                )
            self._append(rows)
        return [self.cache[k] for k in keys]

    def _append(self, scored: list[dict]) -> None:
        with self._lock:
            for path in filter(None, [self.log_path, self.cache_path]):
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a", encoding="utf-8") as f:
                    for row in scored:
                        keep = row if path == self.log_path else {"key": row["key"], "score": row["score"]}
                        f.write(json.dumps(keep, ensure_ascii=False) + "\n")


def make_judge_reward(params: JudgeParams) -> Callable[..., list]:
    return JudgeReward(params)
