"""Write (or check) a jar manifest from Maven's own resolution: coordinates, SHA-256, sizes.

The launcher downloads what a manifest lists with plain HTTP and needs no Maven; this script
is the one place Maven runs, when a pinned version changes:

    .venv/bin/python scripts/jar_manifest.py kafka            # rewrite the broker's manifest
    .venv/bin/python scripts/jar_manifest.py --check kafka    # exit 1 if it differs

Maven resolves through the user's own set-up (settings.xml, mirrors, local repository); each
file is hashed where Maven put it.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from resultlog.broker import KAFKA_VERSION, Artifact, format_manifest, read_manifest

REPO = Path(__file__).resolve().parent.parent
LOG4J_VERSION = "2.24.3"
APICURIO_VERSION = "3.3.3"
# name: (root coordinates, with their runtime dependencies?, manifest file, what it is)
TARGETS = {
    # kafka_2.13 brings log4j-core and slf4j-api 1.7 but no slf4j binding, so the broker
    # would log nothing; the log4j2 binding for slf4j 1.x routes it to log4j-core.
    "kafka": (
        [
            f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
            f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
        ],
        True,
        REPO / "resultlog" / "broker" / f"kafka-{KAFKA_VERSION}.jars",
        f"the class path of the Apache Kafka {KAFKA_VERSION} broker",
    ),
    # The `all` distribution Apicurio publishes beside its app, for the registry tests.
    "apicurio": (
        [f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"],
        False,
        REPO / "tests" / "support" / f"apicurio-{APICURIO_VERSION}.jars",
        f"the Apicurio Registry {APICURIO_VERSION} distribution of the registry tests",
    ),
}
# Named in full: Maven then needs no plugin-prefix metadata, and every machine runs one version.
_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_FIELDS = ("groupId", "artifactId", "version", "type", "classifier")
_NO_TRANSITIVES = (
    "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
)
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>resultlog</groupId><artifactId>manifest</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>{dependencies}</dependencies>
</project>
"""
# dependency:list prints group:artifact:type[:classifier]:version:scope:/absolute/path
_RESOLVED = re.compile(
    r"^\s*(?P<group>[^:\s]+):(?P<artifact>[^:\s]+):(?P<type>[^:\s]+)(?::(?P<classifier>[^:\s]+))?"
    r":(?P<version>[^:\s]+):(?:compile|runtime):(?P<path>/\S+)"
)


def resolve(roots: list[str], *, transitive: bool) -> list[Artifact]:
    """The artifacts Maven resolves for `roots` (runtime scope), hashed where Maven put them."""
    mvn = shutil.which("mvn")
    if mvn is None:
        sys.exit("jar_manifest: mvn not found on PATH: Maven resolves the manifest's artifacts")
    with tempfile.TemporaryDirectory(prefix="jar-manifest-") as work:
        pom, listing = Path(work) / "pom.xml", Path(work) / "resolved.txt"
        pom.write_text(_POM.format(dependencies="".join(_dependency(r, transitive) for r in roots)))
        command = [mvn, "-q", "-B", "-f", str(pom), f"{_PLUGIN}:list", "-DincludeScope=runtime"]
        command += ["-DoutputAbsoluteArtifactFilename=true", f"-DoutputFile={listing}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"jar_manifest: Maven failed:\n{done.stdout}{done.stderr}")
        lines = listing.read_text().splitlines()
    artifacts = [_artifact(match) for line in lines if (match := _RESOLVED.match(line))]
    return sorted(artifacts, key=lambda a: a.coordinate)


def _dependency(coordinate: str, transitive: bool) -> str:
    fields = zip(_FIELDS, coordinate.split(":"), strict=False)
    xml = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in fields)
    return f"<dependency>{xml}{'' if transitive else _NO_TRANSITIVES}</dependency>"


def _artifact(match: re.Match[str]) -> Artifact:
    path = Path(match["path"])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Artifact(
        group=match["group"],
        artifact=match["artifact"],
        version=match["version"],
        extension=match["type"],
        classifier=match["classifier"] or "",
        sha256=digest,
        size=path.stat().st_size,
    )


def main() -> int:
    """Write the named manifest, or with --check compare it with a fresh resolution."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=sorted(TARGETS), help="which manifest")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    roots, transitive, path, what = TARGETS[args.target]
    header = [
        f"The files of {what}: coordinate, SHA-256, size in bytes.",
        "Generated by scripts/jar_manifest.py from Maven's resolution of "
        + " ".join(roots)
        + "; do not edit.",
    ]
    text = format_manifest(resolve(roots, transitive=transitive), header)
    if not args.check:
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}: {len(read_manifest(text, str(path)))} files")
        return 0
    current = path.read_text() if path.exists() else ""
    if current == text:
        print(f"{path.relative_to(REPO)} matches Maven's resolution")
        return 0
    diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "shipped", "resolved")
    print("\n".join(diff))
    return 1


if __name__ == "__main__":
    sys.exit(main())
