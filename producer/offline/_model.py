"""The offline model's decisions: a stable hash of (sample_id, epoch) picks each outcome."""

from __future__ import annotations

import hashlib
import re
import time
from http import HTTPStatus
from typing import Any, Literal

from resultlog.producer._arith import evaluate, find_expression
from resultlog.producer._scorers import exact_match, numeric_match, parse_number

__all__ = [
    "DEFAULT_ERROR_RATE",
    "DEFAULT_SEED",
    "DEFAULT_WRONG_RATE",
    "MODEL_ID",
    "Outcome",
    "answer_text",
    "completion_body",
    "error_body",
    "expected_outcome",
    "generation_id",
    "grade_text",
    "is_expected_degraded",
    "last_user_text",
    "prompt_key",
]

Outcome = Literal["correct", "incorrect", "rate_limited", "server_error"]

MODEL_ID = "resultlog/offline-arith"
DEFAULT_SEED = 0
DEFAULT_ERROR_RATE = 0.025  # 429s and 500s together: "a fixed few" pairs
DEFAULT_WRONG_RATE = 0.10
_RATE_LIMITED_SHARE = 0.6  # of the error rate; the rest are 500s
_COST_PER_TOKEN = 1e-6
_UNKNOWN_ANSWER = "I don't know."
# A model-graded rescore's question to its grader: the expert answer, then the submission.
_GRADING = re.compile(
    r"^\[Expert answer\]: (?P<target>.*?)\n\[Submission\]: (?P<answer>.*?)\n\n.*GRADE: C",
    re.MULTILINE | re.DOTALL,
)


def _digest(seed: int, salt: str, sample_id: str, epoch: int) -> bytes:
    """A stable digest of the pair (hashlib, so every process agrees, unlike hash())."""
    return hashlib.sha256(f"{seed}\x1f{salt}\x1f{sample_id}\x1f{epoch}".encode()).digest()


def _unit(seed: int, salt: str, sample_id: str, epoch: int) -> float:
    """A stable number in [0, 1) for the pair."""
    return int.from_bytes(_digest(seed, salt, sample_id, epoch)[:8], "big") / 2.0**64


def expected_outcome(
    sample_id: str,
    epoch: int,
    *,
    seed: int = DEFAULT_SEED,
    error_rate: float = DEFAULT_ERROR_RATE,
    wrong_rate: float = DEFAULT_WRONG_RATE,
) -> Outcome:
    """What the offline model does for the pair when nothing overrides it."""
    u = _unit(seed, "outcome", sample_id, epoch)
    if u < error_rate * _RATE_LIMITED_SHARE:
        return "rate_limited"
    if u < error_rate:
        return "server_error"
    if u < error_rate + wrong_rate:
        return "incorrect"
    return "correct"


def is_expected_degraded(
    sample_id: str,
    epoch: int,
    *,
    seed: int = DEFAULT_SEED,
    error_rate: float = DEFAULT_ERROR_RATE,
) -> bool:
    """True when the offline model answers the pair with a persistent 429 or 500."""
    outcome = expected_outcome(sample_id, epoch, seed=seed, error_rate=error_rate)
    return outcome in ("rate_limited", "server_error")


def generation_id(sample_id: str, epoch: int, *, seed: int = DEFAULT_SEED) -> str:
    """A `gen-...` id that is the same for the pair on every run."""
    return "gen-" + _digest(seed, "generation", sample_id, epoch).hex()[:24]


def prompt_key(prompt: str) -> str:
    """A sample id for a request without x_bench: a hash of its prompt."""
    return "prompt-" + hashlib.sha256(prompt.encode()).hexdigest()[:16]


def last_user_text(messages: list[Any]) -> str:
    """The text of the last user message (string content or text parts), or ''."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _text(content: Any) -> str:
    """Message content as plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and "text" in p)
    return ""


def answer_text(prompt: str, key: tuple[str, int], *, correct: bool, seed: int) -> str:
    """The reply to an arithmetic prompt: right, or off by a stable non-zero amount."""
    expr = find_expression(prompt)
    if expr is None:
        return _UNKNOWN_ANSWER
    try:
        value = evaluate(expr)
    except ValueError:
        return _UNKNOWN_ANSWER
    if not correct:
        digest = _digest(seed, "wrong", *key)
        offset = 1 + digest[0] % 9
        value += offset if digest[1] % 2 else -offset
    return f"The answer is {value}."


def grade_text(prompt: str) -> str | None:
    """A grader's reply to a grading prompt, or None for any other prompt.

    It grades as a careful grader would, the same every time: C when the submission's final
    number equals one of the expert answers (or, without numbers, when the texts match).
    """
    found = _GRADING.search(prompt)
    if found is None:
        return None
    answer = found["answer"]
    for target in found["target"].split(" or "):
        scorer = numeric_match if parse_number(target) is not None else exact_match
        if scorer(target, answer).value == "C":
            return f"The submission matches the expert answer {target.strip()!r}.\nGRADE: C"
    return "The submission does not match the expert answer.\nGRADE: I"


def completion_body(
    *,
    model: str,
    gen_id: str,
    messages: list[Any],
    answer: str,
    reasoning: str | None = None,
    tool_calls: list[Any] | None = None,
    message_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An OpenAI/OpenRouter chat.completion body with usage and a deterministic cost."""
    prompt_tokens = sum(
        len(_text(m.get("content")).split()) + 4 for m in messages if isinstance(m, dict)
    )
    reasoning_tokens = len(reasoning.split()) if reasoning else 0
    completion_tokens = len(answer.split()) + reasoning_tokens
    total = prompt_tokens + completion_tokens
    message: dict[str, Any] = {"role": "assistant", "content": answer}
    if reasoning is not None:
        # OpenRouter returns the reasoning both as text and as structured details.
        message["reasoning"] = reasoning
        message["reasoning_details"] = [{"type": "reasoning.text", "text": reasoning}]
    message.update(message_extra or {})
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    finish = "tool_calls" if tool_calls else "stop"
    return {
        "id": gen_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "provider": "resultlog-offline",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": total,
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "cost": total * _COST_PER_TOKEN,
        },
    }


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return {"error": {"message": message or phrase, "code": status, "type": "offline_model"}}
