"""Handler of `resultlog submit`: a run's chunk tasks written to the work topic."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from resultlog.cli._args import positive_int
from resultlog.cli._connect import connect
from resultlog.cli._run import (
    add_run_options,
    benchmark_of,
    check_run_options,
    config_of,
)
from resultlog.schemas import MAX_INDEX

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `submit` to the command line."""
    submit = commands.add_parser(
        "submit", help="split a run into chunk tasks for `resultlog worker` processes"
    )
    add_run_options(submit)
    submit.add_argument(
        "--chunks",
        required=True,
        type=positive_int("chunks", MAX_INDEX),
        help="how many chunk tasks to split the samples into (workers share them)",
    )
    submit.set_defaults(handler=submit_command, check=check_run_options)


def submit_command(args: argparse.Namespace) -> int:
    """Validate the run, write one task per chunk, print how many."""
    from resultlog.consumers import read_run_records
    from resultlog.producer import check_config
    from resultlog.producer.worker import RunSpec, plan_chunks, submit_chunks

    # Each of the spec's fields is the option of its name (`add_run_options` and --chunks).
    spec = RunSpec(**{item.name: getattr(args, item.name) for item in dataclasses.fields(RunSpec)})
    benchmark = benchmark_of(args)
    tasks = plan_chunks(spec, benchmark)  # every check before anything is written
    with connect() as kafka:
        run_key = tasks[0].run_key
        # Workers would refuse every task of a changed configuration: refuse it here, once.
        check_config(run_key, config_of(args, benchmark), read_run_records(kafka, run_key).records)
        print(submit_chunks(kafka, tasks))
    return 0
