#!/usr/bin/env bash
# Builds STAND-IN images for a machine where no image registry answers, for testing there only:
#
#   resultlog-local/kafka:4.1.1   stands in for apache/kafka:4.1.1
#   resultlog-local/python:3.11   stands in for python:3.11-slim
#
# Both are built from Debian's packages on a bookworm root made by debootstrap from the
# machine's Debian mirror (`docker import`ed as resultlog-local/debian:bookworm), the Kafka one
# with the broker's jars fetched and hash-checked as `resultlog kafka up` fetches them. Anyone
# who can pull the official images should use those: they are the defaults of the compose files
# and of the tests. Run again, it reuses the root and Docker's layer cache (seconds).
#
#   scripts/images.sh      then: export RESULTLOG_KAFKA_IMAGE=resultlog-local/kafka:4.1.1 \
#                                       RESULTLOG_PYTHON_IMAGE=resultlog-local/python:3.11
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=resultlog-local/debian:bookworm
KAFKA=resultlog-local/kafka:4.1.1
PYTHON=resultlog-local/python:3.11
STAND_INS=compose/stand-ins
PY=${PY:-.venv/bin/python}

say() { echo "images: $*" >&2; }

# docker build TAG CONTEXT, its output shown only when it fails; the context removed.
build() {
  local tag=$1 context=$2 status=0
  docker build --build-arg "BASE=$BASE" -t "$tag" "$context" >"$context.log" 2>&1 || status=$?
  [ "$status" -eq 0 ] || tail -40 "$context.log" >&2
  rm -rf "$context" "$context.log"
  return "$status"
}

# The first Debian mirror apt is configured with (deb822 or one-line sources).
debian_mirror() {
  local found
  found=$(sed -n 's|^URIs: *\(http[^ ]*/debian\)/*$|\1|p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [ -n "$found" ] || found=$(sed -n 's|^deb \(http[^ ]*/debian\)/* bookworm .*|\1|p' /etc/apt/sources.list 2>/dev/null | head -1)
  echo "${found:-http://deb.debian.org/debian}"
}

base_image() {
  docker image inspect "$BASE" >/dev/null 2>&1 && return
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  local root mirror
  root=$(mktemp -d -t resultlog-rootfs-XXXXXX)
  mirror=$(debian_mirror)
  say "debootstrap --variant=minbase bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; rm -rf "$root" "$root.log"; return 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
  rm -rf "$root" "$root.log"
  say "built $BASE"
}

kafka_image() {
  local context
  context=$(mktemp -d -t resultlog-kafka-image-XXXXXX)
  cp -r "$STAND_INS/kafka/." "$context"
  mkdir "$context/libs"
  # The broker's class path as the launcher has it, and the tools beside it: both verified.
  "$PY" - "$context/libs" "$STAND_INS/kafka/kafka-tools-4.1.1.jars" <<'PY'
import shutil
import sys
from pathlib import Path

from resultlog.broker import fetch_artifacts, fetch_kafka_jars, jar_cache_dir, read_manifest

libs, manifest = Path(sys.argv[1]), Path(sys.argv[2])
tools = fetch_artifacts(
    read_manifest(manifest.read_text(), manifest.name),
    jar_cache_dir().parent / "tools-libs",
    what="Apache Kafka's tools",
)
for folder in (fetch_kafka_jars(), tools):
    for jar in folder.glob("*.jar"):
        shutil.copy2(jar, libs / jar.name)
PY
  build "$KAFKA" "$context"
  say "built $KAFKA (stand-in for apache/kafka:4.1.1, for testing here only)"
}

python_image() {
  local context
  context=$(mktemp -d -t resultlog-python-image-XXXXXX)
  cp -r "$STAND_INS/python/." "$context"
  # This machine's own certificate authorities (an HTTPS proxy's), so pip reaches PyPI.
  mkdir "$context/ca"
  cp /usr/local/share/ca-certificates/*.crt "$context/ca/" 2>/dev/null || true
  build "$PYTHON" "$context"
  say "built $PYTHON (stand-in for python:3.11-slim, for testing here only)"
}

base_image
kafka_image
python_image
echo "export RESULTLOG_KAFKA_IMAGE=$KAFKA RESULTLOG_PYTHON_IMAGE=$PYTHON"
