"""Record identity under real `inspect eval` processes: a sample is keyed by its place in the
task's whole dataset, whatever selected it, and two tasks of one name never share a run key."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from resultlog.consumers import read_run_records, replay_run, run_keys_of
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    MODEL,
    SAMPLES,
    TIMEOUT_S,
    inspect_env,
    inspect_eval,
    latest,
    run_key,
)
from tests.support.aggregator import served, serving_aggregator
from tests.support.cli import printed_json, run_cli
from tests.support.summaries import bare
from tests.support.waiting import wait_for

# A task whose sums start at `start`: two tasks of one name, told apart by an argument.
LEVELS = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def {name}(start: int = {default}) -> Task:
    return Task(
        dataset=[
            Sample(id=f"s{{i}}", input=f"What is {{start + i}} + 1?", target=str(start + i + 1))
            for i in range(3)
        ],
        solver=generate(),
        scorer=match(numeric=True),
    )
"""


def test_selecting_other_samples_never_overwrites_the_records_of_those_not_selected(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with ModelServer(latency_s=0.002) as server:
        env = inspect_env(cli_env, server)
        first = inspect_eval(env, "picked", tmp_path, "--sample-id", "q3,q5", "--epochs", "1")
        second = inspect_eval(env, "picked", tmp_path, "--sample-id", "q7,q2,q8", "--epochs", "1")
        limited = inspect_eval(env, "picked", tmp_path, "--limit", "4-6", "--epochs", "1")
    for done in (first, second, limited):
        assert done.returncode == 0, done.stdout + done.stderr
    records = latest(settings, "picked")
    placed = {r.sample_id: r.sample_index for r in records}
    assert placed == {f"q{i}": i - 1 for i in (2, 3, 4, 5, 6, 7, 8)}
    assert {r.dataset_size for r in records} == {SAMPLES}


def test_a_finished_limited_selection_expects_only_its_own_pairs(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with ModelServer(latency_s=0.002) as server:
        env = inspect_env(cli_env, server)
        done = inspect_eval(env, "ranged", tmp_path, "--limit", "3-6", "--epochs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    key = run_key("ranged")
    assert {(r.dataset_size, r.selected_samples) for r in latest(settings, "ranged")} == {
        (SAMPLES, 4)
    }
    with KafkaConnection(settings) as kafka:
        replayed = replay_run(kafka, key).summaries[key]
    assert (replayed.records, replayed.expected_records, replayed.out_of_shape) == (8, 8, 0)
    names = ("--run-id", key.run_id, "--benchmark", key.benchmark_id, "--model", key.model)
    status = printed_json(run_cli(cli_env, "status", *names, "--json"))
    assert (status["records"], status["expected_records"], status["completed"]) == (8, 8, 8)
    with serving_aggregator(settings) as (_, url):
        wait_for(lambda: served(url, key) == bare(replayed), "the aggregator's summary")


def test_two_tasks_of_one_name_write_two_run_keys(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    for name, default in (("one", 1), ("two", 11)):  # same name, other files
        (tmp_path / f"{name}.py").write_text(LEVELS.format(name="same", default=default))
    (tmp_path / "levels.py").write_text(LEVELS.format(name="level", default=1))
    script = textwrap.dedent(
        f"""
        from inspect_ai import eval
        from levels import level
        [a, b] = eval([level(start=1), level(start=21)], model={MODEL!r},
                      metadata={{"resultlog_run": "levels"}}, log_dir="logs", display="none")
        assert a.status == b.status == "success"
        """
    )
    with ModelServer(latency_s=0.002) as server:
        env = inspect_env(cli_env, server)
        files = inspect_eval(
            env, "files", Path("logs"), tasks=["one.py@same", "two.py@same"], cwd=tmp_path
        )
        args = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        asked = len(server.requests)
    assert files.returncode == 0, files.stdout + files.stderr
    assert args.returncode == 0, args.stdout + args.stderr
    assert asked == 12
    with KafkaConnection(settings) as kafka:
        for run_id, name in (("files", "same"), ("levels", "level")):
            keys = run_keys_of(kafka, run_id)
            assert len(keys) == 2, keys
            assert all(key.benchmark_id.startswith(f"{name}-") for key in keys)
            inputs = [sorted(r.input for r in read_run_records(kafka, key).records) for key in keys]
            assert all(len(found) == 3 for found in inputs)
            assert inputs[0] != inputs[1]  # each key holds its own task's samples
