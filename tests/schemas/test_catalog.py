"""The schema catalog: loading, indexing and refusing ambiguous sets of versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resultlog.schemas import SchemaCatalog, SchemaError, shipped_catalog
from resultlog.schemas._catalog import (
    AGGREGATOR_CHECKPOINT,
    CHUNK_TASK,
    RUN_INDEX,
    RUN_SUMMARY,
    SAMPLE_RESULT,
    build_version,
    load_file,
)


def test_shipped_catalog_is_parsed_once() -> None:
    assert shipped_catalog() is shipped_catalog()
    names = [(v.name, v.version) for v in shipped_catalog().all()]
    assert names == [
        (AGGREGATOR_CHECKPOINT, 1),
        (AGGREGATOR_CHECKPOINT, 2),
        (AGGREGATOR_CHECKPOINT, 3),
        (CHUNK_TASK, 1),
        (CHUNK_TASK, 2),
        (RUN_INDEX, 1),
        (RUN_INDEX, 2),
        (RUN_SUMMARY, 1),
        (RUN_SUMMARY, 2),
        (SAMPLE_RESULT, 1),
        (SAMPLE_RESULT, 2),
        (SAMPLE_RESULT, 3),
    ]


def test_lookup_by_name_version_and_fingerprint() -> None:
    catalog = shipped_catalog()
    current = catalog.current(SAMPLE_RESULT)
    assert catalog.get(SAMPLE_RESULT, 3) is current
    assert catalog.versions(SAMPLE_RESULT) == (
        catalog.get(SAMPLE_RESULT, 1),
        catalog.get(SAMPLE_RESULT, 2),
        current,
    )
    assert catalog.by_fingerprint(current.fingerprint) is current
    assert catalog.by_fingerprint(bytes(8)) is None
    assert catalog.versions("resultlog.Nope") == ()
    with pytest.raises(SchemaError, match=r"no schema named resultlog\.Nope"):
        catalog.current("resultlog.Nope")
    with pytest.raises(SchemaError, match="version 9"):
        catalog.get(SAMPLE_RESULT, 9)


def test_text_is_the_full_definition() -> None:
    current = shipped_catalog().current(SAMPLE_RESULT)
    assert json.loads(current.text) == current.definition
    assert '"default"' in current.text and '"default"' not in current.canonical


def test_duplicate_versions_and_fingerprints_are_refused() -> None:
    current = shipped_catalog().current(SAMPLE_RESULT)
    with pytest.raises(SchemaError, match="defined twice"):
        SchemaCatalog([current, current])
    again = build_version(current.definition, 4)
    with pytest.raises(SchemaError, match="has the fingerprint of v3"):
        SchemaCatalog([current, again])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("sample_result.avsc", "{}", "is not named"),
        ("sample_result.v0.avsc", "{}", "is not named"),
        ("sample_result.v1.avsc", "{nope", "cannot read schema file"),
        ("sample_result.v1.avsc", '{"type": "record", "name": "X", "fields": 3}', "invalid Avro"),
        ("sample_result.v1.avsc", '"string"', "invalid Avro|not a named record"),
        ("sample_result.v1.avsc", '{"type": "enum", "name": "E", "symbols": ["A"]}', "not a named"),
    ],
)
def test_bad_schema_files_are_refused(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(SchemaError, match=message):
        load_file(path)


def test_from_directory_loads_every_file(tmp_path: Path) -> None:
    for version in shipped_catalog().all():
        stem = {
            SAMPLE_RESULT: "sample_result",
            RUN_SUMMARY: "run_summary",
            AGGREGATOR_CHECKPOINT: "aggregator_checkpoint",
            RUN_INDEX: "run_index",
            CHUNK_TASK: "chunk_task",
        }[version.name]
        (tmp_path / f"{stem}.v{version.version}.avsc").write_text(version.text)
    loaded = SchemaCatalog.from_directory(tmp_path)
    assert [v.fingerprint for v in loaded.all()] == [v.fingerprint for v in shipped_catalog().all()]
