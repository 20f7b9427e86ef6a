"""Arguments are checked before any call, and every error says what to do: the URL it could not
use, the key to set, the command that continues."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from resultlog.broker import free_port
from resultlog.cli import _lm_eval, _run, main
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.settings import Settings
from tests.support.cli import child_env, one_line_error, run_cli

MODEL = "demo/model"
RUN = ("run", "arith", "--model", MODEL, "--limit", "4", "--json")


def test_a_base_url_without_v1_is_refused_at_once(settings: Settings) -> None:
    started = time.monotonic()
    done = run_cli(child_env(settings), *RUN, "--run-id", "v1", "--base-url", "http://127.0.0.1:9/")
    elapsed = time.monotonic() - started
    line = one_line_error(done)
    assert "must end in /v1" in line and "http://127.0.0.1:9/v1" in line, line
    assert "--any-base-path" in line
    assert elapsed < 5.0, f"refused after {elapsed:.1f} s"


def test_any_base_path_takes_the_url_as_given_and_a_404_names_it(settings: Settings) -> None:
    with ModelServer(latency_s=0.0) as server:
        root = server.base_url.removesuffix("/v1")
        args = ("--run-id", "any-path", "--base-url", root, "--any-base-path")
        line = one_line_error(run_cli(child_env(settings), *RUN, *args))
    assert f"HTTP 404 for POST {root}/chat/completions" in line, line


def test_a_dead_endpoint_is_named(settings: Settings) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    env = child_env(settings, RESULTLOG_MODEL_MAX_RETRIES="1")
    line = one_line_error(run_cli(env, *RUN, "--run-id", "dead", "--base-url", url))
    assert f"POST {url}/chat/completions" in line and "ConnectError" in line, line


def test_a_401_names_the_key_to_set(settings: Settings) -> None:
    with ModelServer(latency_s=0.0) as server:
        for sample in limit_samples(arith(), 4).samples():
            server.override(sample.id, 0, Behavior(status=401))
        args = ("--run-id", "no-key", "--base-url", server.base_url)
        line = one_line_error(run_cli(child_env(settings), *RUN, *args))
    assert "HTTP 401" in line and "RESULTLOG_API_KEY" in line, line


def test_a_remote_endpoint_without_a_key_is_warned_of_before_the_run(settings: Settings) -> None:
    env = child_env(settings, RESULTLOG_MODEL_MAX_RETRIES="0")
    env.pop("RESULTLOG_API_KEY", None)
    env.pop("OPENROUTER_API_KEY", None)
    url = "http://models.invalid/v1"
    done = run_cli(env, *RUN, "--run-id", "keyless", "--base-url", url)
    first, *rest = done.stderr.strip().splitlines()
    assert first.startswith(f"resultlog: warning: no API key for {url}"), done.stderr
    assert "RESULTLOG_API_KEY" in first
    assert rest[-1].startswith("resultlog: error: model request failed: POST"), done.stderr
    # A loopback endpoint (the offline model, a local server) is not warned of.
    with ModelServer(latency_s=0.0) as server:
        args = ("--run-id", "local", "--base-url", server.base_url)
        assert "warning" not in run_cli(env, *RUN, *args).stderr


def test_a_malformed_bootstrap_address_is_refused(settings: Settings) -> None:
    env = child_env(settings, RESULTLOG_BOOTSTRAP_SERVERS="127.0.0.1:9092x")
    done = run_cli(env, "status", "--run-id", "x", "--benchmark", "arith", "--model", MODEL)
    line = one_line_error(done)
    assert "'127.0.0.1:9092x', not HOST:PORT" in line, line


def test_a_benchmark_file_without_targets_is_refused(settings: Settings, tmp_path: Path) -> None:
    bench = tmp_path / "untargeted.jsonl"
    rows = [{"id": "a", "input": "What is 1 + 1?", "target": "2"}, {"id": "b", "input": "Hi"}]
    bench.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = run_cli(child_env(settings), "run", str(bench), "--model", MODEL, "--run-id", "t")
    line = one_line_error(done)
    assert "1 of 2 samples have no target (first: 'b')" in line, line


def _spent_text(stdout: str) -> str:
    [found] = re.findall(r'"spent_cost":\s*([^,}]+)', stdout)
    return str(found)


def test_status_and_replay_print_a_sum_in_the_same_text(settings: Settings) -> None:
    env = child_env(settings)
    key = ("--run-id", "sums", "--benchmark", "arith", "--model", MODEL)
    ran = run_cli(env, "run", "arith", "--model", MODEL, "--run-id", "sums", "--limit", "37")
    assert ran.returncode == 0, ran.stderr
    status = run_cli(env, "status", *key, "--json")
    replay = run_cli(env, "replay", *key, "--json")
    assert status.returncode == 0 and replay.returncode == 0, status.stderr + replay.stderr
    spent = _spent_text(status.stdout)
    assert spent == _spent_text(replay.stdout)
    assert json.loads(spent) == json.loads(replay.stdout)["spent_cost"]  # the exact sum's bits
    text = run_cli(env, "status", *key).stdout
    [shown] = re.findall(r"spent_cost: (\S+)", text)
    assert shown == _usd(float(spent)) and len(shown) <= 17, shown  # no binary residue
    [row] = re.findall(r"spent, every attempt \(USD, simulated\)\s*│\s*(\S+)", ran.stdout)
    assert row == shown


def _usd(value: float) -> str:
    from resultlog.cli._figures import usd

    return usd(value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0066679999999999994, "0.006668"),
        (0.00014199999999999998, "0.000142"),
        (0.30000000000000004, "0.3"),
        (1.2e-05, "0.000012"),
        (0.0, "0"),
        (12.5, "12.5"),
    ],
)
def test_a_sum_of_money_is_shown_to_fifteen_digits(value: float, shown: str) -> None:
    assert _usd(value) == shown


def test_export_prints_its_one_line_and_no_blank_one(settings: Settings, tmp_path: Path) -> None:
    env = child_env(settings)
    ran = run_cli(env, "run", "arith", "--model", MODEL, "--run-id", "exported", "--limit", "3")
    assert ran.returncode == 0, ran.stderr
    out = tmp_path / "x.csv"
    key = ("--run-id", "exported", "--benchmark", "arith", "--model", MODEL)
    done = run_cli(env, "export", *key, "--format", "csv", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"wrote 3 rows (the samples of 1 run key) to {out}\n"


@pytest.mark.parametrize(
    ("module", "handler", "argv", "hint"),
    [
        (_run, "run_command", [*RUN, "--run-id", "x"], "run the same command to resume"),
        (
            _lm_eval,
            "lm_eval_command",
            ["lm-eval", "--run-id", "x", "--", "--tasks", "t"],
            "run the same `resultlog lm-eval` command to continue",
        ),
    ],
)
def test_a_ctrl_c_before_the_work_starts_says_how_to_continue(
    module: object,
    handler: str,
    argv: list[str],
    hint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted(_args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(module, handler, interrupted)
    assert main(argv) == 130
    line = capsys.readouterr().err.strip()
    assert line.startswith("resultlog: error: interrupted; ") and hint in line, line


def test_make_install_says_what_it_does_while_pip_is_quiet() -> None:
    repo = Path(__file__).resolve().parents[2]
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", ".venv/bin/resultlog"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    said = [i for i, line in enumerate(dry) if line.startswith('echo "resultlog: [')]
    [pip] = [i for i, line in enumerate(dry) if "pip install -q -e" in line]
    assert len(said) == 3 and said[0] < pip and said[1] < pip < said[2], dry
    assert "minutes" in dry[said[1]]
