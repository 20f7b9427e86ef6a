"""Reusing a run id (design rule 10): `run`, `status` and `submit` as processes, a real broker
and the offline model as its own process, whose request log says what reached the model."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.cli import printed_json, run_cli
from tests.support.kafka import message_count
from tests.support.ledger import rewrite_as_v1
from tests.support.processes import durable, model_server, one_line_error, requests_in

MODEL = "offline/config"


@pytest.fixture
def model(tmp_path: Path, cli_env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """The offline model server's base URL and request log."""
    with model_server(tmp_path / "model", cli_env) as served:
        yield served


def run(
    env: dict[str, str], run_id: str, base_url: str, *options: str, bench: str = "arith"
) -> subprocess.CompletedProcess[str]:
    """`resultlog run ... --epochs 2 --json` against the model at `base_url`."""
    args = ["run", bench, "--model", MODEL, "--run-id", run_id, "--epochs", "2"]
    return run_cli(env, *args, "--base-url", base_url, "--json", *options)


def test_a_rerun_under_another_configuration_is_refused_before_any_model_call(
    settings: Settings, cli_env: dict[str, str], model: tuple[str, Path], unique_name: str
) -> None:
    base_url, log = model
    run_key = RunKey(unique_name, "arith", MODEL)
    first = run(cli_env, unique_name, base_url, "--limit", "12", "--temperature", "0.2")
    assert first.returncode == 0, first.stderr
    before = {(r.sample_index, r.epoch): r for r in durable(settings, run_key)}
    asked = len(requests_in(log))

    changed = run(
        cli_env,
        unique_name,
        base_url,
        "--limit",
        "12",
        "--temperature",
        "0.7",
        "--max-tokens",
        "64",
    )
    line = one_line_error(changed, "made under another configuration")
    assert f"{run_key}: 24 durable record(s)" in line
    assert "generation.max_tokens: null there, 64 here" in line
    assert "generation.temperature: 0.2 there, 0.7 here" in line
    assert "use a new run id, or `resultlog run --accept-config-change`" in line
    assert len(requests_in(log)) == asked  # no request reached the model server
    assert {(r.sample_index, r.epoch): r for r in durable(settings, run_key)} == before

    # The shape is not the configuration: fewer samples reuse the records (and ask again only
    # for the degraded ones).
    smaller = run(cli_env, unique_name, base_url, "--limit", "6", "--temperature", "0.2")
    assert smaller.returncode == 0, smaller.stderr
    retried = {(r.sample_id, r.epoch) for r in before.values() if r.degraded and r.sample_index < 6}
    assert set(requests_in(log)[asked:]) == retried

    status = printed_json(run_cli(cli_env, "status", *_key_args(run_key), "--json"))
    fingerprints = {record.config_fingerprint for record in before.values()}
    assert status["config_fingerprint"] in fingerprints and len(fingerprints) == 1
    assert status["config"]["generation"] == {"temperature": 0.2, "max_tokens": None}
    assert status["config"]["base_url"] == base_url and status["config"]["model"] == MODEL
    assert status["config"]["benchmark"] == {"name": "arith", "version": None}
    assert (status["configs"], status["unconfigured"]) == (1, 0)
    text = run_cli(cli_env, "status", *_key_args(run_key)).stdout
    assert "config.generation.temperature: 0.2" in text


def test_accepting_the_change_reuses_the_records_as_they_are(
    settings: Settings, cli_env: dict[str, str], model: tuple[str, Path], unique_name: str
) -> None:
    base_url, log = model
    run_key = RunKey(unique_name, "arith", MODEL)
    assert run(cli_env, unique_name, base_url, "--limit", "12").returncode == 0
    old = {(r.sample_id, r.epoch): r for r in durable(settings, run_key)}
    degraded = {pair for pair, record in old.items() if record.degraded}
    asked = len(requests_in(log))

    accepted = run(
        cli_env,
        unique_name,
        base_url,
        "--limit",
        "12",
        "--temperature",
        "1",
        "--accept-config-change",
    )
    assert accepted.returncode == 0, accepted.stderr
    assert "reusing 24 durable record(s) of another configuration" in accepted.stderr
    assert set(requests_in(log)[asked:]) == degraded  # only what was degraded is asked again
    new = {(r.sample_id, r.epoch): r for r in durable(settings, run_key)}
    for pair, record in new.items():
        temperature = json.loads(record.config or "{}")["generation"]["temperature"]
        assert temperature == (1.0 if pair in degraded else None)
    status = printed_json(run_cli(cli_env, "status", *_key_args(run_key), "--json"))
    assert status["configs"] == (2 if degraded else 1)


def test_a_changed_dataset_is_refused_and_so_is_a_submit_of_another_configuration(
    settings: Settings, cli_env: dict[str, str], model: tuple[str, Path], tmp_path: Path
) -> None:
    base_url, log = model
    bench = tmp_path / "sums.jsonl"
    lines = [
        {"id": f"s{i}", "input": f"What is {i} + {i}?", "target": str(2 * i)} for i in range(6)
    ]
    bench.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run(cli_env, "ds", base_url, bench=str(bench)).returncode == 0
    asked = len(requests_in(log))

    lines[3]["target"] = "7"
    bench.write_text("".join(json.dumps(line) + "\n" for line in lines))
    line = one_line_error(run(cli_env, "ds", base_url, bench=str(bench)), "dataset_sha256")
    assert "another configuration" in line

    args = ["submit", str(bench), "--model", MODEL, "--run-id", "ds", "--chunks", "2"]
    submitted = run_cli(cli_env, *args, "--base-url", base_url, "--temperature", "0.5")
    line = one_line_error(submitted, "generation.temperature: null there, 0.5 here")
    assert "dataset_sha256" in line
    assert message_count(settings, settings.work_topic) == 0  # no task was written
    assert len(requests_in(log)) == asked


def test_records_without_a_configuration_are_reused_with_one_warning(
    settings: Settings, cli_env: dict[str, str], model: tuple[str, Path], unique_name: str
) -> None:
    base_url, log = model
    run_key = RunKey(unique_name, "arith", MODEL)
    assert run(cli_env, unique_name, base_url, "--limit", "8").returncode == 0
    records = durable(settings, run_key)
    rewrite_as_v1(settings, records)  # as a v1 writer left them: no configuration, no ledger
    assert all(r.config is None and r.attempts is None for r in durable(settings, run_key))
    degraded = {(r.sample_id, r.epoch) for r in records if r.degraded}
    asked = len(requests_in(log))

    again = run(cli_env, unique_name, base_url, "--limit", "8")
    assert again.returncode == 0, again.stderr
    warnings = [line for line in again.stderr.splitlines() if "carry no configuration" in line]
    assert len(warnings) == 1, again.stderr
    assert f"{len(records)} durable record(s) carry no configuration (schema v1)" in warnings[0]
    assert set(requests_in(log)[asked:]) == degraded
    status = printed_json(run_cli(cli_env, "status", *_key_args(run_key), "--json"))
    assert status["unconfigured"] == len(records) - len(degraded)


def _key_args(run_key: RunKey) -> list[str]:
    return [
        "--run-id",
        run_key.run_id,
        "--benchmark",
        run_key.benchmark_id,
        "--model",
        run_key.model,
    ]
