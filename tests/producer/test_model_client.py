"""The model client over real loopback HTTP to the offline server (plus a few edge bodies)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import time
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from resultlog.producer.context import sample_scope
from resultlog.producer.errors import ModelError
from resultlog.producer.model_client import ModelClient, classify_model_error
from resultlog.producer.offline import Behavior, Fault, ModelServer, generation_id
from tests.support.offline import pair_with

MODEL = "offline/arith"


def ask(expr: str = "17 + 25") -> list[dict[str, Any]]:
    """A one-message conversation asking for an expression."""
    return [{"role": "user", "content": f"What is {expr}?"}]


def fast(server: ModelServer, **options: Any) -> ModelClient:
    """A client of the server with tiny backoffs."""
    defaults: dict[str, Any] = {"max_retries": 2, "backoff_initial": 0.001, "backoff_max": 0.01}
    return ModelClient(server.base_url, None, **{**defaults, **options})


async def test_every_request_is_stamped_with_its_own_sample_and_epoch(
    offline_server: ModelServer, fast_client: ModelClient
) -> None:
    pairs = [(f"item-{i}", epoch) for i in range(25) for epoch in range(3)]

    async def solve(sample_id: str, epoch: int) -> None:
        with sample_scope(sample_id, epoch):
            await asyncio.sleep(0.001 * (int(sample_id.split("-")[1]) % 3))
            # The prompt names the pair, so the log shows which task sent each stamp.
            messages = [{"role": "user", "content": f"{sample_id}/{epoch}: What is 2 + 2?"}]
            for _ in range(2):
                with contextlib.suppress(ModelError):  # degraded pairs send stamped requests too
                    await fast_client.complete(messages, model=MODEL)

    await asyncio.gather(*(solve(s, e) for s, e in pairs))
    requests = offline_server.requests
    assert {(r.sample_id, r.epoch) for r in requests} == set(pairs)
    for request in requests:
        assert request.body["x_bench"] == {
            "sample_id": request.sample_id,
            "sample_epoch": request.epoch,
        }
        assert request.body["messages"][0]["content"].startswith(
            f"{request.sample_id}/{request.epoch}:"
        )
    counts = offline_server.request_counts()
    assert all(counts[pair] >= 2 for pair in pairs)


async def test_context_stamp_overrides_a_user_supplied_x_bench(
    offline_server: ModelServer, fast_client: ModelClient
) -> None:
    extra = {"x_bench": {"sample_id": "user", "sample_epoch": 9}, "transforms": []}
    with sample_scope(pair_with("correct"), 1):
        await fast_client.complete(ask(), model=MODEL, extra_body=extra, temperature=0)
    (request,) = offline_server.requests
    assert request.body["x_bench"] == {"sample_id": pair_with("correct"), "sample_epoch": 1}
    assert request.body["transforms"] == []
    assert request.body["temperature"] == 0
    assert request.body["usage"] == {"include": True}


async def test_without_a_scope_the_body_is_sent_as_given(
    offline_server: ModelServer, fast_client: ModelClient
) -> None:
    await fast_client.complete(ask(), model=MODEL)
    await fast_client.complete(ask(), model=MODEL, extra_body={"x_bench": {"sample_id": "u"}})
    first, second = offline_server.requests
    assert "x_bench" not in first.body
    assert second.body["x_bench"] == {"sample_id": "u"}


async def test_completion_carries_text_usage_cost_and_generation_id(
    fast_client: ModelClient,
) -> None:
    sample_id = pair_with("correct")
    with sample_scope(sample_id, 0):
        completion = await fast_client.complete(ask("17 + 25"), model=MODEL)
    assert completion.text == "The answer is 42."
    assert completion.generation_id == generation_id(sample_id, 0)
    assert completion.generation_id.startswith("gen-")
    assert completion.model == MODEL
    assert completion.finish_reason == "stop"
    assert completion.attempts == 1
    usage = completion.usage
    assert usage is not None
    assert usage.input_tokens > 0 and usage.output_tokens == 4
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.reasoning_tokens == 0
    assert usage.cost == pytest.approx(usage.total_tokens * 1e-6)
    assert completion.raw["usage"]["prompt_tokens"] == usage.input_tokens


async def test_elapsed_time_is_the_final_attempt_s(
    offline_server: ModelServer, fast_client: ModelClient
) -> None:
    slow_failure, quick_success = Behavior(status=500, delay_s=0.3), Behavior(delay_s=0.05)
    offline_server.override("timed", 0, slow_failure, quick_success)
    started = time.perf_counter()
    with sample_scope("timed", 0):
        completion = await fast_client.complete(ask(), model=MODEL)
    wall_ms = (time.perf_counter() - started) * 1000
    assert completion.attempts == 2 and wall_ms >= 350
    assert 50 <= completion.elapsed_ms < 300  # the second attempt alone


async def test_reasoning_and_tool_calls_are_parsed(
    offline_server: ModelServer, fast_client: ModelClient
) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    offline_server.override("r", 0, Behavior(answer="", reasoning="let me think", tool_calls=calls))
    with sample_scope("r", 0):
        completion = await fast_client.complete(ask(), model=MODEL)
    assert completion.reasoning == "let me think"
    assert completion.tool_calls == calls
    assert completion.finish_reason == "tool_calls"
    assert completion.usage is not None and completion.usage.reasoning_tokens == 3


async def test_a_429_then_a_200_succeeds_on_retry(
    offline_server: ModelServer, fast_client: ModelClient
) -> None:
    offline_server.override("flaky", 0, Behavior(status=429), Behavior(status=503), Behavior())
    with sample_scope("flaky", 0):
        completion = await fast_client.complete(ask(), model=MODEL)
    assert completion.text == "The answer is 42."
    assert completion.attempts == 3
    assert offline_server.request_count("flaky", 0) == 3


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_persistent_retryable_status_is_a_skip_after_bounded_retries(
    offline_server: ModelServer, fast_client: ModelClient, status: int
) -> None:
    offline_server.override("down", 0, Behavior(status=status))
    with pytest.raises(ModelError) as caught, sample_scope("down", 0):
        await fast_client.complete(ask(), model=MODEL)
    assert caught.value.status == status
    assert classify_model_error(caught.value) == "skip"
    assert "after 3 attempts" in str(caught.value)
    assert offline_server.request_count("down", 0) == 3


@pytest.mark.parametrize(
    ("status", "verdict"),
    [(400, "incorrect"), (422, "incorrect"), (401, "fatal"), (403, "fatal"), (404, "fatal")],
)
async def test_other_4xx_fail_at_once(
    offline_server: ModelServer, fast_client: ModelClient, status: int, verdict: str
) -> None:
    offline_server.override("bad", 0, Behavior(status=status))
    with pytest.raises(ModelError) as caught, sample_scope("bad", 0):
        await fast_client.complete(ask(), model=MODEL)
    assert caught.value.status == status
    assert classify_model_error(caught.value) == verdict
    assert offline_server.request_count("bad", 0) == 1


@pytest.mark.parametrize(
    ("fault", "kind", "attempts"),
    [("reset", "transport", 3), ("close", "transport", 3), ("malformed", "malformed", 1)],
)
async def test_broken_responses_have_no_status_and_are_fatal(
    offline_server: ModelServer, fast_client: ModelClient, fault: Fault, kind: str, attempts: int
) -> None:
    offline_server.override("broken", 0, Behavior(fault=fault))
    with pytest.raises(ModelError) as caught, sample_scope("broken", 0):
        await fast_client.complete(ask(), model=MODEL)
    assert caught.value.status is None
    assert caught.value.kind == kind
    assert classify_model_error(caught.value) == "fatal"
    assert offline_server.request_count("broken", 0) == attempts
    if kind == "transport":
        assert isinstance(caught.value.__cause__, httpx.TransportError)


async def test_a_hanging_server_times_out_with_no_status(offline_server: ModelServer) -> None:
    offline_server.override("slow", 0, Behavior(fault="hang"))
    started = time.perf_counter()
    async with fast(offline_server, timeout=0.2, max_retries=1) as client:
        with pytest.raises(ModelError) as caught, sample_scope("slow", 0):
            await client.complete(ask(), model=MODEL)
    assert time.perf_counter() - started < 2
    assert (caught.value.status, caught.value.kind) == (None, "timeout")
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)
    assert classify_model_error(caught.value) == "fatal"
    assert offline_server.request_count("slow", 0) == 2


async def test_a_connection_refused_has_no_status() -> None:
    with ModelServer() as server:
        url = server.base_url
    async with ModelClient(url, max_retries=1, backoff_initial=0.001) as client:
        with pytest.raises(ModelError) as caught:
            await client.complete(ask(), model=MODEL)
    assert (caught.value.status, caught.value.kind) == (None, "transport")


async def test_a_small_retry_after_is_respected_and_a_large_one_capped(
    offline_server: ModelServer,
) -> None:
    offline_server.override("wait", 0, Behavior(status=429, retry_after=0.3), Behavior())
    offline_server.override("long", 0, Behavior(status=429, retry_after=3600), Behavior())
    async with fast(offline_server, backoff_max=0.5) as client:
        for sample_id, least, most in (("wait", 0.3, 0.5), ("long", 0.5, 1.0)):
            started = time.perf_counter()
            with sample_scope(sample_id, 0):
                await client.complete(ask(), model=MODEL)
            assert least <= time.perf_counter() - started < most


async def test_elapsed_time_covers_the_call(offline_server: ModelServer) -> None:
    offline_server.override("lag", 0, Behavior(delay_s=0.15))
    async with fast(offline_server) as client:
        with sample_scope("lag", 0):
            completion = await client.complete(ask(), model=MODEL)
    assert completion.elapsed_ms >= 150


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (None, "fatal"),
        (300, "fatal"),
        (302, "fatal"),
        (402, "fatal"),
        (400, "incorrect"),
        (408, "incorrect"),
        (401, "fatal"),
        (403, "fatal"),
        (404, "fatal"),
        (429, "skip"),
        (500, "skip"),
        (599, "skip"),
    ],
)
def test_classification_of_model_errors(status: int | None, verdict: str) -> None:
    assert classify_model_error(ModelError("x", status=status)) == verdict


def test_model_error_survives_pickling() -> None:
    err = pickle.loads(pickle.dumps(ModelError("m", status=429, kind="http", retry_after=1.5)))
    assert (err.message, err.status, err.kind, err.retry_after) == ("m", 429, "http", 1.5)


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="base_url"):
        ModelClient("localhost:8080/v1")


# Bodies the offline server never sends, checked through an in-process transport.


def scripted(*responses: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering with the given responses in turn, recording requests."""
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return httpx.MockTransport(handle), seen


