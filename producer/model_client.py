"""Async OpenAI-compatible chat-completions client with bounded retries and x_bench stamping."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self

import httpx
from pydantic import SecretStr

from resultlog.producer._responses import Completion, CompletionUsage, parse_response, status_error
from resultlog.producer.context import current_sample
from resultlog.producer.errors import ModelError

__all__ = [
    "Completion",
    "CompletionUsage",
    "ErrorClass",
    "ModelClient",
    "classify_model_error",
]

log = logging.getLogger(__name__)

ErrorClass = Literal["skip", "incorrect", "fatal"]
# Statuses no other attempt or sample can cure: credentials, credits, the URL itself.
_FATAL_4XX = frozenset({401, 402, 403, 404})


def classify_model_error(err: ModelError) -> ErrorClass:
    """Map a model error to its outcome (docs/design.md, rule 6).

    429 or >= 500 -> "skip" (degraded S); 401/402/403/404, a 3xx (a redirect: the URL is
    wrong) or no HTTP status -> "fatal" (fails the run); any other non-2xx status (400,
    422...) -> "incorrect" (degraded I).
    """
    status = err.status
    if status is None or status in _FATAL_4XX or 300 <= status < 400:
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
            headers=_headers(api_key, headers),
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
                _count_attempt(completion)
                return dataclasses.replace(completion, prompt=tuple(body["messages"]))
            except ModelError as err:
                _count_attempt(None)
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
        # Time the final, successful attempt only: backoff sleeps and failed attempts
        # are the infrastructure's time, not the model's.
        started = time.perf_counter()
        try:
            response = await self._post(body)
        except httpx.TimeoutException as exc:
            raise ModelError(
                f"model request timed out: POST {self._url} ({_reason(exc)})", kind="timeout"
            ) from exc
        except httpx.RequestError as exc:
            raise ModelError(
                f"model request failed: POST {self._url}: {_reason(exc)}", kind="transport"
            ) from exc
        if not response.is_success:
            raise status_error(response, self._url)
        elapsed_ms = round((time.perf_counter() - started) * 1000)
        return parse_response(response, elapsed_ms, attempt, current_sample())

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


def _count_attempt(completion: Completion | None) -> None:
    """Tell the running sample, if any, of one more model attempt and its cost (its bill)."""
    sample = current_sample()
    if sample is not None:
        usage = completion.usage if completion is not None else None
        sample.add_attempt((usage.cost or 0.0) if usage is not None else 0.0)


def _timeout(seconds: float) -> httpx.Timeout:
    """Per-phase timeouts; waiting for a free pooled connection is not a model failure."""
    return httpx.Timeout(seconds, pool=None)


def _headers(api_key: SecretStr | str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    """Build the request headers; the API key goes only into Authorization."""
    headers = {"Accept": "application/json"}
    key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
    if key:
        headers["Authorization"] = f"Bearer {key}"
    headers.update(extra or {})
    return headers


def _reason(exc: httpx.RequestError) -> str:
    """What went wrong with a request, in words (its type when it has none)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retryable(err: ModelError) -> bool:
    """429, >= 500, timeouts and transport errors may succeed on another attempt."""
    if err.status is None:
        return err.kind in ("timeout", "transport")
    return err.status == 429 or err.status >= 500


def _final_error(err: ModelError, attempts: int) -> ModelError:
    """The error to raise after the last attempt, saying how many attempts were made."""
    message = f"{err.message} (after {attempts} attempts)"
    return ModelError(message, status=err.status, kind=err.kind, retry_after=err.retry_after)
