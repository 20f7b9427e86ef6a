"""Chat-completions responses read into Completions, and the errors of failed ones."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from resultlog.producer.context import SampleContext
from resultlog.producer.errors import ModelError
from resultlog.schemas import MAX_COST_USD, MAX_TOKENS

__all__ = ["Completion", "CompletionUsage", "parse_response", "parse_usage", "status_error"]

_SNIPPET_CHARS = 200


@dataclass(frozen=True, slots=True)
class CompletionUsage:
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
    usage: CompletionUsage | None
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


def status_error(response: httpx.Response, url: str) -> ModelError:
    """The error for a non-2xx response to a POST to `url`."""
    status = response.status_code
    detail = _error_detail(response)
    location = response.headers.get("location")
    if 300 <= status < 400 and location:  # a redirect says where the endpoint moved
        detail = f"redirects to {_snippet(location)} (use that as the base URL); {detail}"
    if status == 401:
        detail += "; RESULTLOG_API_KEY (or OPENROUTER_API_KEY) must hold the endpoint's key"
    return ModelError(
        f"model endpoint returned HTTP {status} for POST {url}: {detail}",
        status=status,
        retry_after=_retry_after(response.headers.get("retry-after")),
    )


def parse_response(
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
        usage=parse_usage(data.get("usage")),
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


def parse_usage(raw: Any) -> CompletionUsage | None:
    """Read OpenAI/OpenRouter usage fields; None when the endpoint reported none.

    One rule for every field: absent (or null) is unknown (0 tokens, no cost); present but
    not a number in the contract's bounds (negative, text, too large) is a malformed response
    naming the field, since a bill that cannot be trusted must not be recorded as zero.
    """
    if not isinstance(raw, dict):
        return None
    details = raw.get("completion_tokens_details")
    input_tokens = _count(raw, "prompt_tokens", "input_tokens")
    output_tokens = _count(raw, "completion_tokens", "output_tokens")
    total = raw.get("total_tokens")
    cost = raw.get("cost")
    if cost is not None and not (_number(cost) and 0.0 <= cost <= MAX_COST_USD):
        raise ValueError(f"usage.cost {cost!r} is not a number in [0, {MAX_COST_USD:g}] USD")
    return CompletionUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=_count(raw, "total_tokens")
        if total is not None
        else input_tokens + output_tokens,
        reasoning_tokens=_count(details, "reasoning_tokens") if isinstance(details, dict) else 0,
        cost=float(cost) if cost is not None else None,
    )


def _count(raw: dict[str, Any], key: str, name: str | None = None) -> int:
    """A token count: 0 when absent; an error naming it when not an integer in bounds."""
    value = raw.get(key)
    if value is None:
        return 0
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS):
        raise ValueError(f"usage.{name or key} {value!r} is not an integer in [0, {MAX_TOKENS}]")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
