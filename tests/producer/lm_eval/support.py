"""A task of the tests for real lm-eval: a YAML and a local JSON dataset of arithmetic."""

from __future__ import annotations

import json
import os
from pathlib import Path

TASK = "resultlog_arith"
DOCS = 40

_YAML = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "What is {{{{question}}}}?"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 32
  do_sample: false
filter_list:
  - name: extract
    filter:
      - function: regex
        regex_pattern: "The answer is (-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: {version}
"""


def write_task(directory: Path, *, version: float = 1.0) -> Path:
    """The task's YAML and its dataset in `directory` (lm-eval's --include_path)."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "arith.jsonl"
    rows = [{"question": f"{i} + {i * 3 % 17}", "answer": str(i + i * 3 % 17)} for i in range(DOCS)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (directory / f"{TASK}.yaml").write_text(_YAML.format(task=TASK, data=data, version=version))
    return directory


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
