"""The runs the analysis tests read: made by `resultlog run` and by a real `inspect eval`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import inspect_env, inspect_eval
from tests.support.cli import child_env, run_cli
from tests.support.kafka import topic_settings

ARITH = ("--limit", "24", "--epochs", "2")
A = RunKey("demo", "arith", "demo/offline-a")
B = RunKey("demo", "arith", "demo/offline-b")
SHRUNK = RunKey("shrunk", "arith", "demo/offline-a")  # re-run with fewer epochs: out of shape
INSPECT = RunKey("insp", "arith", "openai-api/offline/arith")


@dataclass(frozen=True)
class Made:
    """The topics the runs were written to, and the runs."""

    settings: Settings
    env: dict[str, str]  # a `resultlog` child's environment on these topics
    runs: tuple[RunKey, ...]


def _run(env: dict[str, str], run_key: RunKey, *options: str) -> None:
    done = run_cli(
        env,
        "run",
        run_key.benchmark_id,
        "--model",
        run_key.model,
        "--run-id",
        run_key.run_id,
        *options,
    )
    assert done.returncode == 0, done.stderr


def make_runs(kafka_bootstrap: str, log_dir: Path) -> Made:
    """Run A (embedded offline model), run B (another seed, more wrong answers), a run
    re-run with fewer epochs, and an `inspect eval` of the example task."""
    settings = topic_settings(kafka_bootstrap)
    env = child_env(settings)
    _run(env, A, *ARITH)
    with ModelServer(latency_s=0.001, seed=7, wrong_rate=0.2) as server:
        _run({**env, "RESULTLOG_API_KEY": "offline"}, B, *ARITH, "--base-url", server.base_url)
    # The offline model degrades (arith-0019, 1) every time: the re-run writes it again in
    # the new shape, so the newest record leaves the third epoch out of the run.
    _run(env, SHRUNK, "--limit", "20", "--epochs", "3")
    _run(env, SHRUNK, "--limit", "20", "--epochs", "2")
    with ModelServer(latency_s=0.001) as server:
        done = inspect_eval(inspect_env(env, server), INSPECT.run_id, log_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    return Made(settings, env, (A, B, SHRUNK, INSPECT))
