"""The runs page's plots, rendered on the server as inline SVG (no script, no CDN)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape

from resultlog.consumers._samples import Cell
from resultlog.consumers._stats import Estimate
from resultlog.schemas import ScoreValue

__all__ = [
    "GRID_COLUMNS",
    "MAX_GRID_SAMPLES",
    "epoch_bars",
    "interval_plot",
    "progress_line",
    "sample_grid",
]

MAX_GRID_SAMPLES = 5000
_CELL = 9  # px of one (sample, epoch) square, its gap included
GRID_COLUMNS = 60  # samples per band
_MAX_POINTS = 1000  # points of the progress line
_CLASSES = {ScoreValue.C: "c", ScoreValue.I: "i", ScoreValue.S: "s"}


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        + "".join(body)
        + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    extra = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _interval(x0: float, x1: float, xm: float, y: float, cls: str) -> str:
    """A point estimate with its interval as a whisker."""
    return (
        f'<g class="{cls}"><line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}"/>'
        f'<line x1="{x0:.1f}" y1="{y - 4:.1f}" x2="{x0:.1f}" y2="{y + 4:.1f}"/>'
        f'<line x1="{x1:.1f}" y1="{y - 4:.1f}" x2="{x1:.1f}" y2="{y + 4:.1f}"/>'
        f'<circle cx="{xm:.1f}" cy="{y:.1f}" r="4"/></g>'
    )


def found_points(found: Estimate) -> tuple[float, float, float]:
    """An estimate's interval and mean, in that order."""
    return found.low, found.high, found.mean


def epoch_bars(epochs: Sequence[tuple[int, Estimate, int]]) -> str:
    """Accuracy per epoch: a bar each, with its 95% interval."""
    left, width, row = 70, 400, 24
    height = row * len(epochs) + 30

    def x(value: float) -> float:
        return left + width * min(1.0, max(0.0, value))

    body = [_axis(left, width, len(epochs) * row + 4, [0.0, 0.25, 0.5, 0.75, 1.0])]
    for position, (epoch, found, _) in enumerate(epochs):
        y = position * row + 4
        body.append(_text(left - 8, y + 15, f"epoch {epoch}", "end"))
        if found.n:
            bar = x(found.mean) - left
            body.append(
                f'<rect class="bar" x="{left}" y="{y + 3}" width="{bar:.1f}" height="{row - 8}">'
                f"<title>{found.mean:.4f} of {found.n}</title></rect>"
            )
            body.append(_interval(x(found.low), x(found.high), x(found.mean), y + row / 2, "ci"))
    return _svg(left + width + 20, height, body, "accuracy per epoch with 95% intervals")


def _axis(left: int, width: int, y: int, ticks: Sequence[float]) -> str:
    """A horizontal axis over the span of its labelled ticks."""
    span = max(ticks) - min(ticks) or 1.0
    parts = [f'<line class="axis" x1="{left}" y1="{y}" x2="{left + width}" y2="{y}"/>']
    for tick in ticks:
        tx = left + width * (tick - min(ticks)) / span
        parts.append(f'<line class="tick" x1="{tx:.1f}" y1="{y}" x2="{tx:.1f}" y2="{y + 4}"/>')
        parts.append(_text(tx, y + 16, f"{tick:g}", "middle"))
    return "".join(parts)


