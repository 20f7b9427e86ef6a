"""Fixtures of the consumer tests: a running aggregator and its HTTP API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from resultlog.consumers.aggregator import Aggregator
from resultlog.settings import Settings
from tests.support.aggregator import running, serving
from tests.support.browser import chromium
from tests.support.kafka import drop_topics, topic_settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture
def aggregator(settings: Settings) -> Iterator[Aggregator]:
    """A running aggregator on this test's topics."""
    with running(settings) as started:
        yield started


@pytest.fixture
def base_url(aggregator: Aggregator) -> Iterator[str]:
    """The aggregator's HTTP API base URL."""
    with serving(aggregator) as url:
        yield url


@pytest.fixture(scope="module")
def module_settings(kafka_bootstrap: str) -> Iterator[Settings]:
    """Topics of a whole module, for tests that only read what a module fixture wrote."""
    made = topic_settings(kafka_bootstrap)
    yield made
    drop_topics(made)


@pytest.fixture(scope="module")
def module_aggregator(module_settings: Settings) -> Iterator[Aggregator]:
    """One running aggregator on the module's topics."""
    with running(module_settings) as started:
        yield started


@pytest.fixture(scope="module")
def module_base_url(module_aggregator: Aggregator) -> Iterator[str]:
    """The HTTP API of the module's aggregator."""
    with serving(module_aggregator) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for a module of page tests (skips where there is none)."""
    with chromium() as started:
        yield started
