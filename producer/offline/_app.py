"""The offline model's HTTP application: overrides, request log and reply building."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal, NamedTuple

from resultlog.producer.offline._completions import (
    TOKENIZER_INFO,
    completions_body,
    decode,
    encode,
    prompts_of,
)
from resultlog.producer.offline._http11 import HttpReply, HttpRequest
from resultlog.producer.offline._model import (
    MODEL_ID,
    answer_text,
    completion_body,
    error_body,
    expected_outcome,
    generation_id,
    grade_text,
    last_user_text,
    prompt_key,
)

__all__ = ["App", "Behavior", "Config", "Fault", "LoggedRequest", "State"]

Fault = Literal["hang", "malformed", "reset", "close"]
_HANG_S = 3600.0
_MALFORMED_BODY = b'{"id": "gen-malformed", "choices": [{"message": '


@dataclass(frozen=True, slots=True)
class Behavior:
    """How to answer one request; `answer=None` means the right answer to the prompt.

    Faults: "hang" never answers (until the server stops), "malformed" sends a truncated
    JSON body with `status`, "reset" aborts the connection with an RST and "close" closes
    it cleanly, both without any response.
    """

    answer: str | None = None
    status: int = 200
    delay_s: float = 0.0
    fault: Fault | None = None
    retry_after: float | None = None
    reasoning: str | None = None
    tool_calls: list[Any] | None = None
    generation_id: str | None = None
    message_extra: dict[str, Any] | None = None
    """Extra fields of the assistant message (e.g. OpenAI's `annotations`)."""


class LoggedRequest(NamedTuple):
    """One chat-completions request as received; sample_id/epoch are None without x_bench."""

    sample_id: str | None
    epoch: int | None
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Config:
    """The knobs that decide default outcomes."""

    latency_s: float
    seed: int
    error_rate: float
    wrong_rate: float


class State:
    """Overrides and the request log, shared by the server loop and the caller's thread."""

    def __init__(self, log_file: IO[str] | None) -> None:
        self._lock = threading.Lock()
        self._overrides: dict[tuple[str, int], deque[Behavior]] = {}
        self._requests: list[LoggedRequest] = []
        self._log_file = log_file

    def record(self, entry: LoggedRequest) -> None:
        """Append a request to the log (and the JSONL file, flushed per line)."""
        with self._lock:
            self._requests.append(entry)
            if self._log_file is not None:
                model = entry.body.get("model")
                line = {
                    "sample_id": entry.sample_id,
                    "epoch": entry.epoch,
                    "model": model if isinstance(model, str) else None,
                }
                self._log_file.write(json.dumps(line) + "\n")
                self._log_file.flush()

    def requests(self) -> list[LoggedRequest]:
        """A copy of the request log."""
        with self._lock:
            return list(self._requests)

    def override(self, key: tuple[str, int], behaviors: Sequence[Behavior]) -> None:
        """Queue behaviours for a pair; the last one repeats for every later request."""
        with self._lock:
            self._overrides[key] = deque(behaviors)

    def clear_overrides(self) -> None:
        """Forget every override."""
        with self._lock:
            self._overrides.clear()

    def open_log(self, log_file: IO[str]) -> None:
        """Start mirroring the request log to a JSONL file."""
        with self._lock:
            self._log_file = log_file

    def close_log(self) -> None:
        """Close the JSONL request log, if any."""
        with self._lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def next_behavior(self, key: tuple[str, int]) -> Behavior | None:
        """The override for this request to the pair, if any."""
        with self._lock:
            queue = self._overrides.get(key)
            if not queue:
                return None
            return queue.popleft() if len(queue) > 1 else queue[0]


class App:
    """Routes requests and answers chat completions."""

    def __init__(self, config: Config, state: State) -> None:
        self._config = config
        self._state = state

    async def __call__(self, request: HttpRequest) -> HttpReply:
        """Dispatch on method and path."""
        if request.path == "/v1/chat/completions":
            if request.method != "POST":
                return _json_reply(405, error_body(405))
            return await self._chat(request.body)
        if request.path == "/v1/completions" and request.method == "POST":
            return await self._completions(request.body)
        tokenizer = _tokenizer(request)
        if tokenizer is not None:
            return tokenizer
        if request.path == "/v1/models" and request.method == "GET":
            models = {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}
            return _json_reply(200, models)
        return _json_reply(404, error_body(404, f"no route for {request.method} {request.path}"))

    async def _chat(self, raw: bytes) -> HttpReply:
        """Answer one chat-completions request."""
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return _json_reply(400, error_body(400, "request body is not JSON"))
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _json_reply(400, error_body(400, "request needs a `messages` list"))
        sample_id, epoch = _x_bench(body)
        self._state.record(LoggedRequest(sample_id, epoch, body))
        prompt = last_user_text(body["messages"])
        key = (sample_id, epoch) if sample_id is not None and epoch is not None else None
        key = key or (prompt_key(prompt), 0)
        behavior = self._state.next_behavior(key) or self._default(key, prompt)
        await asyncio.sleep(self._config.latency_s + behavior.delay_s)
        if behavior.fault == "hang":
            await asyncio.sleep(_HANG_S)  # cancelled when the server stops
        return self._reply(behavior, body, key, prompt)

    async def _completions(self, raw: bytes) -> HttpReply:
        """Answer one legacy completions request (log-likelihoods when `echo` is set)."""
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return _json_reply(400, error_body(400, "request body is not JSON"))
        if not isinstance(body, dict) or prompts_of(body.get("prompt")) is None:
            return _json_reply(400, error_body(400, "request needs a `prompt`"))
        self._state.record(LoggedRequest(*_x_bench(body), body))
        await asyncio.sleep(self._config.latency_s)
        cfg = self._config
        return _json_reply(200, completions_body(body, cfg.seed, cfg.wrong_rate))

    def _default(self, key: tuple[str, int], prompt: str) -> Behavior:
        """The hash-decided behaviour for a pair."""
        cfg = self._config
        outcome = expected_outcome(
            *key, seed=cfg.seed, error_rate=cfg.error_rate, wrong_rate=cfg.wrong_rate
        )
        if outcome == "rate_limited":
            return Behavior(status=429)
        if outcome == "server_error":
            return Behavior(status=500)
        grade = grade_text(prompt)  # a grader's verdict is right whatever the pair's hash
        if grade is not None:
            return Behavior(answer=grade)
        if outcome == "incorrect":
            return Behavior(answer=answer_text(prompt, key, correct=False, seed=cfg.seed))
        return Behavior()

    def _reply(
        self, behavior: Behavior, body: dict[str, Any], key: tuple[str, int], prompt: str
    ) -> HttpReply:
        """Turn a behaviour into a reply."""
        if behavior.fault in ("reset", "close"):
            return HttpReply(fault="reset" if behavior.fault == "reset" else "close")
        if behavior.fault == "malformed":
            return HttpReply(status=behavior.status, body=_MALFORMED_BODY)
        if behavior.status != 200:
            headers = (
                ()
                if behavior.retry_after is None
                else (("retry-after", f"{behavior.retry_after:g}"),)
            )
            return _json_reply(behavior.status, error_body(behavior.status), headers)
        seed = self._config.seed
        answer = behavior.answer
        if answer is None:
            answer = answer_text(prompt, key, correct=True, seed=seed)
        model = body.get("model")
        completion = completion_body(
            model=model if isinstance(model, str) else MODEL_ID,
            gen_id=behavior.generation_id or generation_id(*key, seed=seed),
            messages=body["messages"],
            answer=answer,
            reasoning=behavior.reasoning,
            tool_calls=behavior.tool_calls,
            message_extra=behavior.message_extra,
        )
        return _json_reply(200, completion)


def _tokenizer(request: HttpRequest) -> HttpReply | None:
    """vLLM's tokenizer endpoints (lm-eval's remote tokenizer), or None for another path."""
    if request.path == "/tokenizer_info" and request.method == "GET":
        return _json_reply(200, TOKENIZER_INFO)
    if request.path not in ("/tokenize", "/detokenize") or request.method != "POST":
        return None
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return _json_reply(400, error_body(400, "request body is not JSON"))
    text, tokens = body.get("prompt"), body.get("tokens")
    if request.path == "/tokenize" and isinstance(text, str):
        return _json_reply(200, {"tokens": encode(text), "count": len(encode(text))})
    if request.path == "/detokenize" and isinstance(tokens, list):
        return _json_reply(200, {"prompt": decode([int(t) for t in tokens])})
    return _json_reply(400, error_body(400, "request needs a `prompt` text or `tokens` list"))


def _x_bench(body: dict[str, Any]) -> tuple[str | None, int | None]:
    """The (sample_id, epoch) stamped by the client, or (None, None)."""
    stamp = body.get("x_bench")
    if not isinstance(stamp, dict):
        return None, None
    sample_id, epoch = stamp.get("sample_id"), stamp.get("sample_epoch")
    if not isinstance(sample_id, str) or isinstance(epoch, bool) or not isinstance(epoch, int):
        return None, None
    return sample_id, epoch


def _json_reply(
    status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
) -> HttpReply:
    """A JSON reply."""
    return HttpReply(status=status, body=json.dumps(payload).encode(), headers=headers)
