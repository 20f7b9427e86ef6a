"""A real `inspect eval` whose sample input is larger than a Kafka message: every pair is
durable, the big one's payload reduced and said so, and the records name the model's endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from resultlog.consumers import read_run_records, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import MODEL, inspect_env, inspect_eval

# Three sums, the second carrying 1.2 MB of random hex after its question.
BIG = """
import random

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate

NOISE = random.Random(7).randbytes(600_000).hex()


@task
def big() -> Task:
    return Task(
        dataset=[
            Sample(id="s1", input="What is 1 + 1?", target="2"),
            Sample(id="s2", input="What is 2 + 1? " + NOISE, target="3"),
            Sample(id="s3", input="What is 3 + 1?", target="4"),
        ],
        solver=generate(),
        scorer=match(numeric=True),
    )
"""


def test_an_input_over_a_message_is_made_to_fit_and_the_eval_succeeds(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "big.py").write_text(BIG)
    with ModelServer(latency_s=0.002, error_rate=0.0) as server:  # no pair retried forever
        env = inspect_env(cli_env, server)
        done = inspect_eval(
            env, "big", Path("logs"), "--epochs", "2", tasks=["big.py@big"], cwd=tmp_path
        )
        endpoint = server.base_url
    assert done.returncode == 0, done.stdout + done.stderr
    assert "inspect resume" not in done.stdout + done.stderr
    key = RunKey("big", "big", MODEL)
    with KafkaConnection(settings) as kafka:
        records = read_run_records(kafka, key).records
        summary = replay_run(kafka, key).summaries[key]
    assert sorted((r.sample_id, r.epoch) for r in records) == [
        (f"s{i}", epoch) for i in (1, 2, 3) for epoch in (0, 1)
    ]
    cut = {(r.sample_id, r.epoch): json.loads(r.truncated or "{}") for r in records}
    for epoch in (0, 1):  # the payload kept bare (the scores), the whole input compressed in
        assert cut["s2", epoch]["harness_payload"]["form"] == "bare", cut
        assert not cut["s1", epoch] and not cut["s3", epoch], cut
    assert {len(r.input) for r in records if r.sample_id == "s2"} == {
        len("What is 2 + 1? ") + 1_200_000
    }
    assert (summary.records, summary.expected_records) == (6, 6)
    assert {json.loads(r.config or "{}").get("base_url") for r in records} == {endpoint}
