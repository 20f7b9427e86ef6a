"""The lm-eval page's example tasks: a YAML and a local JSON dataset of 40 sums each, one
answered in words (`resultlog_arith`), one by log-likelihoods (`resultlog_arith_mc`).

`python -m resultlog.lm_eval DIR` writes both into DIR (lm-eval's `--include_path`); the
tests use the same tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "CHOICES",
    "DOCS",
    "MC_TASK",
    "TASK",
    "write_example_tasks",
    "write_mc_task",
    "write_task",
]

TASK = "resultlog_arith"
DOCS = 40

# What both tasks share: a local JSON dataset (lm-eval's `json` builder, no network).
_SOURCE = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
metadata:
  version: {version}
"""

_YAML = """\
output_type: generate_until
doc_to_text: "What is {{question}}?"
doc_to_target: "{{answer}}"
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
"""


def write_task(directory: Path, *, version: float = 1.0) -> Path:
    """The task's YAML and its dataset in `directory` (lm-eval's --include_path)."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "arith.jsonl"
    rows = [{"question": f"{i} + {i * 3 % 17}", "answer": str(i + i * 3 % 17)} for i in range(DOCS)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    source = _SOURCE.format(task=TASK, data=data, version=version)
    (directory / f"{TASK}.yaml").write_text(source + _YAML)
    return directory


_MC_YAML = """\
output_type: multiple_choice
doc_to_text: "What is {{question}}? Answer:"
doc_to_choice: "{{choices}}"
doc_to_target: "{{label}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

MC_TASK = "resultlog_arith_mc"
CHOICES = 3


def write_mc_task(directory: Path) -> Path:
    """A multiple-choice task (log-likelihoods) of the same sums, the right choice rotating."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "arith_mc.jsonl"
    rows = []
    for i in range(DOCS):
        right = i + i * 3 % 17
        label = i % CHOICES
        choices = [str(right + offset - label) for offset in range(CHOICES)]
        rows.append({"question": f"{i} + {i * 3 % 17}", "choices": choices, "label": label})
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    source = _SOURCE.format(task=MC_TASK, data=data, version=1.0)
    (directory / f"{MC_TASK}.yaml").write_text(source + _MC_YAML)
    return directory


def write_example_tasks(directory: Path) -> Path:
    """Both tasks in `directory`."""
    write_task(directory)
    return write_mc_task(directory)
