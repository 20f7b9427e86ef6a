"""Fixtures of the fault tier (brokers it may stop, kill and restart) and its table of outcomes."""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from resultlog.broker import LocalKafka
from resultlog.settings import Settings
from tests.support.fault_table import FAULT_TIER, FaultRow, what_it_checks, write_fault_table
from tests.support.kafka import topic_settings


@pytest.fixture(scope="module")
def restartable_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A single-node broker of the module alone: its tests stop and restart it."""
    kafka = LocalKafka(tmp_path_factory.mktemp("restartable-kafka"))
    kafka.up(port=0)
    yield kafka
    kafka.down()


@pytest.fixture
def restartable_settings(restartable_kafka: LocalKafka) -> Iterator[Settings]:
    """Fresh topics on the restartable broker; the broker is serving again after the test."""
    yield topic_settings(restartable_kafka.bootstrap)
    restartable_kafka.start_node(1)


# The fault table of the documentation (docs/_generated/faults.md): written when the whole
# tier runs as `make test-faults` does (marker `faults`, the default test paths, no -k,
# --deselect or --lf), so a single test run by hand never replaces it with one row.
_CHECKS = pytest.StashKey[dict[str, str]]()
_ROWS = pytest.StashKey[dict[str, FaultRow]]()
_STARTED = pytest.StashKey[float]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note what each selected fault test checks (the first sentence of its docstring)."""
    config = session.config
    config.stash[_CHECKS] = {
        item.nodeid: what_it_checks(getattr(item, "function", None))
        for item in session.items
        if item.get_closest_marker("faults") is not None
    }
    config.stash[_ROWS] = {}
    config.stash[_STARTED] = time.monotonic()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each fault test's outcome: its call's, or its setup's when that did not pass."""
    report = yield
    checks = item.config.stash.get(_CHECKS, {})
    if report.nodeid not in checks:
        return report
    rows = item.config.stash[_ROWS]
    if report.when == "call" or (report.when == "setup" and not report.passed):
        rows[report.nodeid] = FaultRow(
            report.nodeid, checks[report.nodeid], report.outcome, report.duration
        )
    elif report.when == "teardown" and report.failed and report.nodeid in rows:
        row = rows[report.nodeid]
        rows[report.nodeid] = FaultRow(row.nodeid, row.checks, "error", row.seconds)
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the fault table when the whole tier ran to its end."""
    config = session.config
    checks, rows = config.stash.get(_CHECKS, {}), config.stash.get(_ROWS, {})
    whole_tier = (
        config.getoption("markexpr") in ("faults", FAULT_TIER)
        and not config.getoption("keyword")
        and not config.getoption("deselect", None)
        and not config.getoption("lf", False)
        and config.args_source is pytest.Config.ArgsSource.TESTPATHS
    )
    if not whole_tier or not checks or set(rows) != set(checks):
        return
    elapsed = time.monotonic() - config.stash[_STARTED]
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    context = (
        f"Written by `make test-faults` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: "
        f"{os.cpu_count()} cores, load average {load} at the end, {elapsed:.0f} s in all."
    )
    write_fault_table(list(rows.values()), context)
