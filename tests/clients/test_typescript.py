"""The TypeScript writer against Python, on a real broker: one log, either writer, any order."""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from resultlog.consumers import read_run_records, resume_state
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.cli import printed_json, run_cli
from tests.support.kafka import raw_run_records

MODEL = "demo/model"
EPOCHS = 2


def node_process(
    client: Path, env: dict[str, str], script: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run one of the client's built examples to its end."""
    return subprocess.run(
        ["node", str(client / "dist" / "examples" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def node(client: Path, env: dict[str, str], script: str, *args: str) -> str:
    """Run one of the client's built examples, which must succeed; its stdout."""
    done = node_process(client, env, script, *args)
    assert done.returncode == 0, f"{script} exited {done.returncode}: {done.stderr}"
    return done.stdout


def resume_args(run_key: RunKey, *args: str) -> list[str]:
    """resume-run.js's arguments for the run key (EPOCHS unless `args` say otherwise)."""
    parts = ["--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id]
    return [*parts, "--model", run_key.model, "--epochs", str(EPOCHS), *args]


def resume_ts(client: Path, env: dict[str, str], run_key: RunKey, *args: str) -> dict[str, Any]:
    """The TypeScript harness's resume of the run key; what it printed."""
    printed = node(client, env, "resume-run.js", *resume_args(run_key, *args))
    found = json.loads(printed.strip().splitlines()[-1])
    assert isinstance(found, dict)
    return found


def run_py(env: dict[str, str], run_id: str, limit: int) -> dict[str, Any]:
    """`resultlog run arith` on the offline model, resuming whatever the run key holds."""
    args = ["run", "arith", "--model", MODEL, "--run-id", run_id, "--epochs", str(EPOCHS)]
    return printed_json(run_cli(env, *args, "--limit", str(limit), "--json"))


def records_of(settings: Settings, run_key: RunKey) -> list[SampleResult]:
    return read_run_records(KafkaConnection(settings), run_key).records


def writes_per_key(settings: Settings, run_key: RunKey) -> Counter[bytes | None]:
    """How many values each key of the run key was ever given."""
    return Counter(record.key for record in raw_run_records(settings, run_key))


def test_a_run_written_from_typescript_replays_in_python(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    node(ts_client, cli_env, "write-run.js", "--run-id", "ts-1", "--records", "30")
    replayed = printed_json(
        run_cli(
            cli_env,
            "replay",
            "--run-id",
            "ts-1",
            "--benchmark",
            "ts-demo",
            "--model",
            "ts/demo",
            "--json",
        )
    )
    records = records_of(settings, RunKey("ts-1", "ts-demo", "ts/demo"))
    assert sorted(r.sample_index for r in records) == list(range(30))
    correct = sum(1 for i in range(30) if i % 3 != 0)  # what write-run.ts scores C
    assert (replayed["records"], replayed["correct_answers"]) == (30, correct)
    assert replayed["accuracy"] == correct / 30
    assert replayed["usage"]["total_tokens"] == 30 * 12
    assert replayed["spent_cost"] == math.fsum(r.spent for r in records)  # the fold sums exactly


@pytest.mark.slow  # node children; one interop test stays in make test
def test_a_run_written_by_python_loads_in_typescript_with_the_same_skip_list(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    run_py(cli_env, "py-1", 6)
    run_key = RunKey("py-1", "arith", MODEL)
    state = resume_state(KafkaConnection(settings), run_key, EPOCHS)
    loaded = resume_ts(ts_client, cli_env, run_key, "--samples", "6", "--load-only")
    python = sorted(f"{index}/{epoch}" for index, epoch in state.skip_list)
    assert loaded["skip_list"] == python and len(python) == 6 * EPOCHS
    assert loaded["correct"] == sum(1 for r in state.seeds if r.score.value == "C")
    assert loaded["evaluated"] == [] and loaded["undecodable"] == 0


@pytest.mark.slow  # node children; one interop test stays in make test
def test_typescript_ignores_other_epochs_and_refuses_another_configuration(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    run_py(cli_env, "py-shape", 3)
    run_key = RunKey("py-shape", "arith", MODEL)
    # Fewer epochs than the log holds: the later epochs' records are out of range.
    one = resume_ts(ts_client, cli_env, run_key, "--samples", "3", "--load-only", "--epochs", "1")
    assert one["skip_list"] == ["0/0", "1/0", "2/0"] and one["out_of_range"] == 3
    fingerprint = records_of(settings, run_key)[0].config_fingerprint
    refused = node_process(
        ts_client,
        cli_env,
        "resume-run.js",
        *resume_args(run_key, "--samples", "3", "--config", "{}", "--config-fingerprint", "other"),
    )
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "6 durable record(s) were made under another configuration" in lines[0]
    assert f"config_fingerprint {fingerprint}" in lines[0]
    assert len(raw_run_records(settings, run_key)) == 3 * EPOCHS  # nothing written


@pytest.mark.slow  # node children; one interop test stays in make test
def test_a_python_half_run_resumes_in_typescript_asking_no_pair_twice(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    run_py(cli_env, "half-py", 4)
    run_key = RunKey("half-py", "arith", MODEL)
    first = records_of(settings, run_key)
    config = first[0]
    done = resume_ts(
        ts_client,
        cli_env,
        run_key,
        "--samples",
        "8",
        "--config",
        config.config or "",
        "--config-fingerprint",
        config.config_fingerprint or "",
    )
    python_pairs = {f"{r.sample_index}/{r.epoch}" for r in first}
    assert set(done["skip_list"]) == python_pairs and len(python_pairs) == 4 * EPOCHS
    assert set(done["evaluated"]) == {f"{i}/{e}" for i in range(4, 8) for e in range(EPOCHS)}
    writes = writes_per_key(settings, run_key)
    assert len(writes) == 8 * EPOCHS and set(writes.values()) == {1}
    status = printed_json(
        run_cli(
            cli_env,
            "status",
            "--run-id",
            "half-py",
            "--benchmark",
            "arith",
            "--model",
            MODEL,
            "--json",
        )
    )
    assert (status["records"], status["skip_list"], status["configs"]) == (16, 16, 1)


@pytest.mark.slow  # node children; one interop test stays in make test
def test_a_typescript_half_run_resumes_in_python_asking_no_pair_twice(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    # The configuration Python's run carries (it names no run id): learnt from a probe run.
    run_py(cli_env, "probe", 1)
    probe = records_of(settings, RunKey("probe", "arith", MODEL))[0]
    run_key = RunKey("half-ts", "arith", MODEL)
    config = [
        "--config",
        probe.config or "",
        "--config-fingerprint",
        probe.config_fingerprint or "",
    ]
    size = ["--dataset-size", "8"]  # the shape of the whole run, as Python's --limit 8 says
    written = resume_ts(ts_client, cli_env, run_key, "--samples", "4", *size, *config)
    assert len(written["evaluated"]) == 4 * EPOCHS
    summary = run_py(cli_env, "half-ts", 8)
    writes = writes_per_key(settings, run_key)
    assert len(writes) == 8 * EPOCHS and set(writes.values()) == {1}
    by_writer = Counter(
        r.harness.name if r.harness else "python" for r in records_of(settings, run_key)
    )
    assert by_writer == {"resultlog-ts-example": 4 * EPOCHS, "python": 4 * EPOCHS}
    assert summary["records"] == 8 * EPOCHS


@pytest.mark.slow  # node children; one interop test stays in make test
def test_degraded_outcomes_written_from_typescript_are_retried_not_skipped(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    run_key = RunKey("ts-degraded", "bench", MODEL)
    first = resume_ts(ts_client, cli_env, run_key, "--samples", "3", "--degrade-every", "2")
    failed = {f"{i}/{e}" for i in range(3) for e in range(EPOCHS) if (i * EPOCHS + e) % 2 == 0}
    assert first["degraded_written"] == len(failed)
    again = resume_ts(ts_client, cli_env, run_key, "--samples", "3")
    assert set(again["evaluated"]) == failed and set(again["degraded_loaded"]) == failed
    state = resume_state(KafkaConnection(settings), run_key, EPOCHS)
    assert len(state.skip_list) == 3 * EPOCHS and not state.degraded
