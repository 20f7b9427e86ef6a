"""Decode throughput of the fold view next to a full decode of the same ~1.7 kB record.

No broker: one realistic chatty record (benchmarks.codec), decoded in a loop. Prints records/s
of a raw fastavro full decode (no validation: the naive reader's decode, the baseline), of
`Codec.decode_sample_result` (full decode and validation), of `Codec.decode_fold_view` (only
the folded fields, validated by pydantic: the fallback), of the fold view plus its
`Contribution`, and of `Codec.fold_prefix` plus its check and `Contribution.of_prefix` (the
fold path: what every folding reader does per record), each with its ratio to the baseline;
the last two are also Results, without a goal of their own.

    .venv/bin/python -m benchmarks.fold_decode [-n 20000] [--repeats 5] [--results F]
"""

from __future__ import annotations

import argparse
from io import BytesIO

from fastavro import schemaless_reader

from benchmarks._results import Result, add_results_argument, report
from benchmarks.codec import best_rates, realistic_record
from resultlog.consumers import fold_path
from resultlog.consumers.fold import Contribution
from resultlog.schemas import Codec, FoldPrefix, shipped_catalog

_BASELINE = "raw fastavro full decode (baseline)"
# What every folding reader does per record: the hot path's decoders, reported as Results.
_REPORTED = ("fold_prefix", "fold_prefix + Contribution")


def _checked(codec: Codec, framed: bytes) -> FoldPrefix:
    """The value's fold prefix, read by hand and checked."""
    prefix = codec.fold_prefix(framed)
    assert prefix is not None and prefix.acceptable()
    return prefix


def main() -> None:
    """Measure and print the four decoders side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20_000, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=5, help="alternating rounds")
    add_results_argument(parser)
    args = parser.parse_args()

    codec = Codec()
    record = realistic_record()
    framed = codec.encode_sample_result(record)
    body = framed[10:]
    parsed = shipped_catalog().current("resultlog.SampleResult").parsed
    assert Contribution.of(codec.decode_fold_view(framed)) == Contribution.of(record)
    assert Contribution.of_prefix(_checked(codec, framed)) == Contribution.of(record)
    rates = best_rates(
        {
            _BASELINE: lambda: schemaless_reader(BytesIO(body), parsed, None),
            "decode_sample_result": lambda: codec.decode_sample_result(framed),
            "decode_fold_view": lambda: codec.decode_fold_view(framed),
            "decode_fold_view + Contribution": lambda: Contribution.of(
                codec.decode_fold_view(framed)
            ),
            "fold_prefix": lambda: _checked(codec, framed),
            "fold_prefix + Contribution": lambda: Contribution.of_prefix(_checked(codec, framed)),
        },
        args.n,
        args.repeats,
    )
    baseline = rates[_BASELINE]
    print(f"# one record of {len(framed)} bytes framed, {len(record.messages)} messages")
    print(f"# fold path: {fold_path()}")
    print(f"{'decoder':<38}{'records/s':>12}{'/ baseline':>12}")
    for name, rate in rates.items():
        print(f"{name:<38}{rate:>12,.0f}{rate / baseline:>11.2f}x")
    view = rates["fold_prefix"]
    print(
        f"fold prefix / full fastavro decode: {view / baseline:.2f}x; fold prefix / "
        f"decode_sample_result: {view / rates['decode_sample_result']:.2f}x (the goal it serves, "
        f"replay >= 2x the naive reader, is printed by benchmarks.replay)"
    )
    for name in _REPORTED:
        what = f"{name}, a {len(framed)} B record"
        result = Result(what, rates[name], "rec/s", baseline, "raw fastavro full decode")
        report(result, args.results)


if __name__ == "__main__":
    main()
