"""The TypeScript writer bound to the results topic it started on: re-created between two
parts of a run, the writer stops with one line naming the topic; no success is claimed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from resultlog.settings import Settings
from tests.support.aggregator_process import recreate_results_topic


def test_a_typescript_writer_stops_when_its_topic_is_recreated(
    ts_client: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    """Five records acknowledged, the topic re-created, the sixth acknowledged at an offset
    below them: exit 2, one line naming the topic, nothing said written."""
    script = ts_client / "dist" / "test" / "writeInTwoParts.js"
    writer = subprocess.Popen(
        ["node", str(script), "--run-id", "ts-bound", "--records", "10"],
        env=cli_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().strip() == "half"
        recreate_results_topic(settings)
        writer.stdin.write("go on\n")
        writer.stdin.flush()
        stdout, stderr = writer.communicate(timeout=120)
    finally:
        writer.kill()
    lines = stderr.strip().splitlines()
    topic = settings.results_topic
    assert writer.returncode == 2, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith(
        f"writeInTwoParts: error: results topic {topic} was deleted and re-created"
    ), lines[0]
    assert "run again" in lines[0] and "wrote" not in stdout, stdout
