"""Pinned artifacts come over real HTTP, verified, into a cache that is whole or absent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from resultlog.broker import Artifact, fetch_artifacts, format_manifest, read_manifest
from resultlog.errors import BrokerError
from tests.support.maven import artifact_of, closed_port_url, lay_out, serve_repository

JAR = artifact_of("org.example:small:1.0", b"a small jar" * 100)
TARBALL = artifact_of("org.example:app:2.1:tar.gz:all", b"a distribution" * 300)
OTHER = artifact_of("org.example.deep:other:0.3", b"another jar" * 50)


def _contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != ".complete"}


def _no_leftovers(parent: Path) -> None:
    assert [p.name for p in parent.iterdir() if p.name.startswith(".")] == []


def test_artifacts_are_downloaded_verified_and_then_served_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = lay_out(
        tmp_path / "repo", [(JAR, b"a small jar" * 100), (TARBALL, b"a distribution" * 300)]
    )
    cache = tmp_path / "cache" / "libs"
    with serve_repository(root) as url:
        monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", url + "/")
        assert fetch_artifacts([JAR, TARBALL], cache, what="test jars") == cache

    assert _contents(cache) == {
        "small-1.0.jar": b"a small jar" * 100,
        "app-2.1-all.tar.gz": b"a distribution" * 300,
    }
    _no_leftovers(cache.parent)
    monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", closed_port_url())
    assert fetch_artifacts([JAR, TARBALL], cache, what="test jars") == cache  # no network


def test_a_hash_mismatch_is_one_line_and_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = lay_out(tmp_path / "repo", [(JAR, b"a small jar" * 100), (OTHER, b"tampered")])
    cache = tmp_path / "cache" / "libs"
    with serve_repository(root) as url:
        monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", url)
        with pytest.raises(BrokerError) as raised:
            fetch_artifacts([JAR, OTHER], cache, what="test jars")

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{url}/{OTHER.path} does not match its pinned SHA-256 (")
    assert message.endswith("nothing was cached: check RESULTLOG_MAVEN_REPOSITORY or the network")
    assert not cache.exists()
    _no_leftovers(cache.parent)


def test_an_unreachable_repository_is_one_line_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = closed_port_url()
    monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", closed.replace("//", "//me:s3cret@"))
    cache = tmp_path / "cache" / "libs"

    with pytest.raises(BrokerError) as raised:
        fetch_artifacts([JAR], cache, what="test jars")

    message = str(raised.value)
    assert message.startswith(f"cannot download {closed}/{JAR.path}: ")
    assert message.endswith(
        "check the network, or name a reachable mirror in RESULTLOG_MAVEN_REPOSITORY"
    )
    assert "s3cret" not in message and "\n" not in message
    assert not cache.exists()


def test_a_file_the_repository_lacks_names_the_http_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = lay_out(tmp_path / "repo", [(JAR, b"a small jar" * 100)])
    with serve_repository(root) as url:
        monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", url)
        with pytest.raises(BrokerError, match=re.escape(f"{url}/{OTHER.path}: HTTP 404")):
            fetch_artifacts([JAR, OTHER], tmp_path / "cache" / "libs", what="test jars")


def test_a_new_manifest_downloads_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache" / "libs"
    with serve_repository(lay_out(tmp_path / "one", [(JAR, b"a small jar" * 100)])) as url:
        monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", url)
        fetch_artifacts([JAR], cache, what="test jars")
    # The second repository lacks JAR: it can only come from the cache.
    with serve_repository(lay_out(tmp_path / "two", [(OTHER, b"another jar" * 50)])) as url:
        monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", url)
        fetch_artifacts([JAR, OTHER], cache, what="test jars")

    assert set(_contents(cache)) == {"small-1.0.jar", "other-0.3.jar"}
    _no_leftovers(cache.parent)


def test_a_local_repository_serves_as_a_file_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = lay_out(tmp_path / "m2", [(JAR, b"a small jar" * 100)])
    monkeypatch.setenv("RESULTLOG_MAVEN_REPOSITORY", root.as_uri())
    cache = fetch_artifacts([JAR], tmp_path / "cache" / "libs", what="test jars")
    assert _contents(cache) == {"small-1.0.jar": b"a small jar" * 100}


def test_a_manifest_reads_back_what_was_written() -> None:
    text = format_manifest([JAR, TARBALL], ["a header"])
    assert text.splitlines()[0] == "# a header"
    assert TARBALL.coordinate == "org.example:app:2.1:tar.gz:all"
    assert read_manifest(text, "m") == (JAR, TARBALL)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("org.example:small 0123 5", "not `coordinate sha256 size`"),
        (f"org.example {'0' * 64} 5", "'org.example' is not group:artifact:version"),
        (f"org.example:small:1.0 {'0' * 64}", "not `coordinate sha256 size`"),
    ],
)
def test_a_malformed_manifest_line_is_named(line: str, problem: str) -> None:
    with pytest.raises(BrokerError, match=re.escape(f"m:2: {problem}")):
        read_manifest(f"# header\n{line}\n", "m")


def test_the_coordinate_of_a_plain_jar_is_short() -> None:
    assert Artifact("g", "a", "1").coordinate == "g:a:1"
    assert Artifact("g.h", "a", "1").path == "g/h/a/1/a-1.jar"
