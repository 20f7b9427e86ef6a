"""The release wheels' check: the installed resultlog runs its fold compiled, or this exits 1.

cibuildwheel (pyproject's test-command) installs each wheel it built, with its dependencies,
in a fresh venv and runs this file from a directory of its own. A wheel whose mypyc compile
failed still builds (setup.py goes on without the extensions, saying so once), so this is
where such a wheel fails the release: the fold path must be the compiled one, every hot module
must come from its extension, and one record is decoded and folded through them. It needs the
standard library and the installed resultlog only (tests/resultlog/test_release_wheels.py
runs it against this checkout's install).
"""

from __future__ import annotations

import importlib
import sys
from datetime import UTC, datetime


def main() -> int:
    """0 when the installed resultlog runs its fold compiled; else 1, with the reason."""
    import resultlog
    from resultlog._hotpath import HOT_MODULES

    loaded = [importlib.import_module(name) for name in HOT_MODULES]
    path = resultlog.fold_path()
    print(f"resultlog {resultlog.__file__}: fold path {path}")
    sources = [module.__name__ for module in loaded if str(module.__file__).endswith(".py")]
    if not path.startswith("compiled") or sources:
        why = f"loaded from source: {', '.join(sources)}" if path.startswith("compiled") else path
        print(f"resultlog: this install does not run its fold compiled ({why})", file=sys.stderr)
        return 1

    from resultlog.consumers import fold_records
    from resultlog.schemas import Codec, RecordStatus, SampleResult, Score, ScoreValue

    record = SampleResult(
        run_id="r",
        benchmark_id="b",
        model="m",
        sample_id="s-0",
        sample_index=0,
        epoch=0,
        epochs=1,
        status=RecordStatus.COMPLETED,
        score=Score(value=ScoreValue.C, explanation="ok"),
        input="q",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    codec = Codec()
    accuracy = fold_records([codec.decode_fold_view(codec.encode_sample_result(record))]).accuracy
    print(f"resultlog: one record folded compiled, accuracy {accuracy}")
    if accuracy != 1.0:
        print(f"resultlog: the compiled fold gave accuracy {accuracy}, not 1.0", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
