"""The aggregator's HTTP side: the JSON read API, the runs page and the hardened server."""

from resultlog.consumers.aggregator.web._api import (
    BadRequestError,
    create_app,
    run_key_from_path,
)
from resultlog.consumers.aggregator.web._http import HttpServer

__all__ = [
    "BadRequestError",
    "HttpServer",
    "create_app",
    "run_key_from_path",
]
