"""A command loads what it runs: `--version` no Kafka client or pydantic, `status` no web
stack, HTTP client, dataframes or Inspect (benchmarks/cli_startup.py times them)."""

from __future__ import annotations

import json
import subprocess
import sys

from resultlog.settings import Settings
from tests.support.cli import child_env
from tests.support.records import RUN_KEY, make_record
from tests.support.runindex import put

# Imported by a command that uses them, never by the command line itself.
HEAVY = (
    "authlib",
    "cryptography",
    "fastapi",
    "h11",
    "httpx",
    "inspect_ai",
    "matplotlib",
    "pandas",
    "prometheus_client",
    "pyarrow",
    "rich",
    "rocksdict",
    "starlette",
    "uvicorn",
    "resultlog.consumers.aggregator",
    "resultlog.broker._cluster",
    "resultlog.producer.runner",
    "resultlog.producer.model_client",
)
# What a command that talks to no broker and reads no record does not need either.
KAFKA_AND_RECORDS = (
    "confluent_kafka",
    "fastavro",
    "pydantic",
    "pydantic_settings",
    "resultlog.kafka",
    "resultlog.settings",
    "resultlog.consumers",
    "resultlog.schemas.models",
)

# Runs the command line, then prints the modules it loaded as the last line of stderr.
_PROBE = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
    "from resultlog.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _loaded(env: dict[str, str] | None, *argv: str) -> tuple[str, set[str]]:
    """The command's standard output, and every module it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, set(json.loads(done.stderr.splitlines()[-1]))


def _among(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in names))


def test_version_loads_neither_a_kafka_client_nor_a_record_model() -> None:
    out, loaded = _loaded(None, "--version")
    assert out.startswith("resultlog ") and "Apache Kafka" in out
    assert _among(loaded, HEAVY + KAFKA_AND_RECORDS) == []


def test_status_loads_no_web_stack_http_client_dataframes_or_inspect(settings: Settings) -> None:
    put(settings, [make_record(index, 0, run_key=RUN_KEY, epochs=1) for index in range(3)])
    key = RUN_KEY
    out, loaded = _loaded(
        child_env(settings),
        "status",
        *("--run-id", key.run_id, "--benchmark", key.benchmark_id, "--model", key.model),
        "--json",
    )
    assert json.loads(out)["records"] == 3
    assert "resultlog.consumers.resume" in loaded
    assert _among(loaded, HEAVY) == []
