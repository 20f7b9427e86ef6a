"""Async OpenAI-compatible chat-completions client with bounded retries and x_bench stamping."""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import httpx
from pydantic import SecretStr

from resultlog.producer.context import SampleContext, current_sample
from resultlog.producer.errors import ModelError
from resultlog.schemas import MAX_COST_USD, MAX_TOKENS

__all__ = [
    "Completion",
    "ErrorClass",
    "ModelClient",
    "Usage",
    "classify_model_error",
]

log = logging.getLogger(__name__)

ErrorClass = Literal["skip", "incorrect", "fatal"]
_FATAL_4XX = frozenset({401, 403, 404})
_SNIPPET_CHARS = 200


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage and cost reported by the endpoint for one completion."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: int
    cost: float | None


@dataclass(frozen=True, slots=True)
class Completion:
    """One successful chat completion; `elapsed_ms` is the time of its final attempt."""

    text: str
    reasoning: str | None
    tool_calls: list[Any] | None
    generation_id: str | None
    model: str | None
    usage: Usage | None
    raw: dict[str, Any]
    elapsed_ms: int
    finish_reason: str | None = None
    attempts: int = 1
    prompt: tuple[Mapping[str, Any], ...] = ()
    reasoning_details: Any = None
    citations: Any = None

    @property
    def response_items(self) -> Any:
        """The endpoint's response items: `output` (Responses API) or `choices`."""
        return self.raw.get("output") or self.raw.get("choices")


def classify_model_error(err: ModelError) -> ErrorClass:
    """Map a model error to its outcome (DESIGN record semantics 6).

    429 or >= 500 -> "skip" (degraded S); 401/403/404 or no HTTP status -> "fatal" (fails
    the run); any other non-2xx status (400, 402, a 3xx...) -> "incorrect" (degraded I).
    """
    status = err.status
    if status is None or status in _FATAL_4XX:
        return "fatal"
    if _retryable(err):  # the statuses worth retrying are the ones that degrade to S
        return "skip"
    return "incorrect"


