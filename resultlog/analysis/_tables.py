"""`runs_df`, `samples_df`, `compare_df`: runs and samples read from the log as DataFrames.

Each run key is read by the resume reader (`read_run_records`: the run's one partition, its
latest record per key, values of other runs never decoded), the reader the aggregator's
per-sample routes use; its summary is folded by the fold replay uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence

import pandas as pd

from resultlog.analysis._frames import (
    COMPARE_COLUMNS,
    FULL_COLUMNS,
    RUN_COLUMNS,
    SAMPLE_COLUMNS,
    frame,
)
from resultlog.analysis._rows import ReadRun
from resultlog.analysis.errors import AnalysisError
from resultlog.consumers import Comparison, read_run_records, run_keys_of
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings

__all__ = ["Progress", "Source", "compare_df", "read_runs", "runs_df", "samples_df", "select"]

Source = KafkaConnection | Settings | None
"""Where to read: a connection (left open), settings, or None for the environment's settings."""
Progress = Callable[[int, int], None]
"""Called after each run is read with (runs read, runs to read)."""
RunName = RunKey | tuple[str, str, str]
RunRef = RunName | str  # a run id alone: the one run key with that id


def runs_df(
    benchmark: str | None = None,
    model: str | None = None,
    run_id: str | None = None,
    *,
    kafka: Source = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row per run key with a record (filtered by any of the three parts), in key order."""
    with _connected(kafka) as connection:
        keys, named = select(connection, run_id, benchmark, model)
        runs = read_runs(connection, keys, progress, named=named)
        return frame((run.run_row() for run in runs), RUN_COLUMNS)


def samples_df(
    run_id: str | None = None,
    benchmark: str | None = None,
    model: str | None = None,
    *,
    runs: Iterable[RunName] | pd.DataFrame | None = None,
    full: bool = False,
    kafka: Source = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row per (sample, epoch) latest record of the runs named, by run key, sample, epoch.

    The runs: `runs` (run keys, or a DataFrame with run_id, benchmark_id and model columns
    such as `runs_df()`), else every run key matching the parts given (all three: that run).
    `full=True` adds each record's input, target, explanation and messages.
    """
    with _connected(kafka) as connection:
        keys, named = (
            select(connection, run_id, benchmark, model)
            if runs is None
            else (
                _named(runs),
                True,
            )
        )
        read = read_runs(connection, keys, progress, named=named)
        rows = (row for run in read for row in run.sample_rows(full=full))
        return frame(rows, SAMPLE_COLUMNS, FULL_COLUMNS if full else None)


def compare_df(a: RunRef, b: RunRef, *, kafka: Source = None) -> pd.DataFrame:
    """Run b against run a of one benchmark, per sample both answered, as `GET /compare`.

    Each run is a run key (or a `(run_id, benchmark, model)` tuple), or a run id alone when
    one run key has it. Columns: sample_id, a and b (each run's value of the sample: the mean
    of its epochs that are not S), difference (b - a) and flip. `attrs` holds the rest of the
    comparison: both runs' accuracy (Wilson intervals) and accuracy over the shared samples,
    the paired difference with its 95% interval (`interval`: "paired", or "clustered" by
    sample with several epochs), the flips and `mcnemar_p`, McNemar's exact test of them.
    """
    with _connected(kafka) as connection:
        first, second = _resolved(connection, a), _resolved(connection, b)
        if first.benchmark_id != second.benchmark_id:
            raise AnalysisError(
                f"a and b must be runs of one benchmark, got {first.benchmark_id!r} and "
                f"{second.benchmark_id!r}"
            )
        run_a, run_b = read_runs(connection, [first, second])
    compared = Comparison.of(run_a.view, run_b.view).as_json()
    rows = compared.pop("samples")
    table = frame(rows, COMPARE_COLUMNS)
    table.attrs.update(compared)
    return table


def select(
    kafka: KafkaConnection, run_id: str | None, benchmark: str | None, model: str | None
) -> tuple[list[RunKey], bool]:
    """The run keys named, and whether they were named whole: all three parts name one run;
    fewer filter every run key with a live record."""
    if run_id is not None and benchmark is not None and model is not None:
        return [RunKey(run_id, benchmark, model)], True
    found = [
        key
        for key in run_keys_of(kafka, run_id)
        if (benchmark is None or key.benchmark_id == benchmark)
        and (model is None or key.model == model)
    ]
    return found, False


def read_runs(
    kafka: KafkaConnection,
    keys: Sequence[RunKey],
    progress: Progress | None = None,
    *,
    named: bool = True,
) -> Iterator[ReadRun]:
    """Each run key's latest records, one run at a time.

    A run without records is an AnalysisError when it was `named` (a mistyped key, a purged
    run), and is left out when it was found by listing (purged since, or only undecodable).
    """
    for done, run_key in enumerate(keys, start=1):
        loaded = read_run_records(kafka, run_key)
        if loaded.records:
            yield ReadRun(run_key, loaded)
        elif named:
            unreadable = f" ({loaded.undecodable} undecodable)" if loaded.undecodable else ""
            raise AnalysisError(
                f"run {run_key} has no records in {kafka.results_topic}{unreadable}"
            )
        if progress is not None:
            progress(done, len(keys))


def _named(runs: Iterable[RunName] | pd.DataFrame) -> list[RunKey]:
    if isinstance(runs, pd.DataFrame):
        parts = runs[["run_id", "benchmark_id", "model"]].astype(str).itertuples(index=False)
        return list(dict.fromkeys(RunKey(*part) for part in parts))
    return list(dict.fromkeys(_key(run) for run in runs))


def _key(run: RunName) -> RunKey:
    if isinstance(run, RunKey):
        return run
    if isinstance(run, str) or len(run) != 3:
        raise AnalysisError(
            f"name a run as (run_id, benchmark, model), e.g. ('r1', 'arith', 'demo/model'); "
            f"got {run!r}"
        )
    return RunKey(*run)


def _resolved(kafka: KafkaConnection, run: RunRef) -> RunKey:
    """The run key `run` names: a key or tuple as is, a run id if one run key has it."""
    if not isinstance(run, str):
        return _key(run)
    found = run_keys_of(kafka, run)
    if len(found) == 1:
        return found[0]
    which = "no run key" if not found else f"{len(found)} run keys ({', '.join(map(str, found))})"
    raise AnalysisError(
        f"run id {run!r} names {which}: name the run as (run_id, benchmark, model), "
        f"e.g. ({run!r}, 'arith', 'demo/model')"
    )


@contextlib.contextmanager
def _connected(source: Source) -> Iterator[KafkaConnection]:
    """The connection to read through: the one given (left open) or one of the settings."""
    if isinstance(source, KafkaConnection):
        yield source
        return
    with KafkaConnection(source if source is not None else Settings()) as kafka:
        yield kafka
