"""A wrong or broken endpoint is a failed run, never a successful one with accuracy 0."""

from __future__ import annotations

import pytest

from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.cli import child_env, run_cli
from tests.support.processes import durable, one_line_error

MODEL = "offline/gpt-4o"
SAMPLES = 6


def _run(settings: Settings, server: ModelServer, run_id: str) -> tuple[int, str, str]:
    done = run_cli(
        child_env(settings, RESULTLOG_MODEL_MAX_RETRIES="1"),
        *["run", "arith", "--model", MODEL, "--run-id", run_id, "--limit", str(SAMPLES)],
        *["--json", "--base-url", server.base_url],
    )
    return done.returncode, done.stdout, done.stderr


def _answer_every_pair(server: ModelServer, *behaviors: Behavior) -> None:
    for sample in limit_samples(arith(), SAMPLES).samples():
        server.override(sample.id, 0, *behaviors)


@pytest.mark.parametrize("status", [501, 503, 429])
def test_an_endpoint_that_answers_no_pair_fails_the_run(settings: Settings, status: int) -> None:
    with ModelServer(latency_s=0.0) as server:
        _answer_every_pair(server, Behavior(status=status))
        code, out, err = _run(settings, server, f"broken-{status}")
    line = one_line_error((code, err), f"{server.base_url} answered no pair of run broken-")
    assert f"{SAMPLES} x HTTP {status}" in line and not out
    records = durable(settings, RunKey(f"broken-{status}", "arith", MODEL))
    assert len(records) == SAMPLES and all(r.degraded and r.attempts == 2 for r in records)


def test_a_mixed_endpoint_is_still_a_run(settings: Settings) -> None:
    with ModelServer(latency_s=0.0) as server:
        server.override("arith-0000", 0, Behavior(status=503))
        code, _, err = _run(settings, server, "mostly")
        assert code == 0, err
        # A re-run asks only the degraded pair; the log holds answers, so it still succeeds.
        code, _, err = _run(settings, server, "mostly")
        assert code == 0, err
        assert server.request_count("arith-0000", 0) == 4


def test_a_wrong_endpoint_fails_again_when_run_again(settings: Settings) -> None:
    with ModelServer(latency_s=0.0) as server:
        _answer_every_pair(server, Behavior(status=501))
        assert _run(settings, server, "twice")[0] == 1
        code, _, err = _run(settings, server, "twice")
    one_line_error((code, err), f"{SAMPLES} x HTTP 501")


@pytest.mark.parametrize("status", [402, 302, 307])
def test_out_of_credits_or_a_redirect_is_fatal(settings: Settings, status: int) -> None:
    with ModelServer(latency_s=0.0) as server:
        server.override("arith-0002", 0, Behavior(status=status))
        code, out, err = _run(settings, server, f"fatal-{status}")
    one_line_error((code, err), f"model endpoint returned HTTP {status}")
    records = durable(settings, RunKey(f"fatal-{status}", "arith", MODEL))
    assert not out and not any(r.sample_id == "arith-0002" for r in records)
    assert not any(r.degraded for r in records)
