"""The package's public surface and its dependency rule."""

from __future__ import annotations

import subprocess
import sys

from resultlog import schemas
from resultlog.schemas import errors


def test_public_names_resolve() -> None:
    for name in schemas.__all__:
        assert getattr(schemas, name) is not None, name
    assert schemas.FORMAT_VERSION == 1


def test_error_hierarchy() -> None:
    assert issubclass(errors.SchemaError, errors.ResultLogError)
    assert issubclass(errors.DecodeError, errors.SchemaError)
    assert issubclass(errors.RegistryError, errors.SchemaError)
    assert not issubclass(errors.RegistryError, errors.DecodeError)
    for cls in (errors.KeyDecodeError, errors.UnknownFormatVersionError, errors.UnknownSchemaError):
        assert issubclass(cls, errors.DecodeError)


def test_schemas_imports_no_other_project_package() -> None:
    code = (
        "import sys, resultlog.schemas; "
        "print(sorted(m for m in sys.modules if m.startswith('resultlog.')"
        " and not m.startswith('resultlog.schemas')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
