"""Hostile input on the command line and the HTTP API: clear errors, nothing written, no escape."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator import path, raw_get, serving_aggregator
from tests.support.audit import report
from tests.support.cli import child_env, one_line_error, run_cli
from tests.support.kafka import message_count, raw_run_records
from tests.support.runs import MODEL

pytestmark = pytest.mark.faults

RUN = ["run", "arith", "--model", MODEL]
KEY = ["--benchmark", "arith", "--model", MODEL]
BAD_ARGUMENTS = [
    ([*RUN, "--run-id", "evil\x1b[2J"], "run id contains a control character"),
    ([*RUN, "--run-id", "gpt\u202eevil"], "run id contains a control character"),  # RTL override
    ([*RUN, "--run-id", "r" * 300], "run id is longer than 256 characters"),
    ([*RUN, "--run-id", ".."], "run id must not be '..'"),  # /page/run/../ would not open
    (["run", "arith", "--model", ".", "--run-id", "r"], "model must not be '.'"),
    ([*RUN, "--run-id", "iso\u2067late"], "run id contains a control character, U+2067"),
    (["status", "--run-id", "r", "--benchmark", "..", "--model", MODEL], "benchmark must not be"),
    ([*RUN, "--run-id", "r", "--limit", "99999999999"], "limit must be between 1 and 10000000"),
    ([*RUN, "--run-id", "r", "--epochs", "100000"], "epochs must be between 1 and 1000"),
    ([*RUN, "--run-id", "r", "--limit", "1e3"], "limit must be an integer"),
    ([*RUN, "--run-id", "r", "--concurrency", "0"], "concurrency must be between 1 and 1024"),
    (["status", "--run-id", "x\ty", *KEY], "run id contains a control character"),
    (["replay", "--run-id", " padded", *KEY], "run id must be non-empty without outer spaces"),
    (["purge", "--run-id", "r" * 257, *KEY], "run id is longer than 256 characters"),
    (["purge", "--run-id", "r", "--benchmark", "b\x7f", "--model", MODEL], "control character"),
]
BAD_JSONL = [
    ('{"id": "a", "input": "1 + 1?", "target": "2"}\n\n{"id": "b", oops\n', ":3: invalid JSON"),
    ('{"id": "a", "input": "x"}\n{"id": "b"}\n', ":2: missing required field 'input'"),
    ('{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n', ":2: duplicate id 'a'"),
    ('["not", "an", "object"]\n', ":1: expected a JSON object"),
    ("\n\n", "no samples"),
]  # fmt: skip


def _run(settings: Settings, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(child_env(settings), *args, cwd=cwd)


def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


@pytest.mark.parametrize(("args", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_one_line_errors_and_write_nothing(
    args: list[str], message: str, settings: Settings, tmp_path: Path
) -> None:
    error = one_line_error(_run(settings, args, tmp_path))
    assert message in error, error
    assert message_count(settings) == message_count(settings, settings.summaries_topic) == 0


@pytest.mark.parametrize(("content", "message"), BAD_JSONL)
def test_bad_jsonl_names_the_line_and_writes_nothing(
    content: str, message: str, settings: Settings, tmp_path: Path
) -> None:
    bench = tmp_path / "qa.jsonl"
    bench.write_text(content)
    error = one_line_error(
        _run(settings, ["run", str(bench), "--model", "m", "--run-id", "r"], tmp_path)
    )
    assert message in error, error
    assert message_count(settings) == 0


def test_traversal_in_names_is_just_text_in_percent_encoded_keys(
    settings: Settings, tmp_path: Path
) -> None:
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    odd = tmp_path / "..%2e%2e weird name!é.jsonl"
    odd.write_text('{"id": "q1", "input": "What is 1 + 1?", "target": "2"}\n')
    before = _tree(tmp_path)
    with ModelServer(latency_s=0.0) as server:
        base = ["--base-url", server.base_url, "--json"]
        for bench, run_id in (("arith", "../../etc"), (str(odd), "../../etc/passwd")):
            args = ["run", bench, "--model", "../" + MODEL, "--run-id", run_id, "--limit", "2"]
            done = _run(settings, [*args, *base], cwd)
            assert done.returncode == 0, done.stderr
    assert _tree(tmp_path) == before, "a run wrote to the file system"
    assert not (tmp_path / "etc").exists()

    arith = raw_run_records(settings, RunKey("../../etc", "arith", "../" + MODEL))
    assert {r.key.rsplit(b"/", 2)[0] for r in arith if r.key} == {
        b"..%2F..%2Fetc/arith/..%2Foffline%2Fgpt-4o"
    }
    weird = RunKey("../../etc/passwd", odd.stem, "../" + MODEL)
    keys = [r.key for r in raw_run_records(settings, weird)]
    assert keys == [
        b"..%2F..%2Fetc%2Fpasswd/..%252e%252e%20weird%20name%21%C3%A9/..%2Foffline%2Fgpt-4o/0/0"
    ]
    status = _run(settings, ["status", "--run-id", weird.run_id, "--benchmark", weird.benchmark_id,
                             "--model", weird.model, "--json"], cwd)  # fmt: skip
    assert json.loads(status.stdout)["completed"] == 1

    with serving_aggregator(settings) as (_, base_url):
        response = httpx.get(base_url + path(weird), timeout=5)
        assert response.status_code == 200 and response.json()["run_id"] == weird.run_id
    report("hostile-cli", cases=len(BAD_ARGUMENTS) + len(BAD_JSONL) + 2, written_by_bad=0)


HTTP_CASES = [
    ("/runs/%zz/arith/m", 400),
    ("/runs/a%2/arith/m", 400),
    ("/runs/%C3%28/arith/m", 400),  # percent-encoded bytes that are not UTF-8
    ("/runs/%41/arith/m", 404),  # a needless escape: the run "A", canonical on the wire
    ("/runs/a/b", 400),
    ("/runs/a/b/c/d", 400),
    ("/runs/../../etc/passwd", 400),
    ("/runs/..%2F..%2Fetc/passwd/x", 404),
    ("/../../etc/passwd", 404),
    ("/runs/%00/arith/m", 400),  # no run key holds a control character
    ("/runs/" + "a" * 8000 + "/arith/m", 400),  # a run key part is at most 256 characters
    ("/runs?limit=99999999999999999999", 400),
    ("/runs?limit=-1", 400),
    ("/runs?limit=1e9", 400),
    ("/runs?run_id=", 400),
]


def test_http_api_answers_hostile_paths_with_json_errors_and_keeps_serving(
    settings: Settings,
) -> None:
    with serving_aggregator(settings) as (aggregator, base_url):
        answers = {raw: raw_get(base_url, raw) for raw, _ in HTTP_CASES}
        for raw, status in HTTP_CASES:
            code, body = answers[raw]
            assert code == status, (raw, code, body)
            assert body["error"] and body["detail"], (raw, body)
        assert httpx.get(base_url + "/healthz", timeout=5).status_code == 200
        assert httpx.get(base_url + "/runs?limit=1000", timeout=5).json() == []
        assert aggregator.running
    report("hostile-http", cases=len(HTTP_CASES), crashed=0)
