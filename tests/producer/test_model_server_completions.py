"""The offline model's legacy completions and tokenizer endpoints, over real HTTP."""

from __future__ import annotations

import re

import httpx

from resultlog.producer.offline import ModelServer


def _root(server: ModelServer) -> str:
    return server.base_url.removesuffix("/v1")


def test_tokenize_and_detokenize_round_trip(model_server: ModelServer) -> None:
    root = _root(model_server)
    info = httpx.get(f"{root}/tokenizer_info").json()
    assert "eos_token" in info
    tokens = httpx.post(f"{root}/tokenize", json={"prompt": "3 + 4 = 7 é"}).json()["tokens"]
    assert all(isinstance(token, int) for token in tokens)
    back = httpx.post(f"{root}/detokenize", json={"tokens": tokens}).json()["prompt"]
    assert back == "3 + 4 = 7 é"


def _loglikelihood(server: ModelServer, context: str, continuation: str) -> tuple[float, bool]:
    """lm-eval's local-completions reading of an echoed prompt: sum and greediness."""
    root = _root(server)
    ctx = httpx.post(f"{root}/tokenize", json={"prompt": context}).json()["tokens"]
    whole = httpx.post(f"{root}/tokenize", json={"prompt": context + continuation}).json()
    body = {"prompt": whole["tokens"], "echo": True, "logprobs": 1, "max_tokens": 1}
    reply = httpx.post(f"{server.base_url}/completions", json=body)
    assert reply.status_code == 200, reply.text
    logprobs = reply.json()["choices"][0]["logprobs"]
    scored = logprobs["token_logprobs"][len(ctx) : -1]
    tops = logprobs["top_logprobs"][len(ctx) : -1]
    greedy = all(lp == max(top.values()) for lp, top in zip(scored, tops, strict=True))
    return sum(scored), greedy


def test_the_right_sum_is_the_likeliest_continuation(model_server: ModelServer) -> None:
    context = "What is 12 + 30? Answer:"
    right = _loglikelihood(model_server, context, " 42")
    wrong = _loglikelihood(model_server, context, " 41")
    assert right[1] and not wrong[1]
    assert right[0] > wrong[0]
    assert len(model_server.requests) == 2  # the tokenizer's calls are not model requests


def test_a_completion_without_echo_answers_the_sum(model_server: ModelServer) -> None:
    reply = httpx.post(f"{model_server.base_url}/completions", json={"prompt": "What is 2 * 8?"})
    assert reply.status_code == 200
    assert reply.json()["usage"]["cost"] > 0
    assert re.fullmatch(r" The answer is -?\d+\.", reply.json()["choices"][0]["text"])


def test_a_completion_without_a_prompt_is_refused(model_server: ModelServer) -> None:
    reply = httpx.post(f"{model_server.base_url}/completions", json={"messages": []})
    assert reply.status_code == 400
    assert "prompt" in reply.json()["error"]["message"]
