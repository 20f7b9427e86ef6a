"""The golden vectors in schemas/conformance.json: what a writer in any language must produce."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from resultlog.schemas import Codec, RunKey, decode_key, encode_key, encode_run_key, partition_for

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "schemas" / "conformance.json").read_text(encoding="utf-8"))


def test_the_file_is_what_the_script_generates() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "golden_vectors.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_keys_and_partitions_follow_the_documented_partitioner() -> None:
    partitions = VECTORS["partitions"]
    assert partitions == 6 and len(VECTORS["keys"]) >= 4
    for vector in VECTORS["keys"]:
        run_key = RunKey(**vector["run_key"])
        encoded = vector["encoded_run_key"].encode()
        assert encode_run_key(run_key) == encoded
        assert encode_key(run_key, 3, 0).decode() == vector["key_sample_3_epoch_0"]
        # The partitioner restated independently of partition_for, as another language would.
        digest = hashlib.blake2b(encoded, digest_size=8).digest()
        assert int.from_bytes(digest, "big") % partitions == vector["partition"]
        assert partition_for(run_key, partitions) == vector["partition"]


def test_every_record_vector_decodes_to_its_datum() -> None:
    codec = Codec()
    versions = {vector["schema_version"] for vector in VECTORS["records"]}
    assert versions == {1, 2, 3}
    for vector in VECTORS["records"]:
        raw = bytes.fromhex(vector["single_object_hex"])
        assert raw[:2] == b"\xc3\x01"
        assert raw[2:10].hex() == VECTORS["schemas"][f"SampleResult.v{vector['schema_version']}"]
        record = codec.decode_sample_result(raw)
        assert record.key.decode() == vector["key"]
        assert decode_key(record.key)[1:] == (record.sample_index, record.epoch)
        # An older datum lacks newer fields: they decode to their defaults and are not compared.
        assert _subset(vector["datum"], _json(record.model_dump())), vector["name"]


def test_v3_vectors_are_our_writer_byte_for_byte() -> None:
    codec = Codec()
    for vector in VECTORS["records"]:
        if vector["schema_version"] == 3:
            raw = bytes.fromhex(vector["single_object_hex"])
            assert codec.encode_sample_result(codec.decode_sample_result(raw)) == raw


def test_the_tombstone_names_a_record_key() -> None:
    tombstone = VECTORS["tombstone"]
    assert tombstone["value"] is None
    run_key, sample_index, epoch = decode_key(tombstone["key"].encode())
    assert (run_key.run_id, sample_index, epoch) == ("run-1", 7, 1)


def _subset(expected: Any, actual: Any) -> bool:
    """Whether every field of `expected` (recursively) has its value in `actual`."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(_subset, expected, actual))
    return bool(expected == actual)


def _json(value: Any) -> Any:
    """The vectors' JSON conventions: bytes as {"hex": ...}, timestamps as epoch millis."""
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    if hasattr(value, "value") and isinstance(value.value, str):
        return value.value
    return value
