"""The HTTP API behind RESULTLOG_HTTP_TOKEN (and optionally TLS): who gets in, what leaks."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from resultlog.broker._tls import ensure_tls_files
from resultlog.consumers.aggregator import Aggregator
from resultlog.settings import Settings
from tests.support.aggregator import serving
from tests.support.cli import child_env, cli_argv, one_line_error, run_cli
from tests.support.waiting import wait_for

TOKEN = "s3cret-token-for-the-read-api"


@pytest.fixture(scope="module")  # its tests only read: one aggregator serves them all
def guarded(module_aggregator: Aggregator) -> Iterator[str]:
    """The aggregator's HTTP API behind TOKEN, once caught up."""
    with serving(module_aggregator, TOKEN) as url:
        yield url


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong-token-of-the-same-size!!"}, 401),
        ({"Authorization": TOKEN}, 401),
        ({"Authorization": f"Basic {TOKEN}"}, 401),
        ({"Authorization": f"Bearer{TOKEN}"}, 401),
        ({"Authorization": f"Bearer {TOKEN}x"}, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, 200),
        ({"Authorization": f"bearer {TOKEN}"}, 200),  # the scheme is case-insensitive
        ({"Authorization": f"BEARER {TOKEN}"}, 200),
    ],
)
@pytest.mark.parametrize("route", ["/runs", "/metrics", "/runs/r/arith/m"])
def test_every_route_but_healthz_wants_the_token(
    guarded: str, headers: dict[str, str], status: int, route: str
) -> None:
    answer = httpx.get(guarded + route, headers=headers, timeout=5)
    if status == 401:
        assert answer.status_code == 401
        assert answer.json()["error"] == "unauthorized"
        assert answer.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in answer.text
    else:
        assert answer.status_code in (200, 404)  # in: the run may not exist


def test_healthz_stays_open(guarded: str) -> None:
    answer = httpx.get(guarded + "/healthz", timeout=5)
    assert answer.status_code in (200, 503) and "ready" in answer.json()


def test_the_command_serves_https_with_a_token_and_never_prints_it(
    settings: Settings, tmp_path: Path
) -> None:
    files = ensure_tls_files(tmp_path / "tls")
    env = child_env(
        settings,
        RESULTLOG_HTTP_TOKEN=TOKEN,
        RESULTLOG_HTTP_TLS_CERTIFICATE=str(files.keystore),
        RESULTLOG_HTTP_TLS_KEY=str(files.keystore),
    )
    command = cli_argv("-v", "aggregator", "--http", "127.0.0.1:0")
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("aggregator serving https://127.0.0.1:"), line
        url = line.split()[-1]
        client = httpx.Client(verify=ssl.create_default_context(cafile=files.ca), timeout=5)
        wait_for(lambda: client.get(url + "/healthz").status_code == 200 or None, "ready")
        assert client.get(url + "/runs").status_code == 401
        good = client.get(url + "/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert good.status_code == 200 and good.json() == []
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert TOKEN not in line + out + err


def test_bad_http_tls_files_are_one_line(settings: Settings, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    env = child_env(
        settings, RESULTLOG_HTTP_TLS_CERTIFICATE=missing, RESULTLOG_HTTP_TLS_KEY=missing
    )
    done = run_cli(env, "aggregator", "--http", "127.0.0.1:0")
    assert done.returncode == 1
    assert one_line_error(done).startswith(
        "resultlog: error: RESULTLOG_HTTP_TLS_CERTIFICATE/RESULTLOG_HTTP_TLS_KEY do not load"
    )
    half = child_env(settings, RESULTLOG_HTTP_TLS_CERTIFICATE=missing)
    assert one_line_error(run_cli(half, "aggregator")) == (
        "resultlog: error: set both RESULTLOG_HTTP_TLS_CERTIFICATE and RESULTLOG_HTTP_TLS_KEY"
    )


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (TOKEN + "\n", "RESULTLOG_HTTP_TOKEN has whitespace around it"),
        (" " + TOKEN, "RESULTLOG_HTTP_TOKEN has whitespace around it"),
        (TOKEN + "-é", "RESULTLOG_HTTP_TOKEN must be printable ASCII"),
        (TOKEN + "\x7f", "RESULTLOG_HTTP_TOKEN must be printable ASCII"),
        ("short-token", "at least 16 characters"),
    ],
)
def test_a_token_no_client_can_send_is_refused_at_start(
    settings: Settings, token: str, reason: str
) -> None:
    done = run_cli(
        child_env(settings, RESULTLOG_HTTP_TOKEN=token), "aggregator", "--http", "127.0.0.1:0"
    )
    line = one_line_error(done)
    assert line.startswith("resultlog: error: invalid http_token: ") and reason in line, line
    assert TOKEN not in line
