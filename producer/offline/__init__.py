"""The offline model: an OpenAI chat-completions server on loopback whose outcomes are hashed.

Each (sample_id, epoch), read from the request's `x_bench` (or a hash of the prompt when
absent), gets a stable outcome: mostly the right answer to the arithmetic in the last
user message, some wrong, a fixed few a persistent 429 or 500. Tests can override the
behaviour per pair and read the request log; `expected_outcome` predicts the default.
"""

from typing import TYPE_CHECKING

from resultlog._lazy import lazy_exports

# Each name is imported where it is first used (resultlog._lazy): these imports say from where.
if TYPE_CHECKING:
    from resultlog.producer.offline._app import Behavior, Fault, LoggedRequest
    from resultlog.producer.offline._cli import add_arguments, serve
    from resultlog.producer.offline._model import (
        Outcome,
        expected_outcome,
        generation_id,
        is_expected_degraded,
    )
    from resultlog.producer.offline._server import ModelServer

__all__ = [
    "Behavior",
    "Fault",
    "LoggedRequest",
    "ModelServer",
    "Outcome",
    "add_arguments",
    "expected_outcome",
    "generation_id",
    "is_expected_degraded",
    "serve",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
