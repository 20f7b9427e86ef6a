"""One exception tree: every class resultlog defines descends from ResultLogError, a layer's
from that layer's root, and the tree drawn in resultlog.errors names every public one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import resultlog
import resultlog.consumers
import resultlog.errors
import resultlog.producer
import resultlog.schemas
from resultlog import ResultLogError
from resultlog.consumers import ConsumerError
from resultlog.producer import ProducerError

PACKAGES = (resultlog, resultlog.schemas, resultlog.consumers, resultlog.producer)


def _modules() -> list[ModuleType]:
    """Every module of resultlog (its sub-packages live in folders of their own), imported;
    never a `__main__`, which would run the command line."""
    found = {}
    for package in PACKAGES:
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(".__main__"):
                found[info.name] = importlib.import_module(info.name)
    return list(found.values())


def _exception_classes() -> list[type[BaseException]]:
    """The exception classes the modules define (not those they import)."""
    return [
        value
        for module in _modules()
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__
    ]


def test_every_exception_class_descends_from_the_root() -> None:
    classes = _exception_classes()
    assert len(classes) > 40, "the walk found resultlog's modules"
    outside = [
        f"{c.__module__}.{c.__qualname__}" for c in classes if ResultLogError not in c.__mro__
    ]
    assert outside == []


@pytest.mark.parametrize(
    ("package", "root"),
    [(resultlog.consumers, ConsumerError), (resultlog.producer, ProducerError)],
    ids=["consumers", "producer"],
)
def test_a_layers_classes_descend_from_its_root(package: ModuleType, root: type) -> None:
    prefix = package.__name__ + "."
    layer = [c for c in _exception_classes() if c.__module__.startswith(prefix)]
    assert layer, package.__name__
    assert [c.__qualname__ for c in layer if not issubclass(c, root)] == []


def _drawn() -> dict[str, str | None]:
    """Each class of the tree drawn in resultlog.errors' docstring, and the class above it."""
    block = (resultlog.errors.__doc__ or "").split("```text\n")[1].split("```")[0]
    parents: dict[str, str | None] = {}
    above: list[str] = []
    for line in block.splitlines():
        found = re.search(r"\w+", line)
        assert found is not None, line
        depth = found.start() // 4
        del above[depth:]
        parents[found.group()] = above[-1] if above else None
        above.append(found.group())
    return parents


def test_the_drawn_tree_names_every_public_class_under_its_parent() -> None:
    drawn = _drawn()
    public = [c for c in _exception_classes() if not c.__name__.startswith("_")]
    assert sorted(drawn) == sorted(c.__name__ for c in public)
    assert drawn.pop("ResultLogError") is None
    for cls in public:
        if cls is not ResultLogError:
            assert drawn[cls.__name__] == cls.__bases__[0].__name__, cls.__name__
