"""lm-evaluation-harness on the log: every answered request durable as it completes.

`resultlog lm-eval --run-id R -- <lm_eval arguments>` runs lm-eval's own CLI; `recording`
and `simple_evaluate` do the same from Python. Installed with `pip install 'resultlog[lm-eval]'`.
"""

from resultlog.producer.lm_eval._answers import Answer, AnswerLog
from resultlog.producer.lm_eval._errors import LmEvalBudgetError, LmEvalError
from resultlog.producer.lm_eval._session import Recording, recording, simple_evaluate

__all__ = [
    "Answer",
    "AnswerLog",
    "LmEvalBudgetError",
    "LmEvalError",
    "Recording",
    "recording",
    "simple_evaluate",
]
