"""The group's members, asked through a child process of the aggregator's own.

librdkafka's admin client can abort its whole process when a request to a group's
coordinator times out while that broker is down: an assertion on the request's reference
count (`rd_kafka_enq_once_del_source_return`), seen when a broker was killed under a running
aggregator. The standby keeper asks through a child instead, which may die in its place: it
is started again at the next question, and meanwhile the keeper waits for a stable group.
"""

from __future__ import annotations

import json
import logging
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from resultlog.consumers.aggregator.standby._placement import GroupView, describe_group

__all__ = ["GroupDescriber"]

log = logging.getLogger(__name__)
_ANSWER_S = 20.0  # the child gives the broker up to 10 s (`describe_group`)
_CLOSE_S = 5.0
_RESTART_S = 30.0  # after a child died: one that cannot start must not spin


class GroupDescriber:
    """Describes consumer groups through a child process, started again whenever it died."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        # The settings' librdkafka configuration: plain values only (no logger callback).
        self._config = {k: v for k, v in config.items() if isinstance(v, str | int | float)}
        self._child: subprocess.Popen[str] | None = None
        self._start_at = 0.0  # no child is started before (one died lately)

    def describe(self, group: str, topic: str) -> GroupView | None:
        """The group's members and their partitions of `topic`; None while it rebalances,
        if the broker did not answer, or if the child died asking (or lately)."""
        if self._child is None and time.monotonic() < self._start_at:
            return None
        child = self._running()
        assert child.stdin is not None and child.stdout is not None  # both piped
        try:
            child.stdin.write(json.dumps({"group": group, "topic": topic}) + "\n")
            child.stdin.flush()
            ready, _, _ = select.select([child.stdout], [], [], _ANSWER_S)
            line = child.stdout.readline() if ready else ""
        except OSError:  # its stdin closed: it is gone
            line = ""
        if not line:
            self._lost(child)
            return None
        return _view(json.loads(line))

    def close(self) -> None:
        """Stop the child (it ends at the end of its input)."""
        child, self._child = self._child, None
        if child is None:
            return
        try:
            if child.stdin is not None:
                child.stdin.close()
            child.wait(_CLOSE_S)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait()
        finally:
            if child.stdout is not None:
                child.stdout.close()

    def _running(self) -> subprocess.Popen[str]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        child = subprocess.Popen(
            [sys.executable, "-c", f"from {__name__} import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None  # piped
        child.stdin.write(json.dumps(self._config) + "\n")  # secrets over a pipe, never argv
        child.stdin.flush()
        self._child = child
        return child

    def _lost(self, child: subprocess.Popen[str]) -> None:
        """The child did not answer: end it; the next question starts another."""
        if child.poll() is None:
            child.kill()
        code = child.wait()
        if child.stdout is not None:
            child.stdout.close()
        self._child = None
        self._start_at = time.monotonic() + _RESTART_S
        log.warning(
            "the consumer group describer exited (%s); asking again in %.0fs", code, _RESTART_S
        )


def _view(found: dict[str, Any] | None) -> GroupView | None:
    if found is None:
        return None
    partitions = {name: frozenset(held) for name, held in found["partitions"].items()}
    return GroupView(found["names"], partitions)


def serve() -> None:
    """The child: answer one question per line of stdin, the first line its configuration."""
    from confluent_kafka.admin import AdminClient

    # Ctrl-C reaches the whole process group: the parent stops, and closes this one's input.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet = logging.getLogger("resultlog.describer.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # its chatter during outages is the parent's to say
    config: dict[str, Any] = {**json.loads(sys.stdin.readline()), "logger": quiet}
    admin = AdminClient(config)
    for line in sys.stdin:
        asked = json.loads(line)
        view = describe_group(admin, asked["group"], asked["topic"])
        found = None
        if view is not None:
            held = {name: sorted(partitions) for name, partitions in view.partitions.items()}
            found = {"names": dict(view.names), "partitions": held}
        try:
            print(json.dumps(found), flush=True)
        except BrokenPipeError:  # the parent is gone
            return
