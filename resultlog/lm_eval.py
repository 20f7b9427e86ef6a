"""lm-evaluation-harness on the log from Python: `resultlog.lm_eval.simple_evaluate(run_id, ...)`.

Needs `pip install 'resultlog[lm-eval]'`; see resultlog.producer.lm_eval.
"""

from resultlog.producer.lm_eval import LmEvalBudgetError, LmEvalError, recording, simple_evaluate

__all__ = ["LmEvalBudgetError", "LmEvalError", "recording", "simple_evaluate"]
