"""compare_df with run ids: one run key each is taken, none or several refused in one line;
its McNemar p-value against an exact binomial computed here."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from resultlog.analysis import AnalysisError, compare_df
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.kafka import write
from tests.support.records import make_record

A = RunKey("ids-a", "arith", "demo/model")
B = RunKey("ids-b", "arith", "demo/model")
TWICE = RunKey("ids-a", "other", "demo/model")
# a: correct on q0..q9; b: wrong on q0..q6 (7 C->I), right on q10 where a was wrong (1 I->C).
A_VALUES = "CCCCCCCCCCI"
B_VALUES = "IIIIIIICCCC"


def _write_runs(settings: Settings, *extra: RunKey) -> None:
    records = [
        make_record(i, 0, value, run_key=key, epochs=1, dataset_size=len(values))
        for key, values in ((A, A_VALUES), (B, B_VALUES))
        for i, value in enumerate(values)
    ]
    records += [make_record(0, 0, "C", run_key=key, epochs=1) for key in extra]
    write(settings, records)


def test_run_ids_name_their_one_run_key_and_mcnemar_is_the_exact_binomial(
    settings: Settings,
) -> None:
    _write_runs(settings)
    table = compare_df("ids-a", "ids-b", kafka=settings)
    assert table.attrs["flips"] == {
        "c_to_i": [f"q{i}" for i in range(7)],
        "i_to_c": ["q10"],
    }
    n, k = 8, 1
    exact = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
    assert table.attrs["mcnemar_p"] == pytest.approx(exact, rel=1e-12)
    assert table.attrs["mcnemar_p"] == pytest.approx(0.0703125, rel=1e-12)
    assert table.attrs["difference"]["interval"] == "paired"
    assert compare_df(A, (B.run_id, B.benchmark_id, B.model), kafka=settings).equals(table)


def test_an_ambiguous_or_unknown_run_id_is_refused_showing_the_tuple_form(
    settings: Settings,
) -> None:
    _write_runs(settings, TWICE)
    with pytest.raises(AnalysisError, match=r"names 2 run keys .*\(run_id, benchmark, model\)"):
        compare_df("ids-a", "ids-b", kafka=settings)
    with pytest.raises(AnalysisError, match=r"'nope' names no run key: name the run as"):
        compare_df("nope", "ids-b", kafka=settings)
    with pytest.raises(AnalysisError, match=r"name a run as \(run_id, benchmark, model\)"):
        compare_df(("ids-a", "arith"), "ids-b", kafka=settings)  # type: ignore[arg-type]


# A fresh interpreter imports resultlog.analysis, compares the two runs and prints what it
# loaded: the statistics live below the web, so no part of the aggregator service comes along.
_COMPARE_PROBE = """
import json, sys
import resultlog.analysis
from resultlog.settings import Settings
settings = Settings.model_validate_json(sys.argv[1])
table = resultlog.analysis.compare_df("ids-a", "ids-b", kafka=settings)
print(json.dumps({"flips": table.attrs["flips"], "modules": sorted(sys.modules)}))
"""


def test_compare_df_loads_no_part_of_the_aggregator_service(settings: Settings) -> None:
    _write_runs(settings)
    done = subprocess.run(
        [sys.executable, "-c", _COMPARE_PROBE, settings.model_dump_json()],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    seen = json.loads(done.stdout)
    assert seen["flips"]["i_to_c"] == ["q10"]
    service = {"uvicorn", "starlette", "rocksdict", "resultlog.consumers.aggregator"}
    assert service & set(seen["modules"]) == set()
