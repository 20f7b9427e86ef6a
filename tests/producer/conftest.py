"""Fixtures for the model client, offline model server and benchmark tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from resultlog.producer.model_client import ModelClient
from resultlog.producer.offline import ModelServer


@pytest.fixture
def offline_server() -> Iterator[ModelServer]:
    """A default offline model server with no added latency."""
    with ModelServer(latency_s=0.0) as server:
        yield server


@pytest.fixture
async def fast_client(offline_server: ModelServer) -> AsyncIterator[ModelClient]:
    """A client of `offline_server` with two retries, tiny backoffs and a short timeout."""
    async with ModelClient(
        offline_server.base_url,
        "sk-test",
        timeout=2.0,
        max_retries=2,
        backoff_initial=0.001,
        backoff_max=0.01,
        max_connections=16,  # httpcore's per-request cost grows with open connections
    ) as client:
        yield client