def sample_grid(cells: Sequence[Cell], samples: Sequence[tuple[int, str]], epochs: int) -> str:
    """Samples by epochs: a square per (sample, epoch) coloured C, I, S or missing, samples in
    bands of 60 columns, each column one sample's epochs from top to bottom."""
    shown = samples[:MAX_GRID_SAMPLES]
    column = {index: position for position, (index, _) in enumerate(shown)}
    by_key = {(cell.sample_index, cell.epoch): cell for cell in cells if cell.in_shape}
    band = epochs * _CELL + 8
    bands = (len(shown) + GRID_COLUMNS - 1) // GRID_COLUMNS
    left = 44
    body = []
    for number in range(bands):
        first = shown[number * GRID_COLUMNS][0]
        body.append(_text(left - 6, number * band + 10, str(first), "end", "small"))
    for index, sample_id in shown:
        position = column[index]
        x0 = left + (position % GRID_COLUMNS) * _CELL
        y0 = (position // GRID_COLUMNS) * band
        for epoch in range(epochs):
            cell = by_key.get((index, epoch))
            cls = "m" if cell is None else _CLASSES[cell.value]
            what = "missing" if cell is None else cell.value.value
            if cell is not None and cell.degraded:
                what += f" ({cell.error_kind})"
            body.append(
                f'<rect class="{cls}" x="{x0}" y="{y0 + epoch * _CELL}" width="{_CELL - 1}" '
                f'height="{_CELL - 1}"><title>{escape(sample_id)} epoch {epoch}: '
                f"{escape(what)}</title></rect>"
            )
    width = left + min(len(shown), GRID_COLUMNS) * _CELL + 4
    return _svg(width, max(bands * band, band), body, "samples by epochs: C, I, S")


def progress_line(times: Sequence[datetime], expected: int | None) -> str:
    """Records written over time (each record at its created_at), and the expected count."""
    left, width, top, height = 60, 480, 10, 160
    if not times:
        return _svg(left + width + 20, top + height + 30, [_text(left, 40, "no records")], "")
    start, end = times[0], times[-1]
    seconds = max((end - start).total_seconds(), 1e-3)
    ceiling = max(expected or 0, len(times))
    step = max(1, len(times) // _MAX_POINTS)
    points = [(0.0, 0)] + [
        ((t - start).total_seconds(), n + 1) for n, t in enumerate(times) if (n + 1) % step == 0
    ]
    points.append((seconds, len(times)))

    def xy(elapsed: float, count: int) -> str:
        return f"{left + width * elapsed / seconds:.1f},{top + height * (1 - count / ceiling):.1f}"

    line = " ".join(xy(e, c) for e, c in points)
    body = [
        f'<line class="axis" x1="{left}" y1="{top + height}" x2="{left + width}" '
        f'y2="{top + height}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + height}"/>',
        f'<polyline class="progress" fill="none" points="{line}"/>',
        _text(left - 6, top + height, "0", "end"),
        _text(left - 6, top + 10, str(ceiling), "end"),
        _text(left, top + height + 16, start.strftime("%H:%M:%S"), "start"),
        _text(left + width, top + height + 16, f"+{seconds:.1f} s", "end"),
    ]
    if expected:
        body.append(
            f'<line class="expected" x1="{left}" y1="{top}" x2="{left + width}" y2="{top}">'
            f"<title>expected {expected}</title></line>"
        )
    return _svg(left + width + 20, top + height + 24, body, "records over time")


def interval_plot(rows: Sequence[tuple[str, Estimate]], difference: Estimate) -> str:
    """Two runs' accuracies over their shared samples, then the paired difference b - a, each
    with its 95% interval; the difference's panel centred on 0."""
    left, width, row = 150, 380, 26
    body = []
    for position, (label, found) in enumerate(rows):
        y = position * row + 14
        body.append(_text(left - 8, y + 4, label, "end"))
        low, high, mean = (left + width * min(1.0, max(0.0, v)) for v in found_points(found))
        body.append(_interval(low, high, mean, y, f"ci run{position}"))
    axis_y = len(rows) * row + 4
    body.append(_axis(left, width, axis_y, [0.0, 0.25, 0.5, 0.75, 1.0]))
    reach = max(0.05, abs(difference.low), abs(difference.high))
    reach = min(1.0, round(reach * 1.2 + 0.005, 2))

    def dx(value: float) -> float:
        return left + width * (min(reach, max(-reach, value)) + reach) / (2 * reach)

    y = axis_y + 46
    body.append(_text(left - 8, y + 4, "b \u2212 a", "end"))
    body.append(
        f'<line class="zero" x1="{dx(0):.1f}" y1="{y - 12}" x2="{dx(0):.1f}" y2="{y + 12}"/>'
    )
    body.append(_interval(dx(difference.low), dx(difference.high), dx(difference.mean), y, "ci"))
    body.append(_axis(left, width, y + 18, [-reach, 0.0, reach]))
    return _svg(left + width + 30, y + 40, body, "accuracies and their paired difference")
