"""A task of the tests for real lm-eval: a YAML and a local JSON dataset of arithmetic."""

from __future__ import annotations

import json
import os
from pathlib import Path

from resultlog.producer.lm_eval._example import (
    CHOICES,
    DOCS,
    MC_TASK,
    TASK,
    write_mc_task,
    write_task,
)

__all__ = [
    "CHOICES",
    "DOCS",
    "MC_TASK",
    "TASK",
    "lm_eval_args",
    "offline_env",
    "results_file",
    "write_mc_task",
    "write_task",
]


def offline_env(env: dict[str, str], home: Path) -> dict[str, str]:
    """No network for Hugging Face; its caches under the test's directory."""
    return {
        **env,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(home / "hf"),
        "HF_DATASETS_CACHE": str(home / "hf" / "datasets"),
        "PATH": os.environ.get("PATH", ""),
    }


def lm_eval_args(base_url: str, include: Path, output: Path, *extra: str) -> list[str]:
    """lm-eval's arguments for the task through local-chat-completions."""
    return [
        "--model",
        "local-chat-completions",
        "--model_args",
        f"model=offline,base_url={base_url}/chat/completions,num_concurrent=1,max_retries=1",
        "--tasks",
        TASK,
        "--include_path",
        str(include),
        "--apply_chat_template",
        "--output_path",
        str(output),
        "--log_samples",
        *extra,
    ]


def results_file(output: Path) -> dict[str, object]:
    """lm-eval's newest results file under --output_path."""
    found = sorted(output.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)
    assert found, f"no results file under {output}"
    loaded: dict[str, object] = json.loads(found[-1].read_text())
    return loaded