def chat_body(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A minimal chat.completion body."""
    return {"id": "gen-1", "choices": [{"message": message, "finish_reason": "stop"}], **extra}


async def test_headers_carry_the_key_and_openrouter_attribution() -> None:
    transport, seen = scripted(httpx.Response(200, json=chat_body({"content": "ok"})))
    async with ModelClient(
        "https://openrouter.example/api/v1/",
        SecretStr("sk-or-secret"),
        transport=transport,
        # OpenRouter's attribution is two headers of its own.
        headers={"HTTP-Referer": "https://resultlog.dev", "X-Title": "resultlog"},
    ) as client:
        await client.complete(ask(), model="openai/gpt-4o")
    (request,) = seen
    assert str(request.url) == "https://openrouter.example/api/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-or-secret"
    assert request.headers["http-referer"] == "https://resultlog.dev"
    assert request.headers["x-title"] == "resultlog"
    assert json.loads(request.content)["model"] == "openai/gpt-4o"


async def test_openrouter_error_inside_a_200_uses_its_code() -> None:
    failing = httpx.Response(200, json={"error": {"code": 502, "message": "upstream"}})
    transport, seen = scripted(failing)
    async with ModelClient(
        "http://x/v1", transport=transport, max_retries=1, backoff_initial=0.001
    ) as client:
        with pytest.raises(ModelError) as caught:
            await client.complete(ask(), model=MODEL)
    assert caught.value.status == 502 and len(seen) == 2


@pytest.mark.parametrize(
    "body", [{"choices": []}, {"object": "chat.completion"}, [1, 2], {"choices": [{"x": 1}]}]
)
async def test_a_body_without_a_usable_choice_is_fatal(body: Any) -> None:
    transport, _ = scripted(httpx.Response(200, json=body))
    async with ModelClient("http://x/v1", transport=transport) as client:
        with pytest.raises(ModelError) as caught:
            await client.complete(ask(), model=MODEL)
    assert caught.value.status is None and caught.value.kind == "malformed"


async def test_content_parts_and_reasoning_content_are_read() -> None:
    message = {
        "content": [{"type": "text", "text": "The answer "}, {"type": "text", "text": "is 4."}],
        "reasoning_content": "2 and 2",
    }
    usage = {"prompt_tokens": 3, "completion_tokens": 5}
    transport, _ = scripted(httpx.Response(200, json=chat_body(message, usage=usage)))
    async with ModelClient("http://x/v1", transport=transport, include_usage=False) as client:
        completion = await client.complete(ask(), model=MODEL)
    assert completion.text == "The answer is 4."
    assert completion.reasoning == "2 and 2"
    assert completion.usage is not None
    assert (completion.usage.total_tokens, completion.usage.cost) == (8, None)


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"prompt_tokens": 2**40, "completion_tokens": 1}, "usage.input_tokens"),
        ({"prompt_tokens": 1, "completion_tokens": 1, "cost": 1e308}, "usage.cost"),
        ({"prompt_tokens": 1, "completion_tokens": 1, "cost": -1.0}, "usage.cost"),
        ({"prompt_tokens": -3, "completion_tokens": 1}, "usage.input_tokens"),
        ({"prompt_tokens": 1, "completion_tokens": "many"}, "usage.output_tokens"),
        ({"prompt_tokens": 1, "completion_tokens": 1, "cost": "0.1"}, "usage.cost"),
        ({"prompt_tokens": 1, "total_tokens": 2**41}, "usage.total_tokens"),
    ],
)
async def test_usage_out_of_the_contracts_bounds_is_a_fatal_error_naming_it(
    usage: dict[str, Any], field: str
) -> None:
    body = chat_body({"content": "4"}, usage=usage)
    transport, _ = scripted(httpx.Response(200, json=body))
    async with ModelClient("http://x/v1", transport=transport) as client:
        with pytest.raises(ModelError, match=field) as caught:
            await client.complete(ask(), model=MODEL)
    assert caught.value.kind == "malformed" and classify_model_error(caught.value) == "fatal"
