"""A running `resultlog up` as a child process: the lines it prints, the signal that stops it."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.waiting import wait_for

__all__ = ["Up", "running_up"]

START_S = 300.0  # a fresh broker on a loaded 2-core machine


class Up:
    """A running `resultlog up`: its process and the lines it printed so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def announced(self) -> tuple[str, str]:
        """The bootstrap address to export and the page URL, once both are printed."""
        wait_for(lambda: len(self.lines) >= 2 or self.process.poll() is not None, "up", START_S)
        assert self.process.poll() is None, self.process.stderr and self.process.stderr.read()
        export, page = self.lines[:2]
        assert export.startswith("export RESULTLOG_BOOTSTRAP_SERVERS=")
        assert page.startswith("runs page: http://")
        return export.split("=", 1)[1], page.split(": ", 1)[1]

    def stop(self, signum: signal.Signals) -> tuple[int, str]:
        """Send `signum`; the exit code and stderr."""
        self.process.send_signal(signum)
        _, stderr = self.process.communicate(timeout=120)
        return self.process.returncode, stderr


@contextmanager
def running_up(argv: list[str], env: dict[str, str]) -> Iterator[Up]:
    """`argv` (a `resultlog up` command) running; killed at the end if still running."""
    process = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Up(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