class ModelClient:
    """Calls `POST {base_url}/chat/completions`; one instance per event loop.

    Every request body is stamped with `x_bench` = the current sample context (see
    producer.context), replacing any `x_bench` in `extra_body`; outside a sample scope
    the body is sent as given. 429, >= 500 and transport errors are retried up to
    `max_retries` times with exponential backoff and jitter; other failures raise at once.
    A float `timeout` bounds connect, write and each read, not the wait for one of the
    `max_connections` pooled connections (the runner bounds concurrency).
    """

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | str | None = None,
        *,
        timeout: float | httpx.Timeout = 120.0,
        max_retries: int = 3,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
        transport: httpx.AsyncBaseTransport | None = None,
        http_referer: str | None = None,
        title: str | None = None,
        include_usage: bool = True,
        headers: Mapping[str, str] | None = None,
        max_connections: int | None = 100,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL ending in /v1, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._url = f"{self.base_url}/chat/completions"
        self._max_retries = max_retries
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._include_usage = include_usage
        self._rng = random.Random()
        # httpcore's pool rescans every queued request on each change (quadratic), so
        # requests wait here, cheaply, until a connection slot is free.
        self._slots = asyncio.Semaphore(max_connections) if max_connections else None
        self._client = httpx.AsyncClient(
            headers=_headers(api_key, http_referer, title, headers),
            timeout=timeout if isinstance(timeout, httpx.Timeout) else _timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections),
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the underlying connection pool."""
        await self._client.aclose()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> Completion:
        """Request one chat completion; raise ModelError when it cannot be had."""
        body = self.build_body(messages, model=model, extra_body=extra_body, **params)
        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                completion = await self._attempt(body, attempt)
                return dataclasses.replace(completion, prompt=tuple(body["messages"]))
            except ModelError as err:
                if not _retryable(err) or attempt == attempts:
                    if attempt == 1:
                        raise
                    raise _final_error(err, attempt) from (err.__cause__ or err)
                delay = self._delay(attempt, err.retry_after)
                log.info("model call failed (%s); retry %d in %.3fs", err, attempt, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def build_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Return the JSON body `complete` sends, x_bench stamp included."""
        body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
        body.update(params)
        body.update(extra_body or {})
        if self._include_usage:
            # OpenRouter reports token counts and cost only when asked.
            body.setdefault("usage", {"include": True})
        ctx = current_sample()
        if ctx is not None:
            body["x_bench"] = {"sample_id": ctx.sample_id, "sample_epoch": ctx.epoch}
        return body

    async def _attempt(self, body: dict[str, Any], attempt: int) -> Completion:
        """Send the request once; translate every failure into a ModelError."""
        # The seed times the final, successful attempt: backoff sleeps and failed attempts
        # are the infrastructure's time, not the model's.
        started = time.perf_counter()
        try:
            response = await self._post(body)
        except httpx.TimeoutException as exc:
            raise ModelError(f"model request timed out ({exc!r})", kind="timeout") from exc
        except httpx.RequestError as exc:
            raise ModelError(f"model request failed: {exc!r}", kind="transport") from exc
        if not response.is_success:
            raise _status_error(response)
        elapsed_ms = round((time.perf_counter() - started) * 1000)
        return _parse_response(response, elapsed_ms, attempt, current_sample())

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        """POST the body, holding a connection slot for the duration."""
        if self._slots is None:
            return await self._client.post(self._url, json=body)
        async with self._slots:
            return await self._client.post(self._url, json=body)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter; a Retry-After is honoured up to backoff_max."""
        base = min(self._backoff_max, self._backoff_initial * 2.0 ** (attempt - 1))
        delay = base * self._rng.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self._backoff_max))
        return delay


def _timeout(seconds: float) -> httpx.Timeout:
    """Per-phase timeouts; waiting for a free pooled connection is not a model failure."""
    return httpx.Timeout(seconds, pool=None)


def _headers(
    api_key: SecretStr | str | None,
    referer: str | None,
    title: str | None,
    extra: Mapping[str, str] | None,
) -> dict[str, str]:
    """Build the request headers; the API key goes only into Authorization."""
    headers = {"Accept": "application/json"}
    key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if referer:
        headers["HTTP-Referer"] = referer
    if title:
        headers["X-Title"] = title
    headers.update(extra or {})
    return headers


def _retryable(err: ModelError) -> bool:
    """429, >= 500, timeouts and transport errors may succeed on another attempt."""
    if err.status is None:
        return err.kind in ("timeout", "transport")
    return err.status == 429 or err.status >= 500


def _final_error(err: ModelError, attempts: int) -> ModelError:
    """The error to raise after the last attempt, saying how many attempts were made."""
    message = f"{err.message} (after {attempts} attempts)"
    return ModelError(message, status=err.status, kind=err.kind, retry_after=err.retry_after)


def _status_error(response: httpx.Response) -> ModelError:
    """The error for a non-2xx response."""
    status = response.status_code
    return ModelError(
        f"model endpoint returned HTTP {status}: {_error_detail(response)}",
        status=status,
        retry_after=_retry_after(response.headers.get("retry-after")),
    )


def _parse_response(
    response: httpx.Response, elapsed_ms: int, attempts: int, sample: SampleContext | None
) -> Completion:
    """Parse a 2xx body; an unusable body is an error with no status."""
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = _snippet(response.text)
        raise ModelError(f"model response is not JSON: {detail}", kind="malformed") from exc
    generation_id = _opt_str(data.get("id")) if isinstance(data, dict) else None
    if sample is not None and generation_id is not None:
        sample.add_generation_id(generation_id)  # every call the sample made, failed ones too
    if isinstance(data, dict) and "choices" not in data and isinstance(data.get("error"), dict):
        raise _embedded_error(data["error"])
    try:
        return _completion(data, elapsed_ms, attempts)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"malformed model response: {exc}", kind="malformed") from exc


def _embedded_error(err: dict[str, Any]) -> ModelError:
    """OpenRouter may answer 200 with an `error` object; its code stands for the status."""
    code = err.get("code")
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    message = f"model endpoint reported an error ({code}): {_snippet(str(err.get('message')))}"
    return ModelError(message, status=status, kind="http" if status else "malformed")


def _completion(data: Any, elapsed_ms: int, attempts: int) -> Completion:
    """Build a Completion from a chat-completions body; raise ValueError if it has none."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices in the response")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ValueError("first choice has no message")
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    tool_calls = message.get("tool_calls")
    return Completion(
        text=_content_text(message.get("content")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
        tool_calls=tool_calls if isinstance(tool_calls, list) and tool_calls else None,
        generation_id=_opt_str(data.get("id")),
        model=_opt_str(data.get("model")),
        usage=_usage(data.get("usage")),
        raw=data,
        elapsed_ms=elapsed_ms,
        finish_reason=_opt_str(choices[0].get("finish_reason")),
        attempts=attempts,
        reasoning_details=message.get("reasoning_details") or None,
        citations=message.get("annotations") or data.get("citations") or None,
    )


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    if content is None:
        return ""
    raise ValueError(f"message content has unexpected type {type(content).__name__}")


def _usage(raw: Any) -> Usage | None:
    """Read OpenAI/OpenRouter usage fields; None when the endpoint reported none."""
    if not isinstance(raw, dict):
        return None
    details = raw.get("completion_tokens_details")
    input_tokens = _count(raw.get("prompt_tokens"))
    output_tokens = _count(raw.get("completion_tokens"))
    total = raw.get("total_tokens")
    cost = raw.get("cost")
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=_count(total) if total is not None else input_tokens + output_tokens,
        reasoning_tokens=_count(details.get("reasoning_tokens"))
        if isinstance(details, dict)
        else 0,
        cost=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
    )
    _check_bounds(usage)
    return usage


def _check_bounds(usage: Usage) -> None:
    """Refuse usage no record may carry (DESIGN rule 9), naming the field."""
    for name in ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens"):
        if getattr(usage, name) > MAX_TOKENS:
            raise ValueError(f"usage.{name} {getattr(usage, name)} is above {MAX_TOKENS}")
    if usage.cost is not None and not 0.0 <= usage.cost <= MAX_COST_USD:
        raise ValueError(f"usage.cost {usage.cost} is outside [0, {MAX_COST_USD:g}] USD")


def _count(value: Any) -> int:
    """A token count, 0 when missing or not a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _opt_str(value: Any) -> str | None:
    """The value when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def _error_detail(response: httpx.Response) -> str:
    """The `error.message` of an error body, or a snippet of the raw text."""
    try:
        data = response.json()
    except ValueError:
        return _snippet(response.text)
    err = data.get("error") if isinstance(data, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    return _snippet(message if isinstance(message, str) else response.text)


def _snippet(text: str) -> str:
    """Text shortened for an error message."""
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "..."


def _retry_after(value: str | None) -> float | None:
    """Parse a Retry-After header (seconds or HTTP date) into seconds, or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
