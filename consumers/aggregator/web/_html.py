"""The runs page's HTML: the shells (no data) and the parts the page's script polls (data).

Every number is formatted here from the same objects the JSON routes serialise, and every
text from the log is escaped: run ids, models and error messages are anyone's input.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape

from resultlog.consumers._samples import Comparison, RunSamples
from resultlog.consumers._stats import Estimate, Flip
from resultlog.consumers.aggregator.web import _svg
from resultlog.schemas import RunKey, RunSummary, encode_run_key

__all__ = [
    "accuracy_text",
    "compare_part",
    "interval_text",
    "names",
    "run_part",
    "runs_part",
    "shell",
]

_MAX_DEGRADED_ROWS = 200
_MAX_DIFFERENCE_ROWS = 1000
_FLIP_LABELS = {Flip.C_TO_I: "C→I", Flip.I_TO_C: "I→C"}
_DIFFERENCE_SE = {
    "paired": "paired standard error",
    "clustered": "standard error clustered by sample (epochs)",
    "normal": "standard error",
}


def run_path(run_key: RunKey) -> str:
    """`run_id/benchmark/model`, each segment percent-encoded as in keys."""
    return encode_run_key(run_key).decode()


def accuracy_text(value: float) -> str:
    """An accuracy or a difference as the page shows it."""
    return f"{value:.4f}"


def interval_text(found: Estimate) -> str:
    """A 95% interval as the page shows it; a dash when no value backs it."""
    if not found.n:
        return "&ndash;"
    return f"[{found.low:.4f}, {found.high:.4f}]"


def cost_text(value: float) -> str:
    """A cost in USD as the page shows it."""
    return f"${value:.6f}"


def time_text(moment: datetime | None) -> str:
    """A timestamp as the page shows it (UTC)."""
    return "&ndash;" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def names(*parts: str) -> str:
    """Names from the log, escaped, each isolated in `<bdi>` and joined by a middle dot: a
    right-to-left name never reorders the text around it."""
    return " · ".join(_bdi(part) for part in parts)


def _bdi(text: str) -> str:
    # A name that must wrap breaks after a "/" first (a model's provider/name), before the
    # CSS's break anywhere: "demo/" + "model", never "demo/mode" + "l".
    return f"<bdi>{escape(text).replace('/', '/<wbr>')}</bdi>"


def shell(
    title: str, part: str, *, every_ms: int, filters: bool = False, heading: str | None = None
) -> str:
    """A page without data: the script fetches `part` (with the token) every `every_ms`.

    `heading` is the header's HTML (default: the escaped title)."""
    filter_form = ""
    if filters:
        filter_form = (
            '<form id="filters" class="filters"><label>benchmark <select name="benchmark">'
            '<option value="">all</option></select></label> <label>model <select name="model">'
            '<option value="">all</option></select></label></form>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{escape(title)} · resultlog</title><link rel="stylesheet" href="/static/page.css">'
        '</head><body><header><a class="home" href="/">resultlog</a> <span class="title">'
        f'{heading or escape(title)}</span><span id="status" class="status"></span></header>'
        '<form id="token" class="token" hidden><p>This aggregator wants its token '
        "(<code>RESULTLOG_HTTP_TOKEN</code>). It is kept in this tab only.</p>"
        '<input type="password" name="token" autocomplete="off" placeholder="token" required> '
        '<button type="submit">Open</button> <span class="refused" hidden>refused</span></form>'
        f'{filter_form}<main id="live" data-part="{escape(part)}" data-every="{every_ms}">'
        '<p class="loading">loading…</p></main>'
        '<dialog id="json"><form method="dialog"><button>close</button></form><pre></pre></dialog>'
        '<script src="/static/page.js"></script></body></html>'
    )


def _json_link(href: str, label: str = "JSON") -> str:
    return f'<a class="json" href="{escape(href)}">{escape(label)}</a>'


def _progress(summary: RunSummary) -> str:
    expected = summary.expected_records
    bar = ""
    if expected:
        bar = f'<progress max="{expected}" value="{min(summary.records, expected)}"></progress> '
    of = f' / <span class="expected">{expected}</span>' if expected else ""
    return f'{bar}<span class="records">{summary.records}</span>{of}'


