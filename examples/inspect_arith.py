"""A small Inspect AI task to try resultlog's plugin with: eight sums, two epochs.

    INSPECT_LOG_DIR=/tmp/inspect-logs inspect eval examples/inspect_arith.py \\
        --model openai-api/offline/arith --metadata resultlog_run=inspect-1

`resultlog model-server` answers it offline (OFFLINE_BASE_URL, OFFLINE_API_KEY). Inspect asks
all 16 pairs at once: to kill the eval part way and resume it, slow the model down
(`resultlog model-server --latency-ms 1000`) and add `--max-samples 2`.
"""

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate

SUMS = [(17, 25), (3, 4), (100, 23), (8, 9), (41, 1), (6, 60), (12, 30), (7, 5)]


@task
def arith(samples: int = len(SUMS)) -> Task:
    """What is A + B? for the first `samples` sums, scored by the number the answer ends with."""
    dataset = MemoryDataset(
        [
            Sample(id=f"q{i}", input=f"What is {a} + {b}?", target=str(a + b))
            for i, (a, b) in enumerate(SUMS[:samples], start=1)
        ],
        name="arith",
    )
    return Task(dataset=dataset, solver=generate(), scorer=match(numeric=True), epochs=2)
