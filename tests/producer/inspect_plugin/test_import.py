"""`resultlog inspect import`: an Inspect log made without the plugin, put on a real broker.

The example task runs in a child `inspect eval` with the plugin off, against the offline
model server; its log is imported by the `resultlog` command as a user would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from inspect_ai.log import EvalLog

from resultlog.consumers import read_run_records, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import ScoreValue
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    ALL_PAIRS,
    inspect_env,
    inspect_eval,
    metrics,
    only_log,
    pairs,
    run_key,
    unplugged,
)
from tests.support.cli import child_env, one_line_error, run_cli
from tests.support.kafka import watermarks


@dataclass(frozen=True)
class Logged:
    """An eval run with the plugin off: its log directory and Inspect's log."""

    log_dir: Path
    log: EvalLog


@pytest.fixture
def logged(settings: Settings, tmp_path: Path) -> Iterator[Logged]:
    """The example task evaluated to its end without the plugin, run id "imp" in its metadata."""
    log_dir = tmp_path / "logs"
    with ModelServer(latency_s=0.002) as server:
        done = inspect_eval(unplugged(inspect_env(child_env(settings), server)), "imp", log_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    yield Logged(log_dir, only_log(log_dir))


def _import(env: dict[str, str], *args: str) -> list[dict[str, object]]:
    done = run_cli(env, "inspect", "import", *args, "--json")
    assert done.returncode == 0, done.stderr
    imported: list[dict[str, object]] = json.loads(done.stdout)
    return imported


def test_an_imported_log_replays_to_inspects_accuracy_and_a_second_import_writes_nothing(
    settings: Settings, cli_env: dict[str, str], logged: Logged
) -> None:
    before = watermarks(settings)
    [dry] = _import(cli_env, str(logged.log_dir), "--dry-run")
    assert (dry["written"], dry["held"]) == (len(ALL_PAIRS), 0)
    assert watermarks(settings) == before  # a dry run writes nothing

    [imported] = _import(cli_env, str(logged.log_dir))
    assert (imported["run_id"], imported["written"]) == ("imp", len(ALL_PAIRS))
    key = run_key("imp")
    with KafkaConnection(settings) as kafka:
        summary = replay_run(kafka, key).summaries[key]
        records = read_run_records(kafka, key).records
    assert summary.records == len(logged.log.samples or []) == len(ALL_PAIRS)
    assert summary.accuracy == metrics(logged.log)["accuracy"]
    assert pairs(records) == ALL_PAIRS
    assert {r.harness.name for r in records if r.harness} == {"inspect_ai"}

    after = watermarks(settings)
    [again] = _import(cli_env, str(next(logged.log_dir.glob("*.eval"))))
    assert (again["written"], again["held"]) == (0, len(ALL_PAIRS))
    assert watermarks(settings) == after  # importing twice writes nothing

    [other] = _import(cli_env, str(logged.log_dir), "--run-id", "imp-2")
    assert (other["run_id"], other["written"]) == ("imp-2", len(ALL_PAIRS))


async def test_a_pair_whose_durable_record_differs_refuses_the_import(
    settings: Settings, cli_env: dict[str, str], logged: Logged, kafka_store: KafkaResultStore
) -> None:
    [imported] = _import(cli_env, str(logged.log_dir), "--run-id", "first")
    with KafkaConnection(settings) as kafka:
        record = read_run_records(kafka, run_key("first")).records[0]
    right = record.score.value == ScoreValue.C
    flipped = {"value": ScoreValue.I if right else ScoreValue.C, "numeric": 0.0 if right else 1.0}
    other = record.model_copy(
        update={"run_id": "imp", "score": record.score.model_copy(update=flipped)}
    )
    await kafka_store.write(other)
    before = watermarks(settings)

    done = run_cli(cli_env, "inspect", "import", str(logged.log_dir))

    assert done.returncode == 1
    said = one_line_error(done)
    assert f"sample {record.sample_id} epoch {record.epoch} of {run_key('imp')}" in said
    assert "another score" in said and "nothing written" in said
    assert watermarks(settings) == before
    assert imported["written"] == len(ALL_PAIRS)
