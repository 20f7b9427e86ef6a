"""lm-evaluation-harness on the log from Python: `resultlog.lm_eval.simple_evaluate(run_id, ...)`.

Needs `pip install 'resultlog[lm-eval]'`; see resultlog.producer.lm_eval.
`python -m resultlog.lm_eval DIR` writes the documentation's example tasks into DIR.
"""

import sys
from pathlib import Path

from resultlog.producer.lm_eval import LmEvalBudgetError, LmEvalError, recording, simple_evaluate
from resultlog.producer.lm_eval._example import write_example_tasks

__all__ = [
    "LmEvalBudgetError",
    "LmEvalError",
    "recording",
    "simple_evaluate",
    "write_example_tasks",
]

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m resultlog.lm_eval DIR  (writes the example tasks into DIR)")
    print(write_example_tasks(Path(sys.argv[1])))
