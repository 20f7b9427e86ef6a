"""Which fold path runs: the hot modules compiled by mypyc, or their pure-Python twins.

`make install` (setup.py) compiles HOT_MODULES with mypyc into extension modules next to their
sources, plus STAMP, which holds the hash of the sources they were built from. A compiled
module next to its .py wins at import, so the finder installed here decides once, at the first
import of a hot module, for all of them together (compiled code calls its compiled neighbours
directly, so the two kinds never mix): the twins run when RESULTLOG_PURE_PYTHON=1, and, said
in one INFO line, when the compiled path is not built, cannot be loaded, or was built from
other sources than these. `fold_path()` says which runs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Final

__all__ = [
    "ENV",
    "GROUP",
    "HOT_MODULES",
    "STAMP",
    "compiled",
    "fold_path",
    "install",
    "sources_hash",
]

ENV: Final = "RESULTLOG_PURE_PYTHON"
# Each compiled module and its source in the repository (pyproject's package-dir layout).
HOT_MODULES: Final = {
    "resultlog.schemas._prefix": "schemas/_prefix.py",
    "resultlog.consumers._contribution": "consumers/_contribution.py",
    "resultlog.consumers.fold": "consumers/fold.py",
    "resultlog.consumers._decode": "consumers/_decode.py",
    "resultlog.consumers._ingest": "consumers/_ingest.py",
    "resultlog.consumers._scan": "consumers/_scan.py",
    "resultlog.consumers._run_read": "consumers/_run_read.py",
    "resultlog.consumers.replay": "consumers/replay.py",
    "resultlog.consumers.aggregator.store._codec": "consumers/aggregator/store/_codec.py",
    "resultlog.consumers.aggregator.store._maps": "consumers/aggregator/store/_maps.py",
    "resultlog.consumers.aggregator.store._store": "consumers/aggregator/store/_store.py",
}
STAMP: Final = "resultlog._hot_stamp"
GROUP: Final = "resultlog._hot"  # mypyc's shared library of the group: resultlog._hot__mypyc

log = logging.getLogger(__name__)


def sources_hash(sources: Sequence[Path]) -> str:
    """The hash the stamp holds: of the hot modules' sources, in HOT_MODULES' order."""
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _source(name: str) -> Path | None:
    """The .py file of a hot module, found as the import system finds its top package's folder
    (`resultlog.consumers`, say) without importing anything below it."""
    parts = name.split(".")
    spec = importlib.util.find_spec(".".join(parts[:2]))
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder, *parts[2:-1], parts[-1] + ".py")
        if path.is_file():
            return path
    return None


def _extension(source: Path) -> bool:
    """Whether a compiled module lies next to this source."""
    stem = source.with_suffix("")
    return any(
        Path(f"{stem}{suffix}").is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def _why_pure() -> str | None:
    """Why the twins must run (None: the compiled path is built, loadable and current)."""
    try:
        stamp: ModuleType = importlib.import_module(STAMP)
    except ModuleNotFoundError:
        return "the compiled fold path is not built (make install builds it)"
    except Exception as exc:  # a broken extension fails in many ways
        return f"the compiled fold path cannot be loaded: {exc}"
    sources = [_source(name) for name in HOT_MODULES]
    found = [path for path in sources if path is not None]
    if len(found) < len(sources):
        return None  # no twin to fall back to
    if not all(_extension(path) for path in found):
        return "a module of the compiled fold path is missing"
    if getattr(stamp, "SOURCES", None) != sources_hash(found):
        return "the compiled fold path was built from other sources (make install rebuilds it)"
    return None


class _Chooser:
    """Hands out the hot modules' sources when the twins run; else the usual finders act.

    A meta path finder by its `find_spec` alone: importlib.abc (and the importlib.resources
    it loads) would cost every command about 20 ms of start-up.
    """

    def __init__(self) -> None:
        self.reason: str | None = None  # why the twins run; None while undecided or compiled
        self.decided = False

    def decide(self) -> bool:
        """Whether the compiled path runs (decided once, said once when it cannot)."""
        if not self.decided:
            self.decided = True
            if os.environ.get(ENV, "") not in ("", "0"):
                self.reason = f"{ENV}=1"
            else:
                self.reason = _why_pure()
                if self.reason is not None:
                    log.info("running the pure-Python fold path: %s", self.reason)
        return self.reason is None

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """A source spec for a hot module when the twins run; None otherwise."""
        if fullname not in HOT_MODULES or self.decide():
            return None
        leaf = fullname.rpartition(".")[2]
        for folder in path or []:
            source = Path(folder, leaf + ".py")
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


_CHOOSER = _Chooser()


def install() -> None:
    """Put the chooser first among the finders (once)."""
    if _CHOOSER not in sys.meta_path:
        sys.meta_path.insert(0, _CHOOSER)


def compiled() -> bool:
    """Whether the compiled fold path runs in this process."""
    return _CHOOSER.decide()


def fold_path() -> str:
    """Which fold path runs, for people: "compiled (mypyc)" or "pure Python (why)"."""
    return "compiled (mypyc)" if compiled() else f"pure Python ({_CHOOSER.reason})"
