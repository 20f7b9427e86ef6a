"""The offline model grades a grading prompt as a careful grader would, the same every time, so
`rescore --scorer graded` can be tried without a key."""

from __future__ import annotations

import pytest

from resultlog.producer.model_client import ModelClient
from resultlog.producer.offline import ModelServer
from resultlog.producer.offline._model import grade_text
from resultlog.producer.rescore._grader import Grader, graded
from tests.support.records import make_record


@pytest.mark.parametrize(
    ("target", "answer", "grade"),
    [
        ("42", "The answer is 42.", "C"),
        ("42", "The answer is 41.", "I"),
        ("42", "I don't know.", "I"),
        ("Paris", "paris", "C"),
        ("Paris", "Lyon", "I"),
        ("7 or 8", "8", "C"),
    ],
)
def test_a_grading_prompt_gets_the_verdict_a_grader_gives(
    target: str, answer: str, grade: str
) -> None:
    prompt = (
        "You are comparing ...\n\n[Question]: What is 3 + 4?\n"
        f"[Expert answer]: {target}\n[Submission]: {answer}\n\n"
        'Reply with the last line\n"GRADE: C" if it does, or "GRADE: I" if it does not.'
    )
    reply = grade_text(prompt)
    assert reply is not None and reply.endswith(f"GRADE: {grade}")
    assert grade_text("What is 3 + 4?") is None  # any other prompt is answered as before


async def test_the_offline_server_grades_the_rescore_grader_prompt() -> None:
    right = make_record(0, 0, input="What is 17 + 25?", target="42")
    with ModelServer(latency_s=0.0, error_rate=0.0) as server:
        async with ModelClient(server.base_url, max_retries=0) as client:
            grader = Grader(client, "offline/grader")
            verdicts = [
                (await graded(grader, right, answer)).value
                for answer in ("The answer is 42.", "The answer is 43.", "42", "The answer is 42.")
            ]
    assert verdicts == ["C", "I", "C", "C"]
