"""The offline model server over real loopback HTTP: outcomes, determinism, overrides, CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from resultlog.producer.offline import (
    Behavior,
    ModelServer,
    expected_outcome,
    generation_id,
    is_expected_degraded,
)
from tests.support.offline import pair_with

REPO = Path(__file__).resolve().parents[2]


def chat(
    client: httpx.Client, base_url: str, sample_id: str | None, epoch: int = 0, expr: str = "6 * 7"
) -> httpx.Response:
    """POST one chat-completions request, stamped unless sample_id is None."""
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": f"What is {expr}?"}],
    }
    if sample_id is not None:
        body["x_bench"] = {"sample_id": sample_id, "sample_epoch": epoch}
    return client.post(f"{base_url}/chat/completions", json=body)


def outcome_of(response: httpx.Response) -> tuple[int, str | None, str | None]:
    """(status, content, generation id) of a response."""
    if response.status_code != 200:
        return response.status_code, None, None
    data = response.json()
    return 200, data["choices"][0]["message"]["content"], data["id"]


def test_serves_on_an_os_chosen_loopback_port(offline_server: ModelServer) -> None:
    assert offline_server.port > 0
    assert offline_server.base_url == f"http://127.0.0.1:{offline_server.port}/v1"
    models = httpx.get(f"{offline_server.base_url}/models").json()
    assert models["data"] == [{"id": "resultlog/offline-arith", "object": "model"}]


def test_answers_the_arithmetic_in_the_last_user_message(offline_server: ModelServer) -> None:
    with httpx.Client() as client:
        status, text, gen_id = outcome_of(
            chat(client, offline_server.base_url, pair_with("correct"))
        )
    assert (status, text) == (200, "The answer is 42.")
    assert gen_id == generation_id(pair_with("correct"), 0)


@pytest.mark.parametrize(
    ("expr", "answer"),
    [
        ("2 + 3 * 4", "The answer is 14."),
        ("10 - 4 - 3", "The answer is 3."),
        ("-5 * 3 + 1", "The answer is -14."),
        ("007 + 1", "The answer is 8."),
        ("1 + 1, no: 20 * 3 - 7", "The answer is 53."),
        ("the capital of France", "I don't know."),
    ],
)
def test_answers_known_expressions(offline_server: ModelServer, expr: str, answer: str) -> None:
    with httpx.Client() as client:
        reply = chat(client, offline_server.base_url, pair_with("correct"), expr=expr)
    assert outcome_of(reply)[:2] == (200, answer)


def test_wrong_answers_are_wrong(offline_server: ModelServer) -> None:
    with httpx.Client() as client:
        _, text, _ = outcome_of(chat(client, offline_server.base_url, pair_with("incorrect")))
    assert text is not None and text.startswith("The answer is ") and text != "The answer is 42."


def test_outcomes_follow_the_hash_and_match_the_expected_rates(offline_server: ModelServer) -> None:
    pairs = [(f"arith-{i:04d}", epoch) for i in range(400) for epoch in range(2)]
    expected_status = {"rate_limited": 429, "server_error": 500, "correct": 200, "incorrect": 200}
    with httpx.Client() as client:
        for sample_id, epoch in pairs:
            status, text, _ = outcome_of(chat(client, offline_server.base_url, sample_id, epoch))
            outcome = expected_outcome(sample_id, epoch)
            assert status == expected_status[outcome]
            if status == 200:
                assert (text == "The answer is 42.") == (outcome == "correct")
    tally = Counter(expected_outcome(s, e) for s, e in pairs)
    assert 0.80 <= tally["correct"] / len(pairs) <= 0.92
    assert 0.06 <= tally["incorrect"] / len(pairs) <= 0.14
    degraded = tally["rate_limited"] + tally["server_error"]
    assert tally["rate_limited"] > 0 and tally["server_error"] > 0
    assert 0.005 <= degraded / len(pairs) <= 0.05
    assert degraded == sum(is_expected_degraded(s, e) for s, e in pairs)


def test_epochs_of_one_sample_are_decided_independently() -> None:
    outcomes = {expected_outcome("arith-0001", epoch) for epoch in range(60)}
    assert {"correct", "incorrect"} <= outcomes


def test_two_servers_give_identical_outcomes() -> None:
    pairs = [(f"s{i}", i % 3) for i in range(150)]
    results = []
    for _ in range(2):
        with ModelServer(latency_s=0.0) as server, httpx.Client() as client:
            results.append([outcome_of(chat(client, server.base_url, s, e)) for s, e in pairs])
    assert results[0] == results[1]


def test_a_different_seed_changes_the_outcomes() -> None:
    pairs = [(f"s{i}", 0) for i in range(200)]
    first = [expected_outcome(s, e) for s, e in pairs]
    assert first != [expected_outcome(s, e, seed=1) for s, e in pairs]


def test_without_x_bench_the_prompt_decides(offline_server: ModelServer) -> None:
    with httpx.Client() as client:
        first = [
            outcome_of(chat(client, offline_server.base_url, None, expr=f"{i} + 1"))
            for i in range(40)
        ]
        again = [
            outcome_of(chat(client, offline_server.base_url, None, expr=f"{i} + 1"))
            for i in range(40)
        ]
    assert first == again
    assert all(r.sample_id is None and r.epoch is None for r in offline_server.requests)


def test_overrides_are_consumed_in_order_and_the_last_repeats(offline_server: ModelServer) -> None:
    offline_server.override("o", 2, Behavior(status=503), Behavior(answer="seven"))
    with httpx.Client() as client:
        statuses = [outcome_of(chat(client, offline_server.base_url, "o", 2))[:2] for _ in range(3)]
        assert statuses == [(503, None), (200, "seven"), (200, "seven")]
        assert outcome_of(chat(client, offline_server.base_url, "o", 1))[0] in (200, 429, 500)
        offline_server.clear_overrides()
        assert outcome_of(chat(client, offline_server.base_url, "o", 2))[0] == {
            "rate_limited": 429,
            "server_error": 500,
        }.get(expected_outcome("o", 2), 200)
    assert offline_server.request_count("o", 2) == 4
    with pytest.raises(ValueError):
        offline_server.override("o", 0)


def test_retry_after_and_error_bodies(offline_server: ModelServer) -> None:
    offline_server.override("ra", 0, Behavior(status=429, retry_after=2))
    with httpx.Client() as client:
        response = chat(client, offline_server.base_url, "ra")
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["code"] == 429


def test_bad_requests_are_rejected(offline_server: ModelServer) -> None:
    url = offline_server.base_url
    with httpx.Client() as client:
        assert client.post(f"{url}/chat/completions", content=b"{nope").status_code == 400
        assert client.post(f"{url}/chat/completions", json={"model": "m"}).status_code == 400
        assert client.get(f"{url}/chat/completions").status_code == 405
        assert client.get(f"{url}/nothing").status_code == 404
    assert offline_server.requests == []


def test_request_log_is_complete_under_concurrent_clients(offline_server: ModelServer) -> None:
    def worker(w: int) -> None:
        with httpx.Client() as client:
            for i in range(20):
                chat(client, offline_server.base_url, f"w{w}", i)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = offline_server.request_counts()
    assert sum(counts.values()) == 160
    assert all(counts[(f"w{w}", i)] == 1 for w in range(8) for i in range(20))


def test_stop_releases_hanging_requests() -> None:
    server = ModelServer(latency_s=0.0).start()
    server.override("h", 0, Behavior(fault="hang"))
    errors: list[Exception] = []

    def call() -> None:
        try:
            with httpx.Client(timeout=30) as client:
                chat(client, server.base_url, "h")
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    while server.request_count("h", 0) == 0:
        time.sleep(0.01)
    started = time.perf_counter()
    server.stop()
    thread.join(5)
    assert time.perf_counter() - started < 5
    assert len(errors) == 1
    server.stop()  # idempotent


def test_request_log_file_gets_one_line_per_request(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with ModelServer(latency_s=0.0, request_log=log) as server, httpx.Client() as client:
        chat(client, server.base_url, "a", 0)
        chat(client, server.base_url, "a", 1)
        chat(client, server.base_url, None)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == [
        {"sample_id": "a", "epoch": 0, "model": "m"},
        {"sample_id": "a", "epoch": 1, "model": "m"},
        {"sample_id": None, "epoch": None, "model": "m"},
    ]


def test_standalone_server_writes_its_port_and_logs_requests(tmp_path: Path) -> None:
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    command = [
        sys.executable,
        "-m",
        "resultlog.cli",
        "model-server",
        "--port-file",
        str(port_file),
        "--request-log",
        str(log),
        "--latency-ms",
        "0",
    ]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no port file within 20 s"
            time.sleep(0.05)
        base_url = f"http://127.0.0.1:{int(port_file.read_text())}/v1"
        with httpx.Client() as client:
            status, text, _ = outcome_of(chat(client, base_url, pair_with("correct"), 0))
            chat(client, base_url, "b", 3)
        assert (status, text) == (200, "The answer is 42.")
        # Flushed per line: readable while the server is still running.
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        assert lines == [
            {"sample_id": pair_with("correct"), "epoch": 0, "model": "m"},
            {"sample_id": "b", "epoch": 3, "model": "m"},
        ]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(10)
    assert code == 0
