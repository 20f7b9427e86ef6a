"""`--accept-config-change` over a changed JSONL file: records follow their sample ids."""

from __future__ import annotations

import json
from pathlib import Path

from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.cli import child_env, run_cli
from tests.support.processes import durable, model_server, requests_in

MODEL = "offline/gpt-4o"


def _write(path: Path, ids: list[str]) -> None:
    lines = [{"id": i, "input": f"What is {n} + 1?", "target": str(n + 1)} for n, i in ids_n(ids)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def ids_n(ids: list[str]) -> list[tuple[int, str]]:
    """Each id with a number of its own (its question does not depend on its line)."""
    return [(int(i.removeprefix("q")), i) for i in ids]


def _run(env: dict[str, str], bench: Path, url: str, *extra: str) -> dict[str, object]:
    args = ["run", str(bench), "--model", MODEL, "--run-id", "moved", "--base-url", url]
    done = run_cli(env, *args, "--json", *extra)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(summary, dict)
    return summary


def test_a_deleted_or_moved_line_keeps_each_answer_with_its_sample(
    tmp_path: Path, settings: Settings
) -> None:
    env = child_env(settings)
    bench = tmp_path / "qs.jsonl"
    _write(bench, ["q0", "q1", "q2", "q3", "q4", "q5"])
    with model_server(tmp_path / "server", env, "--error-rate", "0") as (url, log):
        _run(env, bench, url)
        _write(bench, ["q0", "q1", "q3", "q5", "q4"])  # q2 deleted, q4 and q5 swapped
        before = len(requests_in(log))
        summary = _run(env, bench, url, "--accept-config-change")
        asked = requests_in(log)[before:]
    assert asked == [], "a sample with a durable answer was asked again"
    assert summary["records"] == summary["total_questions"] == 5
    latest = {r.sample_index: r for r in durable(settings, RunKey("moved", "qs", MODEL))}
    placed = {index: latest[index].sample_id for index in range(5)}
    assert placed == {0: "q0", 1: "q1", 2: "q3", 3: "q5", 4: "q4"}
    for record in latest.values():
        if record.sample_index < 5:
            assert record.input.endswith(f"What is {record.sample_id[1:]} + 1?")
