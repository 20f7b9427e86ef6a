"""Small things a careless user meets: file benchmarks by path, typos in settings, ranges."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from resultlog.settings import Settings, warn_unknown_variables
from tests.support.cli import child_env, run_cli
from tests.support.processes import one_line_error

MODEL = "offline/gpt-4o"


def test_status_and_purge_take_a_jsonl_benchmark_by_its_path(
    tmp_path: Path, settings: Settings
) -> None:
    env = child_env(settings)
    bench = tmp_path / "mine.jsonl"
    bench.write_text(json.dumps({"id": "a", "input": "What is 1 + 1?", "target": "2"}) + "\n")
    assert run_cli(env, "run", str(bench), "--model", MODEL, "--run-id", "path").returncode == 0
    key = ["--run-id", "path", "--benchmark", str(bench), "--model", MODEL]
    status = run_cli(env, "status", *key, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["completed"] == 1
    purged = run_cli(env, "purge", *key, "--yes", "--json")
    assert json.loads(purged.stdout)["deleted"] == 1


def test_status_of_a_key_without_records_is_one_line_not_zeros(settings: Settings) -> None:
    env = child_env(settings)
    ran = run_cli(env, "run", "arith", "--model", MODEL, "--run-id", "typo", "--limit", "2")
    assert ran.returncode == 0, ran.stderr
    mistyped = ["--run-id", "typo", "--benchmark", "arithh", "--model", MODEL]
    for extra in ([], ["--json"]):
        done = run_cli(env, "status", *mistyped, *extra)
        one_line_error(
            done, f"run typo / arithh / {MODEL} has no records in {settings.results_topic}"
        )
        assert done.returncode == 1 and done.stdout == "", done.stdout
    found = run_cli(env, "status", "--run-id", "typo", "--benchmark", "arith", "--model", MODEL)
    assert found.returncode == 0, found.stderr
    assert " records: 2 " in found.stdout, found.stdout


def test_a_misspelled_variable_is_warned_about(tmp_path: Path) -> None:
    env = {"RESULTLOG_BOOTSTRAP_SERVER": "x:1", "PATH": "/usr/bin:/bin"}
    done = run_cli(env, "kafka", "down", "--dir", str(tmp_path))
    assert done.returncode == 0
    assert (
        "resultlog: WARNING: ignoring RESULTLOG_BOOTSTRAP_SERVER: no setting has that name "
        "(did you mean RESULTLOG_BOOTSTRAP_SERVERS?)"
    ) in done.stderr
    assert warn_unknown_variables({"RESULTLOG_PARTITIONS": "3", "RESULTLOG_RUN_ID": "r"}) == []


def test_an_empty_bootstrap_setting_is_an_error_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    quick = run_cli({"PATH": "/usr/bin:/bin"}, "kafka", "down", "--dir", str(tmp_path))
    assert quick.returncode == 0
    baseline = time.monotonic() - started  # starting the command line, on this machine now
    started = time.monotonic()
    env = {"RESULTLOG_BOOTSTRAP_SERVERS": "", "PATH": "/usr/bin:/bin"}
    done = run_cli(env, "status", "--run-id", "r", "--benchmark", "b", "--model", "m")
    one_line_error(done, "RESULTLOG_BOOTSTRAP_SERVERS is empty")
    assert time.monotonic() - started < baseline + 5  # not the 15 s wait for a broker


def test_an_empty_api_key_does_not_hide_the_openrouter_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RESULTLOG_API_KEY", "")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-real")
    key = Settings().api_key
    assert key is not None and key.get_secret_value() == "sk-or-real"
    monkeypatch.delenv("OPENROUTER_API_KEY")
    assert Settings().api_key is None


def test_a_range_past_the_dataset_is_refused_not_clamped(settings: Settings) -> None:
    args = ["run", "arith", "--model", MODEL, "--run-id", "clamp", "--range", "990:2000", "--json"]
    done = run_cli(child_env(settings), *args)
    one_line_error(done, "range 990:2000 goes past the 1000 samples of arith (0:1000)")
