"""What a stored record answered, and what it was asked to match."""

from __future__ import annotations

import json

from resultlog.schemas import SampleResult

__all__ = ["stored_answer", "targets"]


def stored_answer(record: SampleResult) -> str | None:
    """The text of the record's last assistant message (None: no answer was stored)."""
    for message in reversed(record.messages):
        if message.role == "assistant":
            return message.content
    return None


def targets(record: SampleResult) -> list[str]:
    """The record's targets: one, or each of an Inspect record's JSON list of them."""
    target = record.target
    if target is None:
        return []
    if record.harness is not None and record.harness.name == "inspect_ai" and target[:1] == "[":
        try:
            parsed = json.loads(target)
        except ValueError:
            return [target]
        if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
            return parsed
    return [target]
