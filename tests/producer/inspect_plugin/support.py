"""Helpers of the Inspect AI plugin's tests: real `inspect eval` processes and topic reads."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.solver import Generate, Solver, TaskState, solver

from resultlog.consumers import ConsumerError, read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer.inspect._xbench import current
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.kafka import raw_run_records, topic_settings

REPO = Path(__file__).resolve().parents[3]
TASK = "examples/inspect_arith.py"  # Inspect wants a task path relative to its cwd
TASK_NAME = "arith"
MODEL = "openai-api/offline/arith"
SAMPLES, EPOCHS = 8, 2
ALL_PAIRS = {(f"q{i}", epoch) for i in range(1, SAMPLES + 1) for epoch in range(EPOCHS)}
INSPECT = str(Path(sys.executable).with_name("inspect"))
TIMEOUT_S = 240

SEEN: list[tuple[str, int] | None] = []  # what the x_bench adapter saw inside each sample


@solver
def remember_active_sample() -> Solver:
    """Record what the x_bench adapter says is running, then go on."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        SEEN.append(current())
        return state

    return solve


def mock_answer(_input: Any, _tools: Any, _choice: Any, _config: GenerateConfig) -> ModelOutput:
    """mockllm's answer to every request."""
    output = ModelOutput.from_content(model="mockllm", content="The answer is 7")
    # With usage given, mockllm does not count tokens with tiktoken (a download).
    output.usage = ModelUsage(input_tokens=3, output_tokens=2, total_tokens=5)
    return output


def fresh_settings(bootstrap: str, **fields: Any) -> Settings:
    """Settings with every topic and group of their own on `bootstrap` (3 partitions)."""
    fields.setdefault("partitions", 3)
    return topic_settings(bootstrap, f"i{uuid.uuid4().hex[:12]}", **fields)


def inspect_env(env: dict[str, str], server: ModelServer) -> dict[str, str]:
    """A child environment whose `openai-api/offline/...` models are the offline server.

    INSPECT_REQUIRED_HOOKS makes Inspect stop if the plugin is not installed, as docs/inspect.md
    tells users to set it.
    """
    return {
        **env,
        "OFFLINE_BASE_URL": server.base_url,
        "OFFLINE_API_KEY": "offline-key",
        "INSPECT_REQUIRED_HOOKS": "resultlog/publish",
    }


def unplugged(env: dict[str, str]) -> dict[str, str]:
    """The environment without the plugin: no broker for it, no hook required."""
    off = ("RESULTLOG_BOOTSTRAP_SERVERS", "INSPECT_REQUIRED_HOOKS")
    return {name: value for name, value in env.items() if name not in off}


def eval_command(
    run_id: str, log_dir: Path, *options: str, tasks: Sequence[str] = (TASK,)
) -> list[str]:
    """`inspect eval` of `tasks` (the repo's example task), publishing as run `run_id`."""
    return [
        INSPECT,
        "eval",
        *tasks,
        "--model",
        MODEL,
        "--metadata",
        f"resultlog_run={run_id}",
        "--log-dir",
        str(log_dir),
        "--display",
        "plain",
        *options,
    ]


def inspect_eval(
    env: dict[str, str],
    run_id: str,
    log_dir: Path,
    *options: str,
    tasks: Sequence[str] = (TASK,),
    cwd: Path = REPO,
) -> subprocess.CompletedProcess[str]:
    """Run `inspect eval` of `tasks` in `cwd` (the repository) to the end."""
    return subprocess.run(
        eval_command(run_id, log_dir, *options, tasks=tasks),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def only_log(log_dir: Path) -> EvalLog:
    """The one Inspect log an eval wrote to `log_dir` (not a rebuilt one)."""
    [path] = [p for p in log_dir.glob("*.eval") if not p.name.startswith("resultlog-rebuilt")]
    return read_eval_log(str(path))


def metrics(log: EvalLog) -> dict[str, float]:
    """The first scorer's metrics of an Inspect log (accuracy, stderr)."""
    assert log.results is not None
    return {name: metric.value for name, metric in log.results.scores[0].metrics.items()}


def run_key(run_id: str) -> RunKey:
    """The run key the plugin writes the example task's records under."""
    return RunKey(run_id, TASK_NAME, MODEL)


def latest(settings: Settings, run_id: str) -> list[SampleResult]:
    """The run key's latest records."""
    return read_run_records(KafkaConnection(settings), run_key(run_id)).records


def durable_count(settings: Settings, run_id: str) -> int:
    """How many records the run key has now (0 while the new topic elects its leaders)."""
    try:
        return len(latest(settings, run_id))
    except ConsumerError:
        return 0


def pairs(records: list[SampleResult]) -> set[tuple[str, int]]:
    """The (sample id, epoch) pairs of records."""
    return {(r.sample_id, r.epoch) for r in records}


def writes_per_key(settings: Settings, run_id: str) -> Counter[bytes | None]:
    """How many messages each key of the run has in the topic (every write, not the latest)."""
    return Counter(r.key for r in raw_run_records(settings, run_key(run_id)))
