"""Confluent Schema Registry access: register under `<topic>-value`, find writers by id.

Every request is bounded: a timeout per request, and transient failures (no answer, a
timeout, 408, 429 or 5xx) are retried like record writes are, a few attempts with exponential
backoff from 200 ms and jitter, within an overall deadline. So a registry blip costs a second,
and a stalled registry is a RegistryError in seconds, never a hang.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from resultlog.schemas._catalog import SchemaVersion, build_version
from resultlog.schemas.errors import RegistryError, SchemaError

if TYPE_CHECKING:
    # Imported where a registry is used: the client library takes a good part of a second.
    from confluent_kafka.schema_registry import SchemaRegistryClient

COMPATIBILITY = "FULL_TRANSITIVE"
_NOT_FOUND = 404
_CONFLICT = 409
REQUEST_TIMEOUT_S = 5.0
_ATTEMPTS = 4
_BACKOFF_S = 0.2
_DEADLINE_S = 12.0  # no new attempt starts after this long
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

T = TypeVar("T")
log = logging.getLogger(__name__)


class SchemaNotFoundError(SchemaError, LookupError):
    """The registry has no usable Avro record schema with this id."""


def _is_mock(client: SchemaRegistryClient) -> bool:
    """Whether this is confluent-kafka's in-process mock client (a `mock://` URL)."""
    try:
        from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
            MockSchemaRegistryClient,
        )
    except ImportError:  # the private module moved: treat every client as real
        return False
    return isinstance(client, MockSchemaRegistryClient)


def subject_for(topic: str) -> str:
    """The TopicNameStrategy subject of a topic's values."""
    return f"{topic}-value"


class Registry:
    """A registry client with per-subject id caching and errors translated to RegistryError."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self._client = client
        # Confluent's mock client has no config endpoint, so it cannot hold a compatibility level.
        self._set_compatibility = not _is_mock(client)
        self._ids: dict[tuple[str, bytes], int] = {}
        self._writers: dict[int, SchemaVersion] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, config: Mapping[str, Any] | None = None) -> Registry:
        """Build a client for a registry URL (`mock://...` gives confluent's in-process mock)."""
        # Retries are ours (below): the client's own would multiply with them.
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf = {"timeout": REQUEST_TIMEOUT_S, "max.retries": 0, **(config or {}), "url": url}
        try:
            client = SchemaRegistryClient.new_client(conf)
        except Exception as exc:
            raise RegistryError(
                f"cannot configure schema registry client for {url}: {exc}"
            ) from exc
        return cls(client)

    @property
    def client(self) -> SchemaRegistryClient:
        """The underlying confluent-kafka client."""
        return self._client

    def schema_id(self, topic: str, version: SchemaVersion) -> int:
        """The registry id of a schema under `<topic>-value`, registering it on first use."""
        cache_key = (topic, version.fingerprint)
        found = self._ids.get(cache_key)
        if found is not None:
            return found
        with self._lock:
            found = self._ids.get(cache_key)
            if found is None:
                found = self._register(subject_for(topic), version)
                self._ids[cache_key] = found
        return found

    def _register(self, subject: str, version: SchemaVersion) -> int:
        """Pin FULL_TRANSITIVE on the subject, then register the schema."""
        from confluent_kafka.schema_registry import Schema, SchemaRegistryError

        try:
            if self._set_compatibility:
                self._pin_compatibility(subject)
            schema = Schema(version.text, "AVRO")
            return int(
                self._retrying(
                    f"registering under {subject}",
                    lambda: self._client.register_schema(subject, schema),
                )
            )
        except SchemaRegistryError as exc:
            raise RegistryError(
                f"registry refused {version.name} v{version.version} under {subject}: {exc}"
            ) from exc
        except Exception as exc:
            raise RegistryError(
                f"schema registry unavailable registering {subject}: {exc}"
            ) from exc

    def _pin_compatibility(self, subject: str) -> None:
        """Set FULL_TRANSITIVE on the subject (an attempt that timed out may have done it)."""
        from confluent_kafka.schema_registry import SchemaRegistryError

        try:
            self._retrying(
                f"setting the compatibility of {subject}",
                lambda: self._client.set_compatibility(subject_name=subject, level=COMPATIBILITY),
            )
        except SchemaRegistryError as exc:
            # Apicurio answers 409 when a concurrent (or timed-out earlier) request created the
            # rule first: fine if the level is ours.
            if exc.http_status_code != _CONFLICT:
                raise
            level = self._retrying(
                f"reading the compatibility of {subject}",
                lambda: self._client.get_compatibility(subject_name=subject),
            )
            if level != COMPATIBILITY:
                raise

    def writer(self, schema_id: int) -> SchemaVersion:
        """The writer schema with this id (cached; version 0 means "from the registry")."""
        found = self._writers.get(schema_id)
        if found is None:
            found = self._fetch(schema_id)
            self._writers[schema_id] = found
        return found

    def _fetch(self, schema_id: int) -> SchemaVersion:
        """Fetch and parse one schema by id."""
        from confluent_kafka.schema_registry import SchemaRegistryError

        try:
            schema = self._retrying(
                f"looking up schema id {schema_id}", lambda: self._client.get_schema(schema_id)
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == _NOT_FOUND:
                raise SchemaNotFoundError(f"schema id {schema_id} is not in the registry") from exc
            raise RegistryError(
                f"schema registry failed looking up schema id {schema_id}: {exc}"
            ) from exc
        except Exception as exc:
            raise RegistryError(
                f"schema registry unavailable (schema id {schema_id}): {exc}"
            ) from exc
        kind = schema.schema_type or "AVRO"
        if kind != "AVRO":
            raise SchemaNotFoundError(f"schema id {schema_id} is a {kind} schema, not Avro")
        try:
            return build_version(json.loads(schema.schema_str or ""), 0)
        except (TypeError, ValueError, SchemaError) as exc:
            raise SchemaNotFoundError(
                f"schema id {schema_id} is not a usable Avro record: {exc}"
            ) from exc

    @staticmethod
    def _retrying(what: str, call: Callable[[], T]) -> T:
        """`call()`, retrying transient failures with backoff; the last failure is raised."""
        from confluent_kafka.schema_registry import SchemaRegistryError

        deadline = time.monotonic() + _DEADLINE_S
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except SchemaRegistryError as exc:
                if exc.http_status_code not in _TRANSIENT_STATUS:
                    raise
                failure: Exception = exc
            except Exception as exc:  # no answer: refused, reset, timed out (httpx errors)
                failure = exc
            delay = _BACKOFF_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)
            if attempt >= _ATTEMPTS or time.monotonic() + delay >= deadline:
                raise failure
            log.warning("schema registry failed %s (%s); retrying in %.2fs", what, failure, delay)
            time.sleep(delay)
