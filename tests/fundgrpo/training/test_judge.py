"""The judge reward against a stub OpenAI-compatible server on loopback and a real tiny local model."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fundgrpo.params import JudgeParams
from fundgrpo.training.judge import JudgeReward, parse_scores

PROMPT = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Fund: X | Sharpe ratio percentile 91"}]
GOOD = [{"role": "assistant", "content": '{"reasoning": "Sharpe ratio top 10%", "score": 92, "grade": 5}'}]
ODD = [{"role": "assistant", "content": '{"reasoning": "???", "score": 5, "grade": 1}'}]


@pytest.fixture
def stub():
    """A chat-completions endpoint: scores 4 everywhere, but garbage for '???' answers."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"auth": self.headers.get("Authorization"), "body": body, "path": self.path})
            text = body["messages"][0]["content"]
            content = "I cannot say." if "???" in text else json.dumps({"faithful": 4, "evidence": 5, "coherent": 3})
            out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()


def test_http_judge_scores_caches_and_logs(stub, tmp_path, monkeypatch):
    url, seen = stub
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-test")
    params = JudgeParams(
        enabled=True,
        backend="http",
        model="judge-7b",
        url=url,
        api_key_env="TEST_JUDGE_KEY",
        log_path=str(tmp_path / "judge.jsonl"),
        cache_path=str(tmp_path / "cache.jsonl"),
    )
    reward = JudgeReward(params)
    got = reward([PROMPT, PROMPT, PROMPT], [GOOD, ODD, GOOD])
    assert got == [0.8, None, 0.8]  # (4 + 5 + 3) / 15; unparseable judge output excludes the sample
    assert reward.calls == 2 and len(seen) == 2  # the repeated completion was judged once
    assert seen[0]["auth"] == "Bearer sk-test" and seen[0]["path"] == "/v1/chat/completions"
    log = [json.loads(l) for l in (tmp_path / "judge.jsonl").read_text().splitlines()]
    assert {r["score"] for r in log} == {0.8, None}
    assert all(r["prompt_version"] == "v1" and "Sharpe ratio percentile 91" in r["judge_prompt"] for r in log)

    again = JudgeReward(params)  # a new run: the on-disk cache answers, no request is sent
    assert again([PROMPT], [GOOD]) == [0.8] and again.calls == 0 and len(seen) == 2


@pytest.mark.fault("judge endpoint down")
def test_unreachable_endpoint_excludes_samples_after_retries(tmp_path):
    params = JudgeParams(
        enabled=True,
        backend="http",
        model="m",
        url="http://127.0.0.1:9/v1",
        retries=1,
        timeout_s=1,
        log_path=str(tmp_path / "j.jsonl"),
        cache_path="",
    )
    assert JudgeReward(params)([PROMPT], [GOOD]) == [None]
    assert "judge error" in json.loads((tmp_path / "j.jsonl").read_text())["raw"]


def test_local_transformers_judge_runs_a_real_small_model(tmp_path):
    from fundgrpo.model import modelling
    from fundgrpo.params import ModelArchParams

    tok = modelling.build_tokenizer(['{"faithful": 3}', "fund data, evaluation"] * 20, 300)
    arch = ModelArchParams(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
    )
    model = modelling.build_model(arch, tok)
    model.save_pretrained(tmp_path / "judge")
    tok.save_pretrained(tmp_path / "judge")
    params = JudgeParams(
        enabled=True,
        backend="transformers",
        model=str(tmp_path / "judge"),
        max_new_tokens=8,
        criteria=("faithful",),
        log_path=str(tmp_path / "j.jsonl"),
        cache_path="",
    )
    scores = JudgeReward(params)([PROMPT, PROMPT], [GOOD, ODD])
    assert all(s is None or 0.0 <= s <= 1.0 for s in scores)  # an untrained judge rambles: excluded, never 0
    assert len((tmp_path / "j.jsonl").read_text().splitlines()) == 2


def test_parse_rejects_out_of_range():
    assert parse_scores('{"a": 6}', ("a",)) is None
    assert parse_scores('{"a": true}', ("a",)) is None


@pytest.mark.fault("judge endpoint slow")
def test_a_slow_endpoint_times_out_retries_and_excludes_the_sample(tmp_path):
    """An endpoint that answers after the timeout: each try is cut at timeout_s, the sample is excluded (None),
    nothing raises."""
    import time

    calls: list[float] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            calls.append(time.monotonic())
            time.sleep(3.0)  # longer than the judge waits
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        params = JudgeParams(
            enabled=True,
            backend="http",
            model="m",
            url=f"http://127.0.0.1:{server.server_address[1]}/v1",
            retries=1,
            timeout_s=0.5,
            log_path=str(tmp_path / "j.jsonl"),
            cache_path="",
        )
        start = time.monotonic()
        assert JudgeReward(params)([PROMPT], [GOOD]) == [None]
        assert time.monotonic() - start < 2.9  # it did not wait for the slow answer
        assert len(calls) == 2  # the first try and one retry
        assert "judge error" in json.loads((tmp_path / "j.jsonl").read_text())["raw"]
    finally:
        server.shutdown()