def _accuracy_cells(summary: RunSummary, view: RunSamples | None) -> str:
    ci = '<span class="pending">…</span>' if view is None else interval_text(view.accuracy())
    return (
        f'<td class="accuracy">{accuracy_text(summary.accuracy)}</td><td class="ci">{ci}</td>'
        f'<td class="correct">{summary.correct_answers} / {summary.total_questions}</td>'
    )


def _summary_row(summary: RunSummary, view: RunSamples | None, *, stale: bool = False) -> str:
    run_key = summary.run_key
    path = run_path(run_key)
    computed = summary.as_of.computed_at if summary.as_of is not None else None
    badge = _STALE_BADGE if stale else ""
    return (
        f'<tr data-run="{escape(path)}"><td class="run"><a href="/page/run/{escape(path)}">'
        f'{_bdi(summary.run_id)}</a>{badge}</td><td class="benchmark">{_bdi(summary.benchmark_id)}'
        f'</td><td class="model">{_bdi(summary.model)}</td><td class="progress">'
        f"{_progress(summary)}</td>{_accuracy_cells(summary, view)}"
        f'<td class="skipped">{summary.skipped_questions}</td>'
        f'<td class="degraded">{summary.degraded_records}</td>'
        f'<td class="spent">{cost_text(summary.spent_cost)}</td>'
        f'<td class="kept">{cost_text(summary.usage.total_cost)}</td>'
        f'<td class="tokens">{summary.usage.total_tokens:,}</td>'
        f'<td class="updated"><time datetime="{computed.isoformat() if computed else ""}">'
        f"{time_text(computed)}</time></td>"
        f"<td>{_json_link('/runs/' + path)} {_json_link(f'/runs/{path}/samples', 'samples')}"
        "</td></tr>"
    )


_STALE_BADGE = (
    ' <span class="badge stale" title="the last published summary: no aggregator holds this '
    'run fresh yet (restoring, or its partition is being handed over)">stale</span>'
)
# What each number is, as a tooltip on its header (the fold defines them).
_HEADER_TITLES = {
    "accuracy": "mean over the questions of each question's score, averaged over its epochs",
    "correct": "questions whose score averaged over epochs is at least 0.5, of all scored",
    "skipped": "questions with no scored epoch (every epoch degraded)",
    "degraded": "records whose model call failed (429, 500, timeout): retried on resume",
    "spent": "USD of every model call, retries included (simulated for the offline model)",
    "kept cost": "USD of the records kept, one per (sample, epoch)",
    "95% CI": "Wilson score interval of the accuracy over its questions: stays within [0, 1]",
}
_HEAD = (
    "<thead><tr>"
    + "".join(
        f'<th title="{escape(_HEADER_TITLES[name])}">{name}</th>'
        if name in _HEADER_TITLES
        else f"<th>{name}</th>"
        for name in (
            "run",
            "benchmark",
            "model",
            "progress",
            "accuracy",
            "95% CI",
            "correct",
            "skipped",
            "degraded",
            "spent",
            "kept cost",
            "tokens",
            "last update (UTC)",
            "",
        )
    )
    + "</tr></thead>"
)


def runs_part(
    summaries: Sequence[RunSummary],
    views: dict[RunKey, RunSamples],
    *,
    benchmarks: Sequence[str],
    models: Sequence[str],
    query: str,
    stale: frozenset[RunKey] = frozenset(),
    restoring: str = "",
) -> str:
    """The runs table, newest first, and the filters' choices (for the script); runs in
    `stale` are the summaries topic's, shown with a badge until the aggregator caught up
    (`restoring` says which partitions restore their state and how far)."""
    rows = ""
    for s in summaries:
        rows += _summary_row(s, views.get(s.run_key), stale=s.run_key in stale)
    if not summaries:
        rows = '<tr><td colspan="14" class="empty">no runs yet</td></tr>'
    listing = "/runs" + (f"?{query}" if query else "")
    return (
        f"<section class=\"runs\" data-benchmarks='{escape(json.dumps(list(benchmarks)))}' "
        f"data-models='{escape(json.dumps(list(models)))}'>"
        f'<p class="meta">{len(summaries)} runs, newest first · {_json_link(listing)}'
        f"{' · ' + escape(restoring) if restoring else ''}</p>"
        f'<table class="runs">{_HEAD}<tbody>{rows}</tbody></table></section>'
    )


