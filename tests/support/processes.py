"""`resultlog` commands and offline model servers as real processes, for reliability tests."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.cli import cli_argv
from tests.support.waiting import wait_for

T = TypeVar("T")


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """A `resultlog` command running in the background, its output captured."""
    # An ignored SIGINT is inherited across exec (a shell's background job runs so): the
    # child must take SIGINT as from a terminal, so the tests do not pass it down ignored.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return subprocess.Popen(
        cli_argv(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@contextmanager
def model_server(directory: Path, env: dict[str, str], *options: str) -> Iterator[tuple[str, Path]]:
    """The offline model server as its own process; its base URL and request log."""
    directory.mkdir(parents=True, exist_ok=True)
    port_file, log = directory / "port", directory / "requests.jsonl"
    command = ["model-server", "--port-file", str(port_file), "--request-log", str(log)]
    server = subprocess.Popen(cli_argv(*command, *options), env=env, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: port_file.exists() or server.poll() is not None, "the model server")
        assert server.poll() is None, "the model server did not start"
        yield f"http://127.0.0.1:{int(port_file.read_text())}/v1", log
    finally:
        server.terminate()
        server.wait(10)


def requests_in(log: Path) -> list[tuple[str, int]]:
    """The (sample_id, epoch) of every request the model server received, in order."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [(line["sample_id"], line["epoch"]) for line in lines]


def durable(settings: Settings, run_key: RunKey) -> list[SampleResult]:
    """The run key's latest records."""
    return read_run_records(KafkaConnection(settings), run_key).records


def one_line_error(done: subprocess.CompletedProcess[str] | tuple[int, str], text: str) -> str:
    """Assert a one-line `resultlog: error:` containing `text`; return the line."""
    code, stderr = (done.returncode, done.stderr) if not isinstance(done, tuple) else done
    lines = stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1, stderr
    assert lines[0].startswith("resultlog: error:") and text in lines[0], lines[0]
    return lines[0]
