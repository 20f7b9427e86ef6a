"""Every command turns OS errors, bad ports, broken pipes and early interrupts into one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resultlog.broker import LocalKafka
from resultlog.errors import BrokerError
from resultlog.settings import Settings
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.processes import one_line_error

MODEL = "offline/gpt-4o"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}


def test_an_empty_cluster_json_is_one_line_and_state_is_written_atomically(
    tmp_path: Path,
) -> None:
    (tmp_path / "cluster.json").write_text("")  # what a full disk left before
    for action in ("up", "down"):
        done = run_cli(_env(), "kafka", action, "--dir", str(tmp_path))
        one_line_error(done, f"{tmp_path / 'cluster.json'} is not a cluster state")
    with pytest.raises(BrokerError, match="cannot write"):
        from resultlog.broker._state import write_private

        write_private(tmp_path / "missing-dir" / "cluster.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"], "a temporary file was left"


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["kafka", "up", "--port", "70000"], "port must be between 0 and 65535"),
        (["kafka", "up", "--port", "-1"], "port must be between 0 and 65535"),
        (["model-server", "--port", "70000"], "port must be between 0 and 65535"),
        (["model-server", "--latency-ms", "-5"], "latency must be between"),
        (["model-server", "--error-rate", "5"], "error rate must be between 0.0 and 1.0"),
    ],
)
def test_bad_numbers_are_refused_in_one_line(args: list[str], text: str) -> None:
    one_line_error(run_cli(_env(), *args), text)


def test_os_errors_are_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    one_line_error(run_cli(_env(), "kafka", "up", "--dir", str(a_file)), "resultlog: error:")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        one_line_error(run_cli(_env(), "model-server", "--port", port), "in use")
    unwritable = tmp_path / "no-such-dir" / "x"
    for option in ("--port-file", "--request-log"):
        done = run_cli(_env(), "model-server", option, str(unwritable))
        one_line_error(done, "No such file or directory")


@pytest.mark.parametrize(
    ("line", "text"),
    [
        ('{"id": "a\\ud800", "input": "What is 1 + 1?"}', "lone surrogate"),
        ('{"id": "a", "input": "x\\udfff"}', "lone surrogate"),
        ('{"id": "a", "input": "q", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
         "nested too deeply"),
        ('{"id": "a", "input": "q", "metadata": {"x": NaN}}', "NaN is not a JSON number"),
        ('{"id": "a", "input": "q", "metadata": {"x": -Infinity}}', "-Infinity is not"),
    ],
)  # fmt: skip
def test_jsonl_that_no_record_can_hold_is_one_line(
    tmp_path: Path, settings: Settings, line: str, text: str
) -> None:
    bench = tmp_path / "odd.jsonl"
    bench.write_text(line + "\n")
    done = run_cli(child_env(settings), "run", str(bench), "--model", MODEL, "--run-id", "o")
    one_line_error(done, f"{bench}:1: ")
    one_line_error(done, text)


def test_a_bom_at_the_start_of_a_jsonl_file_is_accepted(tmp_path: Path, settings: Settings) -> None:
    bench = tmp_path / "bom.jsonl"
    row = {"id": "a", "input": "What is 1 + 1?", "target": "2"}
    bench.write_bytes(b"\xef\xbb\xbf" + json.dumps(row).encode())
    args = ["run", str(bench), "--model", MODEL, "--run-id", "bom", "--json"]
    done = run_cli(child_env(settings), *args)
    assert done.returncode == 0, done.stderr


def test_a_closed_pipe_ends_the_command_quietly(settings: Settings) -> None:
    env = child_env(settings)
    for run_id in ("p1", "p2", "p3"):
        ran = run_cli(env, "run", "arith", "--model", MODEL, "--run-id", run_id, "--limit", "2")
        assert ran.returncode == 0, ran.stderr
    status = ["status", "--run-id", "p1", "--benchmark", "arith", "--model", MODEL, "--json"]
    for args in (["replay", "--all"], status):
        # `| head` that has gone already: the reading end is closed before anything is written.
        reader, writer = os.pipe()
        os.close(reader)
        done = subprocess.run(
            cli_argv(*args), env=env, stdout=writer, stderr=subprocess.PIPE, text=True, timeout=120
        )
        os.close(writer)
        # Quiet: no message, no traceback (the progress bar's console ends with 1 on its own).
        assert done.stderr == "", done.stderr
        assert done.returncode in (1, 128 + signal.SIGPIPE), args


def test_an_interrupt_while_starting_is_one_line() -> None:
    # Within the first 0.7 s the command line is still loading its modules. (A signal before
    # the interpreter has started, while Python imports `site`, is Python's own to report.)
    for delay in (0.4, 0.7):
        process = subprocess.Popen(
            cli_argv("status", "--run-id", "r", "--benchmark", "b", "--model", "m"),
            env={**_env(), "RESULTLOG_BOOTSTRAP_SERVERS": "127.0.0.1:9"},
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        lines = err.strip().splitlines()
        assert len(lines) <= 1 and "Traceback" not in err, (delay, err)


_INTERRUPTED_IN_CALLBACKS = """
import faulthandler, logging, os, signal, sys, threading
faulthandler.dump_traceback_later(90, exit=True)  # a hang shows where, before the test's timeout
from confluent_kafka import Consumer
from resultlog.cli._interrupt import raise_interrupts_whole

raise_interrupts_whole()
logger = logging.getLogger("librdkafka-probe")
logger.addHandler(logging.NullHandler())
logger.setLevel(logging.DEBUG)
for attempt in range(40):
    # Every poll serves log lines (a refused connection, debug output) to the Python logger.
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "g", "logger": logger,
                         "debug": "broker,protocol", "reconnect.backoff.ms": 1})
    timer = threading.Timer(0.05 + attempt % 7 * 0.013, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        while True:
            consumer.poll(0.01)
    except KeyboardInterrupt:
        pass
    timer.join()
    consumer.close()
"""


def test_an_interrupt_inside_a_kafka_client_callback_is_a_keyboard_interrupt() -> None:
    # Python's default handler raised a bare KeyboardInterrupt; inside the client's logger
    # callback that became "SystemError: ... returned NULL without setting an exception" in
    # about one interrupt of ten.
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IN_CALLBACKS, f"127.0.0.1:{free_port()}"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "SystemError" not in done.stderr, done.stderr


@pytest.mark.slow  # starts a broker of its own
def test_a_running_cluster_asked_for_another_port_says_so(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path)
    with pytest.raises(BrokerError, match="already runs on port"):
        kafka.up(port=free_port())
        kafka.up(port=free_port())
    kafka.down()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
