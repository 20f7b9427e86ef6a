"""The Inspect AI plugin: publish an `inspect eval`'s results to resultlog, resume it from them.

Installed with `pip install 'resultlog[inspect]'`; Inspect loads the hooks through the
`inspect_ai` entry point (`resultlog.producer.inspect._registry`), registered as
`resultlog/publish`, and they publish when RESULTLOG_BOOTSTRAP_SERVERS is set.
"""

from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._hooks import HOOKS_NAME
from resultlog.producer.inspect._import import ImportConflictError, ImportedRun, import_logs
from resultlog.producer.inspect._resume import ResumedTask, resume_eval
from resultlog.producer.inspect._task import RUN_ID_ENV, RUN_METADATA

__all__ = [
    "HOOKS_NAME",
    "RUN_ID_ENV",
    "RUN_METADATA",
    "ImportConflictError",
    "ImportedRun",
    "InspectPluginError",
    "ResumedTask",
    "import_logs",
    "resume_eval",
]
