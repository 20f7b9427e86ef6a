"""`resultlog run`, `status` and `replay` as processes: crash, resume, agree."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.cli import cli_argv, printed_json

MODEL = "offline/gpt-4o"
EPOCHS = 2
LIMIT = 60


def run_args(run_id: str, base_url: str | None = None) -> list[str]:
    args = ["run", "arith", "--model", MODEL, "--run-id", run_id, "--epochs", str(EPOCHS)]
    args += ["--limit", str(LIMIT), "--concurrency", "4", "--json"]
    return cli_argv(*args, *(["--base-url", base_url] if base_url else []))


def durable(settings: Settings, run_id: str) -> list[SampleResult]:
    return read_run_records(KafkaConnection(settings), RunKey(run_id, "arith", MODEL)).records


def comparable(summary: dict[str, object]) -> dict[str, object]:
    """A summary without its run id, freshness and wall-clock time (differs between runs)."""
    return {k: v for k, v in summary.items() if k not in ("run_id", "as_of", "generation_time_ms")}


@pytest.fixture
def model_server_process(tmp_path: Path, cli_env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """The offline model server as its own process, logging every request to a file."""
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    command = cli_argv("model-server", "--port-file", str(port_file))
    # Slow enough that the worker is still running when the test kills it.
    command += ["--request-log", str(log), "--latency-ms", "50"]
    server = subprocess.Popen(command, env=cli_env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not port_file.exists():
        assert server.poll() is None and time.monotonic() < deadline, "model server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{int(port_file.read_text())}/v1", log
    server.terminate()
    server.wait(10)


def requests_in(log: Path) -> list[tuple[str, int]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [(line["sample_id"], line["epoch"]) for line in lines]


@pytest.mark.slow  # SIGKILL of a worker and its resume
def test_sigkilled_worker_resumes_without_paying_twice(
    settings: Settings,
    cli_env: dict[str, str],
    model_server_process: tuple[str, Path],
) -> None:
    base_url, log = model_server_process
    worker = subprocess.Popen(
        run_args("crash", base_url), env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while len(durable(settings, "crash")) < 30:
        assert worker.poll() is None, "the worker finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.1)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)

    durable_before = {(r.sample_id, r.epoch) for r in durable(settings, "crash") if not r.degraded}
    requests_before = len(requests_in(log))
    assert 30 <= len(durable_before) < LIMIT * EPOCHS

    resumed = subprocess.run(
        run_args("crash", base_url), env=cli_env, capture_output=True, text=True, timeout=120
    )
    asked_again = set(requests_in(log)[requests_before:])
    fresh = subprocess.run(
        run_args("fresh", base_url), env=cli_env, capture_output=True, text=True, timeout=120
    )

    records = durable(settings, "crash")
    assert Counter((r.sample_index, r.epoch) for r in records) == {
        (i, e): 1 for i in range(LIMIT) for e in range(EPOCHS)
    }
    assert not durable_before & asked_again, "a durable pair was requested from the model again"
    assert comparable(printed_json(resumed)) == comparable(printed_json(fresh))

    status = subprocess.run(
        cli_argv(
            *["status", "--run-id", "crash", "--benchmark", "arith", "--json", "--model"], MODEL
        ),
        env=cli_env,
        capture_output=True,
        text=True,
    )
    view = json.loads(status.stdout)
    degraded = sum(r.degraded for r in records)
    assert view["completed"] == view["skip_list"] == LIMIT * EPOCHS - degraded
    assert view["degraded"] == degraded

    replayed = subprocess.run(
        cli_argv(
            *["replay", "--run-id", "crash", "--benchmark", "arith", "--json", "--model"], MODEL
        ),
        env=cli_env,
        capture_output=True,
        text=True,
    )
    worker_summary = printed_json(resumed)
    replay_summary = printed_json(replayed)
    assert {k: v for k, v in replay_summary.items() if k != "as_of"} == {
        k: v for k, v in worker_summary.items() if k != "as_of"
    }


def test_run_is_deterministic_and_resumes_with_the_embedded_server(
    cli_env: dict[str, str],
) -> None:
    first = subprocess.run(run_args("embedded"), env=cli_env, capture_output=True, text=True)
    again = subprocess.run(run_args("embedded"), env=cli_env, capture_output=True, text=True)
    other = subprocess.run(run_args("embedded-2"), env=cli_env, capture_output=True, text=True)
    summary = printed_json(first)
    assert summary["records"] == summary["expected_records"] == LIMIT * EPOCHS
    assert 0 < summary["degraded_records"] < 10
    assert {k: v for k, v in printed_json(again).items() if k != "as_of"} == {
        k: v for k, v in summary.items() if k != "as_of"
    }
    assert comparable(printed_json(other)) == comparable(summary)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "arith", "--model", "m", "--run-id", "r", "--epochs", "0"], "epochs must be"),
        (["run", "arith", "--model", "m", "--run-id", "r", "--range", "5:2"], "0 <= A < B"),
        (["run", "arith", "--model", "m", "--run-id", "a\x01b"], "control character"),
        (["run", "nope", "--model", "m", "--run-id", "r"], "unknown benchmark 'nope'"),
        (["replay", "--run-id", "r"], "replay needs --benchmark, --model"),
    ],
)
def test_bad_arguments_give_one_line_errors(
    args: list[str], message: str, cli_env: dict[str, str]
) -> None:
    done = subprocess.run(cli_argv(*args), env=cli_env, capture_output=True, text=True)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("resultlog: error:"), done.stderr
    assert message in lines[0]


def test_bad_jsonl_line_is_named_and_nothing_is_written(
    tmp_path: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    bench = tmp_path / "qa.jsonl"
    bench.write_text('{"id": "a", "input": "What is 1 + 1?", "target": "2"}\n{"id": "b", oops\n')
    done = subprocess.run(
        cli_argv("run", str(bench), "--model", "m", "--run-id", "bad"),
        env=cli_env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "qa.jsonl:2: invalid JSON" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    records = read_run_records(KafkaConnection(settings), RunKey("bad", "qa", "m")).records
    assert records == []


def test_unreachable_broker_is_a_clear_error(cli_env: dict[str, str]) -> None:
    env = {**cli_env, "RESULTLOG_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    done = subprocess.run(
        cli_argv("run", "arith", "--model", "m", "--run-id", "r", "--limit", "1"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach Kafka at 127.0.0.1:1" in lines[0], done.stderr
    assert lines[0].endswith("start a local stack with `resultlog up`"), done.stderr


def test_a_jsonl_file_whose_name_cannot_be_a_run_key_part_is_refused(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    bench = tmp_path / "bad\x07name.jsonl"
    bench.write_text('{"id": "a", "input": "What is 1 + 1?", "target": "2"}\n')
    done = subprocess.run(
        cli_argv("run", str(bench), "--model", "m", "--run-id", "r"),
        env=cli_env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "benchmark name contains a control character" in lines[0]
