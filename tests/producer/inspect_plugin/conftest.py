"""Fixtures of the Inspect AI plugin's tests: a real in-process Inspect eval (mockllm)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import get_model
from inspect_ai.scorer import includes, match
from inspect_ai.solver import generate

from tests.producer.inspect_plugin.support import SEEN, mock_answer, remember_active_sample


@pytest.fixture(scope="session")
def mock_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalLog]:
    """A finished eval of 2 samples x 2 epochs, 2 scorers, with resultlog's hooks off."""
    task = Task(
        dataset=[
            Sample(id=7, input="What is 3 + 4?", target="7"),
            Sample(id="b", input="hi", target="8"),
        ],
        solver=[remember_active_sample(), generate()],
        scorer=[match(numeric=True), includes()],
        epochs=2,
        name="mock_arith",
    )
    SEEN.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RESULTLOG_BOOTSTRAP_SERVERS", raising=False)  # no publishing here
        [log] = eval(
            task,
            model=get_model("mockllm/model", custom_outputs=mock_answer),
            display="none",
            log_dir=str(tmp_path_factory.mktemp("inspect-logs")),
        )
    assert log.status == "success", log.error
    yield log
