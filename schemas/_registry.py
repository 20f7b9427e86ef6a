"""Confluent Schema Registry access: register under `<topic>-value`, find writers by id."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from resultlog.schemas._catalog import SchemaVersion, build_version
from resultlog.schemas.errors import RegistryError, SchemaError

COMPATIBILITY = "FULL_TRANSITIVE"
_NOT_FOUND = 404


class SchemaNotFoundError(LookupError):
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
        conf = {**(config or {}), "url": url}
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
        try:
            if self._set_compatibility:
                self._client.set_compatibility(subject_name=subject, level=COMPATIBILITY)
            return int(self._client.register_schema(subject, Schema(version.text, "AVRO")))
        except SchemaRegistryError as exc:
            raise RegistryError(
                f"registry refused {version.name} v{version.version} under {subject}: {exc}"
            ) from exc
        except Exception as exc:
            raise RegistryError(
                f"schema registry unavailable registering {subject}: {exc}"
            ) from exc

    def writer(self, schema_id: int) -> SchemaVersion:
        """The writer schema with this id (cached; version 0 means "from the registry")."""
        found = self._writers.get(schema_id)
        if found is None:
            found = self._fetch(schema_id)
            self._writers[schema_id] = found
        return found

    def _fetch(self, schema_id: int) -> SchemaVersion:
        """Fetch and parse one schema by id."""
        try:
            schema = self._client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code == _NOT_FOUND:
                raise SchemaNotFoundError(f"schema id {schema_id} is not in the registry") from exc
            raise RegistryError(f"registry failed looking up schema id {schema_id}: {exc}") from exc
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
