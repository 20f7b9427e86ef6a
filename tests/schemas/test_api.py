"""The package's public surface and its dependency rule."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

from resultlog import _hotpath, schemas
from resultlog.schemas import errors
from tests.support.imports import modules_loaded_by

CONTRACT = [
    # numbers and flags of the contract
    "FORMAT_VERSION",
    "MAX_COST_USD",
    "MAX_INDEX",
    "MAX_METRIC",
    "MAX_MILLIS",
    "MAX_TOKENS",
    "SUPPORTED_FORMAT_VERSIONS",
    "TRUSTED_JSON",
    # records
    "Harness",
    "Message",
    "RecordError",
    "RecordStatus",
    "SampleResult",
    "Score",
    "ScoreValue",
    "ToolCall",
    "Usage",
    "WriterProcess",
    # work tasks of distributed workers
    "ChunkTask",
    "task_key",
    # summaries
    "AsOf",
    "RunSummary",
    "SummaryUsage",
    # keys and partitions
    "InvalidRunKeyError",
    "Location",
    "RecordId",
    "RunKey",
    "check_run_key_part",
    "decode_key",
    "decode_run_key",
    "encode_key",
    "encode_run_key",
    "indexes_part",
    "partition_for",
    "run_key_prefix",
    # the codec and its schemas
    "Codec",
    "FoldPrefix",
    "FoldView",
    "SchemaCatalog",
    "SchemaVersion",
    "WireFormat",
    "shipped_catalog",
    # errors
    "ConfigurationError",
    "DecodeError",
    "KeyDecodeError",
    "OutOfRangeError",
    "RegistryError",
    "RegistryNotConfiguredError",
    "ResultLogError",
    "SchemaError",
    "UnknownFormatVersionError",
    "UnknownSchemaError",
]


def _source(module: ModuleType) -> str:
    """A module's source: its .py twin's when the module runs compiled."""
    path = Path(inspect.getfile(module))
    if path.suffix != ".py":
        path = path.with_name(module.__name__.rpartition(".")[2] + ".py")
    return path.read_text()


def _top_level_names(module: ModuleType) -> set[str]:
    """The names a module's own source defines at top level (classes, functions, assignments)."""
    names: set[str] = set()
    for node in ast.parse(_source(module)).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_package_exports_exactly_the_contract() -> None:
    assert sorted(schemas.__all__) == sorted(CONTRACT)
    assert len(set(schemas.__all__)) == len(schemas.__all__)
    assert schemas.FORMAT_VERSION == 1


def test_every_exported_name_is_defined_in_one_module_of_the_package() -> None:
    modules = [
        importlib.import_module(f"{schemas.__name__}.{info.name}")
        for info in pkgutil.iter_modules(schemas.__path__)
    ]
    for name in schemas.__all__:
        defining = [m for m in modules if name in _top_level_names(m)]
        assert len(defining) == 1, (name, [m.__name__ for m in defining])
        assert getattr(schemas, name) is getattr(defining[0], name), name


def test_error_hierarchy() -> None:
    assert issubclass(errors.SchemaError, errors.ResultLogError)
    assert issubclass(errors.DecodeError, errors.SchemaError)
    assert issubclass(errors.RegistryError, errors.SchemaError)
    assert not issubclass(errors.RegistryError, errors.DecodeError)
    for cls in (errors.KeyDecodeError, errors.UnknownFormatVersionError, errors.UnknownSchemaError):
        assert issubclass(cls, errors.DecodeError)


def test_schemas_imports_no_other_project_package() -> None:
    loaded = modules_loaded_by("resultlog.schemas", exports=True)
    ours = {m for m in loaded if m.startswith("resultlog.")}
    # The root's import plumbing, which picks the compiled fold modules or their twins and
    # loads each export on first use.
    plumbing = {_hotpath.__name__, _hotpath.STAMP, _hotpath.GROUP + "__mypyc", "resultlog._lazy"}
    assert {m for m in ours if not m.startswith("resultlog.schemas")} - plumbing == set()