def run_part(
    summary: RunSummary, view: RunSamples, others: Sequence[RunKey], *, stale: bool = False
) -> str:
    """A run's page: its numbers (badged `stale` when they are the summaries topic's),
    accuracy per epoch, the grid, degraded records, progress."""
    run_key = view.run_key
    path = run_path(run_key)
    shape = view.shape
    epochs = shape.epochs if shape is not None else 0
    samples = view.sample_rows(_svg.MAX_GRID_SAMPLES)
    count = view.sample_count()
    grid_note = ""
    if count > len(samples):
        grid_note = f'<p class="meta">the first {len(samples)} of {count} samples</p>'
    sections = [
        f'<section class="summary"><table class="runs">{_HEAD}<tbody>'
        f"{_summary_row(summary, view, stale=stale)}</tbody></table></section>",
        _section(
            "Accuracy per epoch",
            f"/runs/{path}/samples",
            _epoch_table(view) + _svg.epoch_bars(view.epoch_accuracy()),
        ),
        _section(
            "Samples &times; epochs",
            f"/runs/{path}/samples",
            '<p class="legend"><span class="c">C</span> correct <span class="i">I</span> '
            'incorrect <span class="s">S</span> skipped (degraded) <span class="m"></span> '
            "not written yet</p>"
            + _grid_legend(epochs)
            + grid_note
            + _svg.sample_grid(view.cells, samples, epochs),
        ),
        _section("Degraded records", f"/runs/{path}/samples", _degraded(view)),
        _section(
            "Progress over time",
            f"/runs/{path}",
            _svg.progress_line(view.progress(), summary.expected_records),
        ),
    ]
    if others:
        links = "".join(
            f'<li><a href="/page/compare?a={escape(path)}&amp;b={escape(run_path(o))}">'
            f"{names(o.run_id, o.model)}</a></li>"
            for o in others
        )
        sections.append(f'<section><h2>Compare with</h2><ul class="others">{links}</ul></section>')
    return "".join(sections)


def _grid_legend(epochs: int) -> str:
    """How to read the grid: what a column, a square and a row's label are."""
    what = (
        "A column is a sample, its epochs from top to bottom (epoch 0 first)"
        if epochs > 1
        else "A square is a sample"
    )
    return (
        f'<p class="meta grid-legend">{what}; hover a square for its sample id. '
        f"{_svg.GRID_COLUMNS} samples a row, in dataset order; the number left of a row is "
        "the index of its first sample.</p>"
    )


def _section(title: str, json_href: str, body: str) -> str:
    """A titled section (`title` is HTML: constants only) with a link to its JSON."""
    return f"<section><h2>{title} {_json_link(json_href)}</h2>{body}</section>"


