"""An event-sourced results log on Kafka for LLM evaluation harnesses."""

from typing import TYPE_CHECKING

from resultlog._hotpath import fold_path, install

# Before any module of the fold is imported: it chooses between the compiled ones and their twins.
install()

if TYPE_CHECKING:
    from resultlog.errors import ResultLogError

__all__ = ["ResultLogError", "fold_path"]


def __getattr__(name: str) -> object:
    """The root of every error resultlog raises, imported where first used (PEP 562): the
    command line's start-up loads no module for it."""
    if name == "ResultLogError":
        from resultlog.schemas.errors import ResultLogError

        globals()[name] = ResultLogError
        return ResultLogError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
