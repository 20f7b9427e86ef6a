"""Run key parts no reader can handle are refused at the schema, by every model that has one.

`.` and `..` are path segments browsers resolve away (a link to /page/run/../b/m opens
/page/b/m); control characters reach logs and pages raw (NUL) or reorder what is shown (a
run id `rtl-\u202egnp.exe` reads as `rtl-exe.png`).
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from fastavro import schemaless_writer
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from resultlog.schemas import (
    ChunkTask,
    Codec,
    DecodeError,
    InvalidRunKeyError,
    KeyDecodeError,
    RunKey,
    RunSummary,
    SampleResult,
    decode_key,
    shipped_catalog,
)
from resultlog.schemas.codec import SINGLE_OBJECT_MAGIC
from tests.schemas.test_chunk_task import task_fields
from tests.support.records import record_fields
from tests.support.strategies import run_key_parts

FIELDS = ("run_id", "benchmark_id", "model")
REFUSED = {
    ".": "must not be '.'",
    "..": "must not be '..'",
    "nul\x00byte": "U+0000",
    "new\nline": "U+000A",
    "c1\x85": "U+0085",
    "rtl-\u202egnp.exe": "U+202E (RIGHT-TO-LEFT OVERRIDE)",
    "lro\u202d": "U+202D",
    "isolate\u2067x\u2069": "U+2067 (RIGHT-TO-LEFT ISOLATE)",
    "first\u2068": "U+2068",
    "mark\u200f": "U+200F (RIGHT-TO-LEFT MARK)",
    "arabic\u061cmark": "U+061C",
    "line\u2028sep": "U+2028",
}
ACCEPTED = ("a.b", "...", ".hidden", "עברית", "العربية", "openai/gpt-4o", "run 1", "é")


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(("part", "reason"), REFUSED.items())
def test_run_key_refuses_in_one_line_naming_the_field(field: str, part: str, reason: str) -> None:
    parts = dict.fromkeys(FIELDS, "ok") | {field: part}
    with pytest.raises(InvalidRunKeyError) as caught:
        RunKey(**parts)
    message = str(caught.value)
    assert message.startswith(f"RunKey.{field} ") and reason in message
    assert "\n" not in message and "\x00" not in message and "\u202e" not in message


@pytest.mark.parametrize("part", ACCEPTED)
def test_ordinary_names_in_any_script_are_accepted(part: str) -> None:
    assert RunKey(part, part, part).run_id == part


def _models(field: str, part: str) -> dict[str, Any]:
    """Every model with a run key, built with `field` set to `part`."""
    summary: dict[str, Any] = {
        "run_id": "r",
        "benchmark_id": "b",
        "model": "m",
        "records": 1,
        "degraded_records": 0,
        "total_questions": 1,
        "correct_answers": 1,
        "skipped_questions": 0,
        "accuracy": 1.0,
    }
    return {
        "SampleResult": lambda: SampleResult(**record_fields(**{field: part})),
        "RunSummary": lambda: RunSummary(**(summary | {field: part})),
        "ChunkTask": lambda: ChunkTask(**task_fields(**{field: part})),
    }


@pytest.mark.parametrize("model", ["SampleResult", "RunSummary", "ChunkTask"])
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("part", [".", "..", "nul\x00", "rtl-\u202egnp.exe", "iso\u2066"])
def test_every_model_with_a_run_key_refuses_the_part(model: str, field: str, part: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _models(field, part)[model]()
    (error,) = caught.value.errors()
    assert error["loc"] == (field,)
    assert f"RunKey.{field} " in error["msg"]


def test_a_key_written_by_another_client_with_a_bidi_override_is_undecodable() -> None:
    with pytest.raises(KeyDecodeError, match="U\\+202E"):
        decode_key(b"rtl-%E2%80%AEgnp.exe/arith/m/0/0")
    with pytest.raises(KeyDecodeError, match=r"must not be '\.\.'"):
        decode_key(b"../arith/m/0/0")


def test_a_value_written_by_another_client_with_a_nul_run_id_is_undecodable() -> None:
    """Valid Avro of a record whose run id has a NUL: the codec refuses it like any bad record."""
    datum = SampleResult(**record_fields()).model_dump() | {"run_id": "nul\x00"}
    schema = shipped_catalog().current("resultlog.SampleResult")
    body = BytesIO()
    schemaless_writer(body, schema.parsed, datum)
    raw = SINGLE_OBJECT_MAGIC + schema.fingerprint + body.getvalue()
    with pytest.raises(DecodeError, match="run_id"):
        Codec().decode_sample_result(raw)


@given(st.text(min_size=1, max_size=12), st.sampled_from(sorted(REFUSED)))
def test_a_refused_character_anywhere_is_refused(text: str, bad: str) -> None:
    if bad in (".", ".."):
        return  # dot segments are refused whole, not as characters
    with pytest.raises(InvalidRunKeyError):
        RunKey(text[:6] + bad + text[6:], "b", "m")


@given(run_key_parts, run_key_parts, run_key_parts)
def test_every_other_part_is_accepted(run_id: str, benchmark: str, model: str) -> None:
    assert RunKey(run_id, benchmark, model).model == model
