"""The shipped jar manifests are what Maven resolves for the pinned versions."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from resultlog.broker import KAFKA_VERSION, kafka_manifest, read_manifest

REPO = Path(__file__).resolve().parents[2]
APICURIO = REPO / "tests" / "support" / "apicurio-3.3.3.jars"


@pytest.mark.slow  # Maven resolves every manifest
@pytest.mark.skipif(shutil.which("mvn") is None, reason="Maven is the reference resolution")
@pytest.mark.parametrize("target", ["kafka", "apicurio"])
def test_each_manifest_equals_maven_s_resolution(target: str) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "jar_manifest.py"), "--check", target],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("matches Maven's resolution")


def test_the_broker_manifest_is_kafka_s_server_class_path() -> None:
    manifest = kafka_manifest()
    coordinates = {a.coordinate for a in manifest}
    kafka = f"org.apache.kafka:%s:{KAFKA_VERSION}"
    for module in ("kafka_2.13", "kafka-clients", "kafka-server", "kafka-raft", "kafka-metadata"):
        assert kafka % module in coordinates
    # The slf4j 1.x binding beside log4j-core: without it the broker logs nothing.
    assert {a.artifact for a in manifest} >= {"log4j-slf4j-impl", "log4j-core", "slf4j-api"}
    assert len({a.artifact for a in manifest}) == len(manifest)  # one version of each
    assert all(a.extension == "jar" and a.size > 0 for a in manifest)
    assert len(manifest) == 46  # as Maven resolved them for this version


def test_the_registry_tests_pin_one_distribution() -> None:
    (tarball,) = read_manifest(APICURIO.read_text(), APICURIO.name)
    assert tarball.file_name == "apicurio-registry-app-3.3.3-all.tar.gz"
