"""`--help` is where people start: every option says what it does, defaults shown."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator

import pytest

from resultlog._hotpath import compiled
from resultlog.broker import KAFKA_VERSION, default_kafka_dir, jar_cache_dir
from resultlog.cli import build_parser, main
from resultlog.kafka import LIBRDKAFKA_LOGGER


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and every sub-command's, depth first."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _parsers(sub)


def test_every_option_of_every_command_says_what_it_does() -> None:
    silent = [
        f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
        for parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not (action.help or "").strip()
    ]
    assert silent == []


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # unwrapped


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    run = _help(capsys, "run")
    assert "how many times each sample is asked" in run
    assert "(default: 1)" in run and "model calls in flight at once (default: 8)" in run
    assert "(default: None)" not in run and "(default: False)" not in run
    up = _help(capsys, "up")
    assert "(default: 127.0.0.1:8080)" in up


def test_kafka_up_help_says_where_the_data_and_the_jars_live(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys, "kafka", "up")
    assert f"(default: {default_kafka_dir()})" in text
    assert str(jar_cache_dir()) in text
    assert "0: a free port picked now" in text


def test_the_offline_model_server_documents_its_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "model-server")
    for option, meaning in (
        ("--latency-ms", "to kill a run midway (default: 5.0)"),
        ("--seed", "same seed, same run (default: 0)"),
        ("--error-rate", "429 or a 500 every time (they end degraded) (default: 0.025)"),
        ("--wrong-rate", "share of pairs answered wrong (default: 0.1)"),
    ):
        assert option in text and meaning in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"resultlog 0.1.0 (local broker: Apache Kafka {KAFKA_VERSION}; "
        f"fold: {'mypyc' if compiled() else 'pure Python'})"
    )


def test_a_missing_command_names_the_problem_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "resultlog: error: the following arguments are required: COMMAND\n"
    )


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("Failed to acquire transactional PID: Coordinator load in progress: retrying", False),
        ("GroupCoordinator: Broker: Not coordinator: retrying", False),
        ("Coordinator load in progress", True),  # not a retry: nothing says it settles
        ("127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: retrying", True),
    ],
)
def test_transient_librdkafka_retries_are_not_warnings(
    message: str, shown: bool, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As inside a host application (Inspect): our logger unset, the root one taking all.
    monkeypatch.setattr(LIBRDKAFKA_LOGGER, "level", logging.NOTSET)
    with caplog.at_level(logging.DEBUG):
        _log_as_confluent_kafka(message)
    assert bool(caplog.records) == shown


def test_resultlog_verbose_shows_transient_retries(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LIBRDKAFKA_LOGGER, "level", logging.INFO)  # what -v sets
    with caplog.at_level(logging.DEBUG):
        _log_as_confluent_kafka("Coordinator load in progress: retrying")
    assert len(caplog.records) == 1


def _log_as_confluent_kafka(message: str) -> None:
    """A librdkafka line as confluent-kafka logs it: (facility, client name, message)."""
    LIBRDKAFKA_LOGGER.log(logging.WARNING, "%s [%s] %s", "GETPID", "rdkafka#producer-1", message)