def _epoch_table(view: RunSamples) -> str:
    rows = "".join(
        f'<tr><td>{epoch}</td><td class="accuracy">{accuracy_text(found.mean)}</td>'
        f'<td class="ci">{interval_text(found)}</td><td>{found.n}</td><td>{skipped}</td></tr>'
        for epoch, found, skipped in view.epoch_accuracy()
    )
    return (
        '<table class="epochs"><thead><tr><th>epoch</th><th>accuracy</th><th>95% CI (Wilson)</th>'
        f"<th>answered</th><th>S</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _degraded(view: RunSamples) -> str:
    degraded = view.degraded()
    if not degraded:
        return '<p class="meta">none</p>'
    kinds = ", ".join(f"{escape(k)}: {n}" for k, n in view.error_kinds().items())
    rows = "".join(
        f"<tr><td>{_bdi(c.sample_id)}</td><td>{c.epoch}</td><td>{c.value.value}</td>"
        f"<td>{_bdi(c.error_kind or '')}</td><td>{c.http_status or ''}</td>"
        f'<td class="message" dir="auto">{escape((c.error_message or "")[:200])}</td>'
        f"<td>{time_text(c.created_at)}</td></tr>"
        for c in degraded[:_MAX_DEGRADED_ROWS]
    )
    more = len(degraded) - _MAX_DEGRADED_ROWS
    note = f'<p class="meta">and {more} more</p>' if more > 0 else ""
    return (
        f'<p class="kinds">{len(degraded)} degraded · {kinds}</p><table class="degraded">'
        "<thead><tr><th>sample</th><th>epoch</th><th>value</th><th>error kind</th>"
        f"<th>HTTP</th><th>message</th><th>written (UTC)</th></tr></thead><tbody>{rows}</tbody>"
        f"</table>{note}"
    )


def compare_part(comparison: Comparison, query: str) -> str:
    """Run against run: accuracies, the paired difference, flips, a plot, the differences."""
    a, b = comparison.a.run_key, comparison.b.run_key
    difference = comparison.difference
    flips = comparison.flips()
    names = {"a": _run_name(a), "b": _run_name(b)}
    rows = [
        (f"a: {a.run_id}", comparison.over_shared(comparison.a)),
        (f"b: {b.run_id}", comparison.over_shared(comparison.b)),
    ]
    headline = "".join(
        f'<tr class="{side}"><th>{side}</th><td>{names[side]}</td>'
        f'<td class="accuracy">{accuracy_text(found.mean)}</td>'
        f'<td class="ci">{interval_text(found)}</td></tr>'
        for side, (_, found) in zip(("a", "b"), rows, strict=True)
    )
    headline += (
        f'<tr class="difference"><th>b &minus; a</th><td>paired, over {len(comparison.shared)} '
        f'shared samples</td><td class="accuracy">{accuracy_text(difference.mean)}</td>'
        f'<td class="ci">{interval_text(difference)}</td></tr>'
    )
    test = (
        f'<p class="meta paired-test">McNemar exact test of the flips: p = '
        f'<span class="mcnemar">{comparison.mcnemar_p():.4g}</span> · accuracy intervals: '
        f"Wilson; difference interval: normal, {_DIFFERENCE_SE[difference.method]}</p>"
    )
    only = (
        f'<p class="meta">shared samples: <span class="shared">{len(comparison.shared)}</span>'
        f" · only in a: {len(comparison.a.values) - len(comparison.shared)}"
        f" · only in b: {len(comparison.b.values) - len(comparison.shared)} · "
        f"{_json_link('/compare?' + query)}</p>"
    )
    flip_lists = "".join(
        f'<p class="flips {kind}"><b>{_FLIP_LABELS[kind]}</b> '
        f'<span class="count">{len(ids)}</span>: {", ".join(map(_bdi, ids[:200]))}</p>'
        for kind, ids in flips.items()
    )
    return (
        '<section><h2>Accuracy over shared samples</h2><table class="compare"><thead><tr><th>'
        "</th><th>run</th><th>accuracy</th><th>95% CI</th></tr></thead><tbody>"
        f"{headline}</tbody></table>{only}{test}{_svg.interval_plot(rows, difference)}</section>"
        f"<section><h2>Samples that flip</h2>{flip_lists}</section>"
        f"<section><h2>Per-sample differences</h2>{_differences(comparison)}</section>"
    )


def _run_name(run_key: RunKey) -> str:
    path = run_path(run_key)
    return f'<a href="/page/run/{escape(path)}">{_bdi(run_key.run_id)}</a> · {_bdi(run_key.model)}'


def _differences(comparison: Comparison) -> str:
    differing = [s for s in comparison.shared if s.difference]
    rows = "".join(
        f"<tr><td>{_bdi(s.sample_id)}</td><td>{float(s.a):.4f}</td><td>{float(s.b):.4f}</td>"
        f'<td class="d">{float(s.difference):+.4f}</td>'
        f"<td>{_FLIP_LABELS.get(s.flip or '', '')}</td></tr>"
        for s in differing[:_MAX_DIFFERENCE_ROWS]
    )
    same = len(comparison.shared) - len(differing)
    return (
        f'<p class="meta">{len(differing)} samples differ; {same} have the same value in both '
        f'runs</p><table class="differences"><thead><tr><th>sample</th><th>a</th><th>b</th>'
        f"<th>b &minus; a</th><th>flip</th></tr></thead><tbody>{rows}</tbody></table>"
    )
