"""`resultlog rescore`'s mistakes: one line each, non-zero, nothing written."""

from __future__ import annotations

import os

import pytest

from resultlog.kafka import KafkaConnection
from resultlog.producer import claim_lease
from resultlog.schemas import RunKey
from tests.support.cli import one_line_error, run_cli

_KEY = ("--run-id", "r1", "--benchmark", "arith", "--model", "demo/model")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--scorer", "fuzzy", "--as", "r2"), "unknown scorer 'fuzzy': use one of exact, includes"),
        (("--scorer", "exact", "--as", "r2"), "run r1 / arith / demo/model has no records in"),
        (("--scorer", "pattern:(", "--as", "r2"), "--scorer pattern:(: not a regular expression"),
    ],
)
def test_a_rescore_mistake_is_one_line(
    cli_env: dict[str, str], options: tuple[str, ...], said: str
) -> None:
    done = run_cli(cli_env, "rescore", *_KEY, *options)
    assert done.returncode == 1
    assert said in one_line_error(done)


def test_a_run_still_being_written_is_refused_naming_its_writer(
    cli_env: dict[str, str], kafka: KafkaConnection
) -> None:
    with claim_lease(kafka, RunKey("r1", "arith", "demo/model"), (0, 10)):
        done = run_cli(cli_env, "rescore", *_KEY, "--scorer", "exact", "--as", "r2")
    assert done.returncode == 1
    said = one_line_error(done)
    assert "run r1 / arith / demo/model is still being written" in said
    assert f"pid {os.getpid()}" in said and "--wait" in said
