"""The grader model of a model-graded rescore: asked through the `run` model client."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from resultlog.producer._scorers import Scored
from resultlog.producer.model_client import Completion, ModelClient
from resultlog.producer.rescore._answer import targets
from resultlog.schemas import SampleResult

__all__ = ["Grader", "graded"]

_GRADE = re.compile(r"GRADE\s*:\s*([CI])\b")
_TEMPLATE = """You are comparing a submitted answer to an expert answer on a given question.

[Question]: {question}
[Expert answer]: {target}
[Submission]: {answer}

Does the submission answer the question as the expert answer does? Reply with the last line
"GRADE: C" if it does, or "GRADE: I" if it does not."""


@dataclass(frozen=True)
class Grader:
    """A model that grades: the client, its model name and its generation parameters."""

    client: ModelClient
    model: str
    params: dict[str, Any] = field(default_factory=dict)

    async def ask(self, prompt: str) -> Completion:
        """One chat completion of the prompt (stamped with x_bench, its attempts counted)."""
        return await self.client.complete(
            [{"role": "user", "content": prompt}], model=self.model, **self.params
        )


async def graded(grader: Grader, record: SampleResult, answer: str) -> Scored:
    """The grader's verdict on the stored answer: C or I, from its `GRADE:` line."""
    prompt = _TEMPLATE.format(
        question=record.input, target=" or ".join(targets(record)) or "(none)", answer=answer
    )
    reply = (await grader.ask(prompt)).text or ""
    found = _GRADE.findall(reply)
    grade = found[-1] if found else "I"
    said = f"grader {grader.model} said GRADE: {grade}" if found else "grader gave no GRADE"
    steps: list[dict[str, object]] = [{"step": "grade", "model": grader.model, "reply": reply}]
    return Scored("C" if grade == "C" else "I", answer or None, said, {}, steps)
