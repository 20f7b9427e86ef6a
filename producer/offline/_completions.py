"""The offline model's legacy completions and tokenizer: what lm-eval's `local-completions`
needs for log-likelihoods (`echo` with `logprobs`, and vLLM's `/tokenize` endpoints).

Tokens are the prompt's UTF-8 bytes. An echoed prompt's tokens after its last arithmetic
expression score the number that follows it: likely (greedy) when it is the right answer,
unlikely otherwise; so a multiple-choice question's right choice has the highest
log-likelihood, unless the question's hash-decided outcome is "incorrect".
"""

from __future__ import annotations

import re
import time
from typing import Any

from resultlog.producer._arith import evaluate, find_expression
from resultlog.producer.offline._model import (
    _COST_PER_TOKEN,
    MODEL_ID,
    answer_text,
    expected_outcome,
    prompt_key,
)

__all__ = ["TOKENIZER_INFO", "completions_body", "decode", "encode", "prompts_of"]

TOKENIZER_INFO = {"eos_token": "\n", "bos_token": None, "pad_token": None}
_LIKELY = -0.05
_UNLIKELY = -4.0
_PLAIN = -1.0
_OTHER = "\x01"  # the token a non-greedy position's top choice is
_NUMBER = re.compile(r"-?\d+")


def encode(text: str) -> list[int]:
    """The text's tokens: its UTF-8 bytes."""
    return list(text.encode("utf-8"))


def decode(tokens: list[int]) -> str:
    """The text of byte tokens (invalid bytes replaced)."""
    return bytes(t % 256 for t in tokens).decode("utf-8", "replace")


def prompts_of(prompt: Any) -> list[list[int]] | None:
    """A completions `prompt` (text, texts, tokens or token lists) as token lists."""
    if isinstance(prompt, str):
        return [encode(prompt)]
    if isinstance(prompt, list) and prompt and all(isinstance(p, int) for p in prompt):
        return [list(prompt)]
    if isinstance(prompt, list) and prompt:
        found = [prompts_of(item) for item in prompt]
        if all(item is not None and len(item) == 1 for item in found):
            return [item[0] for item in found if item is not None]
    return None


def completions_body(body: dict[str, Any], seed: int, wrong_rate: float) -> dict[str, Any]:
    """A text_completion body: echoed prompts with log-probabilities, or answers."""
    prompts = prompts_of(body.get("prompt")) or []
    echo = bool(body.get("echo"))
    choices = [
        _echoed(index, tokens, seed, wrong_rate)
        if echo
        else _answered(index, tokens, seed, wrong_rate)
        for index, tokens in enumerate(prompts)
    ]
    used = sum(len(tokens) + 1 for tokens in prompts)
    model = body.get("model")
    return {
        "id": f"cmpl-{prompt_key(repr(prompts))[7:]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model if isinstance(model, str) else MODEL_ID,
        "choices": choices,
        "usage": {
            "prompt_tokens": used - len(prompts),
            "completion_tokens": len(prompts),
            "total_tokens": used,
            "cost": used * _COST_PER_TOKEN,
        },
    }


def _right(text: str, seed: int, wrong_rate: float) -> tuple[int, int | None]:
    """Where the text's last expression ends, and its value if the model knows it."""
    expr = find_expression(text)
    if expr is None:
        return len(text), None
    end = text.rfind(expr) + len(expr)
    try:
        value = evaluate(expr)
    except ValueError:
        return end, None
    outcome = expected_outcome(prompt_key(text[:end]), 0, seed=seed, wrong_rate=wrong_rate)
    return end, value if outcome == "correct" else value + 1


def _echoed(index: int, tokens: list[int], seed: int, wrong_rate: float) -> dict[str, Any]:
    """The prompt's tokens with their log-probabilities, then one generated token."""
    text = decode(tokens)
    end, value = _right(text, seed, wrong_rate)
    scored = {}
    numbers = list(_NUMBER.finditer(text, end))
    if numbers and value is not None:
        last = numbers[-1]
        likely = int(last.group()) == value
        start = len(text[: last.start()].encode("utf-8"))
        stop = len(text[: last.end()].encode("utf-8"))
        scored = dict.fromkeys(range(start, stop), likely)
    logprobs: list[float | None] = [None]
    tops: list[dict[str, float] | None] = [None]
    for position in range(1, len(tokens)):
        shown = decode([tokens[position]])
        likely = scored.get(position, True)
        chance = _PLAIN if position not in scored else _LIKELY if likely else _UNLIKELY
        logprobs.append(chance)
        tops.append({shown: chance} if likely else {shown: chance, _OTHER: _LIKELY})
    logprobs.append(_PLAIN)  # the one generated token (max_tokens 1)
    tops.append({"\n": _PLAIN})
    return {
        "index": index,
        "text": text + "\n",
        "logprobs": {
            "tokens": [decode([t]) for t in tokens] + ["\n"],
            "token_logprobs": logprobs,
            "top_logprobs": tops,
        },
        "finish_reason": "length",
    }


def _answered(index: int, tokens: list[int], seed: int, wrong_rate: float) -> dict[str, Any]:
    text = decode(tokens)
    key = (prompt_key(text), 0)
    outcome = expected_outcome(*key, seed=seed, wrong_rate=wrong_rate)
    answer = answer_text(text, key, correct=outcome == "correct", seed=seed)
    return {"index": index, "text": " " + answer, "logprobs": None, "finish_reason": "stop"}
