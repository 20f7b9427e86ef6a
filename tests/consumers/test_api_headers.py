"""HTTP details of the aggregator: security headers on every response, relative links, errors
that name the route asked, and the HTTPS key held to the Kafka key files' rule."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from resultlog.broker._tls import ensure_tls_files
from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.settings import Settings
from tests.support.cli import child_env, one_line_error, run_cli
from tests.support.kafka import write
from tests.support.page import OUTCOMES_A, OUTCOMES_B, RUN_A, RUN_B, known_records, run_path
from tests.support.waiting import wait_for

TOKEN = "s3cret-token-for-the-headers-test"
ROUTES = [
    "/",
    f"/page/run/{run_path(RUN_A)}",
    f"/page/compare?a={run_path(RUN_A)}&b={run_path(RUN_B)}",
    "/page/run/only-two/segments",
    "/static/page.js",
    "/static/page.css",
    "/runs",
    "/parts/runs",
    "/healthz",
    "/nowhere",
]


@pytest.fixture(scope="module")  # its tests only read: one aggregator serves them all
def two_runs(module_settings: Settings, module_base_url: str) -> str:
    """The API once runs A and B are served."""
    settings, base_url = module_settings, module_base_url
    write(settings, known_records(RUN_A, OUTCOMES_A) + known_records(RUN_B, OUTCOMES_B))
    wait_for(lambda: len(httpx.get(base_url + "/runs").json()) == 2 or None, "two runs")
    return base_url


@pytest.mark.parametrize("route", ROUTES)
def test_every_response_carries_a_csp_frame_protection_and_nosniff(
    two_runs: str, route: str
) -> None:
    answer = httpx.get(two_runs + route, timeout=10)
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    if answer.headers["content-type"].startswith("text/html") and answer.status_code == 200:
        scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", answer.text, re.S)
        assert scripts == [""] * len(scripts)  # only <script src=...></script>: nothing inline
        assert not re.search(r"\son[a-z]+\s*=", answer.text)  # no inline event handlers


def test_a_refused_request_carries_the_headers_too(aggregator: Aggregator) -> None:
    server = HttpServer(create_app(aggregator, token=SecretStr(TOKEN)), "127.0.0.1", 0)
    server.start_in_thread()
    try:
        answer = httpx.get(server.url + "/runs", timeout=5)
    finally:
        server.close()
    assert answer.status_code == 401
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_the_next_page_link_is_relative_whatever_the_host_header(two_runs: str) -> None:
    answer = httpx.get(two_runs + "/runs?limit=1", headers={"Host": "evil.example"}, timeout=5)
    assert answer.status_code == 200
    link = answer.headers["link"]
    assert "evil.example" not in link
    match = re.fullmatch(r'<(/runs\?limit=1&cursor=[A-Za-z0-9_-]+)>; rel="next"', link)
    assert match is not None, link
    following = httpx.get(two_runs + match.group(1), timeout=5)
    assert following.status_code == 200 and len(following.json()) == 1
    assert following.json() != answer.json()


@pytest.mark.parametrize(
    ("route", "named"),
    [
        ("/page/run/only-two/segments", "expected /page/run/{run_id}/{benchmark}/{model}"),
        ("/page/run/a/b/%ZZ", "expected /page/run/{run_id}/{benchmark}/{model}"),
        ("/page/run/a/b/%E2%80%AE", "expected /page/run/{run_id}/{benchmark}/{model}"),
        ("/parts/run/a/b", "expected /parts/run/{run_id}/{benchmark}/{model}"),
        ("/runs/a/b", "expected /runs/{run_id}/{benchmark}/{model}"),
    ],
)
def test_a_bad_path_s_error_names_the_route_asked(two_runs: str, route: str, named: str) -> None:
    answer = httpx.get(two_runs + route, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith(named), answer.json()


def test_an_https_key_readable_by_others_is_refused_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    files = ensure_tls_files(tmp_path / "tls")
    Path(files.keystore).chmod(0o644)
    env = child_env(
        settings,
        RESULTLOG_HTTP_TLS_CERTIFICATE=str(files.keystore),
        RESULTLOG_HTTP_TLS_KEY=str(files.keystore),
    )
    line = one_line_error(run_cli(env, "aggregator", "--http", "127.0.0.1:0"))
    assert line == (
        f"resultlog: error: RESULTLOG_HTTP_TLS_KEY {files.keystore} is readable by others "
        "(chmod 600 it)"
    )
