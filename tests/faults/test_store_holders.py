"""Two aggregators on one state directory: the one waiting for a held store never rotates
the holder's RocksDB LOG, and private copies left by a killed process are removed at start."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator_process import AggregatorProcess, two_epoch_records
from tests.support.cli import child_env
from tests.support.kafka import write_many
from tests.support.processes import start

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]

RUNS = [RunKey(f"held-{i}", "arith", "m") for i in range(4)]


@contextmanager
def _aggregator(settings: Settings, group: str, stop: signal.Signals) -> Iterator[
    tuple[AggregatorProcess, subprocess.Popen[str]]
]:  # fmt: skip
    process = start(["aggregator", "--http", "127.0.0.1:0", "--group", group], child_env(settings))
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("aggregator serving http://"), process.communicate(timeout=30)[1]
    try:
        yield AggregatorProcess(line.split()[-1].rstrip("/")), process
    finally:
        process.send_signal(stop)
        process.communicate(timeout=60)


def _stores(settings: Settings) -> list[Path]:
    assert settings.aggregator_state_dir is not None
    root = settings.aggregator_state_dir / settings.results_topic
    return sorted(p for p in root.iterdir() if p.name.isdecimal())


def _rotated(stores: list[Path]) -> int:
    return sum(len(list(store.glob("LOG.old.*"))) for store in stores)


def _scratch(settings: Settings) -> list[Path]:
    assert settings.aggregator_state_dir is not None
    return sorted((settings.aggregator_state_dir / settings.results_topic).glob("*.scratch-*"))


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_waiting_aggregator_leaves_the_holders_log_and_dead_scratch_goes(
    settings: Settings,
) -> None:
    """A second aggregator on a held state directory backs off without rotating the holder's
    LOG; the scratch copies of a SIGKILLed one are removed by the next start; all equal replay."""
    write_many(settings, two_epoch_records(RUNS, range(40)))
    with _aggregator(settings, "first", signal.SIGTERM) as (first, _):
        first.wait_equal(settings, RUNS)
        stores = _stores(settings)
        rotated = _rotated(stores)
        with _aggregator(settings, "second", signal.SIGKILL) as (second, process):
            second.wait_equal(settings, RUNS)  # folded into private copies meanwhile
            mine = [p for p in _scratch(settings) if f".scratch-{process.pid}-" in p.name]
            assert len(mine) == len(stores)
        assert _rotated(stores) == rotated  # the holder's LOG was never renamed
    assert all(p.exists() for p in mine)  # a SIGKILL leaves them
    stale = stores[0].with_name(f"{stores[0].name}.scratch-{_dead_pid()}-00000000")
    stale.mkdir()
    with _aggregator(settings, "third", signal.SIGTERM) as (third, _):
        third.wait_equal(settings, RUNS)
        assert _scratch(settings) == []
