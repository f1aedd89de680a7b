"""Charts as inline SVG, drawn here: stacked token bars, and lines (cache hit rate, cumulative cost).

No library and no script: rectangles, polylines and text with attributes
(never ``style=``, which the page's Content-Security-Policy forbids), colours
from the page's CSS classes.  Every label is escaped.  More bars than
:data:`MAX_BARS` are drawn as buckets of consecutive bars, each saying which
it stands for, so a chart stays a bounded size whatever the session.

Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape
from typing import Final

import msgspec

MAX_BARS: Final = 400
WIDTH: Final = 960
HEIGHT: Final = 240
LEFT: Final = 64
RIGHT: Final = 16
TOP: Final = 16
BOTTOM: Final = 36
SEGMENTS: Final = (("input", "input"), ("cache-read", "cache read"), ("cache-write", "cache write"), ("output", "output"))
"""CSS class and legend name of each stacked segment, bottom to top."""


class Bar(msgspec.Struct, frozen=True):
    """One bar: four stacked token counts (input, cache read, cache write, output)."""

    key: str
    """What it stands for, on the page (``data-key``): an attempt number, a day, a model."""
    label: str
    """The tooltip's first line."""
    tokens: tuple[int, int, int, int]
    flag: str = ""
    """A CSS class for how it ended (``failed``, ``retried``), empty for an ordinary bar."""
    cost: float | None = None
    """USD, when every token of it has a price."""
    partial: float = 0.0
    """USD of the priced part, when some tokens had no price."""

    @property
    def total(self) -> int:
        return sum(self.tokens)

    @property
    def prompt(self) -> int:
        return self.tokens[0] + self.tokens[1] + self.tokens[2]

    @property
    def hit_rate(self) -> float | None:
        return self.tokens[1] / self.prompt if self.prompt else None


def bucketed(bars: Sequence[Bar], limit: int = MAX_BARS) -> list[Bar]:
    """At most ``limit`` bars: consecutive ones summed into buckets when there are more."""
    if len(bars) <= limit:
        return list(bars)
    size = math.ceil(len(bars) / limit)
    return [_bucket(bars[start : start + size]) for start in range(0, len(bars), size)]


def _bucket(group: Sequence[Bar]) -> Bar:
    tokens = tuple(sum(bar.tokens[index] for bar in group) for index in range(4))
    costs = [bar.cost for bar in group]
    known = all(cost is not None for cost in costs)
    priced = sum(cost for cost in costs if cost is not None) + sum(bar.partial for bar in group)
    flagged = sum(1 for bar in group if bar.flag)
    first, last = group[0].key, group[-1].key
    return Bar(
        key=f"{first}–{last}",
        label=f"{first}–{last} ({len(group)} bars, {flagged} failed or retried)",
        tokens=(tokens[0], tokens[1], tokens[2], tokens[3]),
        flag="bucket",
        cost=priced if known else None,
        partial=0.0 if known else priced,
    )


def token_bars(bars: Sequence[Bar], *, title: str, css: str) -> str:
    """Stacked bars of input, cache read, cache write and output tokens, one ``<g class="bar">`` each."""
    shown = bucketed(bars)
    if not shown:
        return _empty(title)
    top = max(1, max(bar.total for bar in shown))
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / len(shown)
    width = min(48.0, max(1.0, slot * 0.8))
    parts = [_open(title, css), _y_axis(top, _count)]
    for position, bar in enumerate(shown):
        x = LEFT + position * slot + (slot - width) / 2
        parts.append(_bar(bar, x, width, top, plot_height))
    parts.append(_x_labels([bar.key for bar in shown]))
    parts.append(_legend())
    parts.append("</svg>")
    if len(shown) < len(bars):
        parts.append(f'<p class="note">{len(bars):,} bars drawn as {len(shown):,} buckets of consecutive ones.</p>')
    return "".join(parts)


def _bar(bar: Bar, x: float, width: float, top: int, plot_height: float) -> str:
    flag = f" {bar.flag}" if bar.flag else ""
    tip = [bar.label, *(f"{name}: {count:,}" for (_, name), count in zip(SEGMENTS, bar.tokens, strict=True))]
    rate = bar.hit_rate
    tip.append("cache hit rate: " + ("n/a" if rate is None else f"{rate:.1%}"))
    pieces = [f'<g class="bar{flag}" data-key="{escape(bar.key)}"><title>{escape(chr(10).join(tip))}</title>']
    base = TOP + plot_height
    for (css, _), count in zip(SEGMENTS, bar.tokens, strict=True):
        if not count:
            continue
        height = count / top * plot_height
        base -= height
        pieces.append(f'<rect class="seg {css}" x="{x:.2f}" y="{base:.2f}" width="{width:.2f}" height="{height:.2f}"/>')
    if not bar.total:
        pieces.append(f'<rect class="seg none" x="{x:.2f}" y="{TOP + plot_height - 1:.2f}" width="{width:.2f}" height="1"/>')
    pieces.append("</g>")
    return "".join(pieces)


def line_chart(
    keys: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    css: str,
    top: float | None = None,
    label: Callable[[float], str],
) -> str:
    """Lines over the same keys as a bar chart: each series a CSS class and its points (None: no point)."""
    values = [value for _, points in series for value in points if value is not None]
    if not keys or not values:
        return _empty(title)
    ceiling = top if top is not None else max(values)
    ceiling = ceiling or 1.0
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / len(keys)
    parts = [_open(title, css), _y_axis(ceiling, label)]
    for name, points in series:
        coordinates = [
            f"{LEFT + (index + 0.5) * slot:.2f},{TOP + plot_height - value / ceiling * plot_height:.2f}"
            for index, value in enumerate(points)
            if value is not None
        ]
        if len(coordinates) == 1:
            x, y = coordinates[0].split(",")
            parts.append(f'<circle class="line {escape(name)}" cx="{x}" cy="{y}" r="3"/>')
        else:
            parts.append(f'<polyline class="line {escape(name)}" points="{" ".join(coordinates)}"/>')
    parts.append(_x_labels(list(keys)))
    parts.append("</svg>")
    return "".join(parts)


def _open(title: str, css: str) -> str:
    return (
        f'<svg class="chart {escape(css)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
    )


def _empty(title: str) -> str:
    return f'<p class="note">{escape(title)}: nothing to draw.</p>'


def _y_axis(top: float, label: Callable[[float], str]) -> str:
    plot_height = HEIGHT - TOP - BOTTOM
    parts = []
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_height - fraction * plot_height
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.2f}" y2="{y:.2f}"/>')
        tick = escape(label(top * fraction))
        parts.append(f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.2f}" text-anchor="end">{tick}</text>')
    return "".join(parts)


def _x_labels(keys: list[str]) -> str:
    y = HEIGHT - BOTTOM + 16
    first = f'<text class="axis" x="{LEFT}" y="{y}" text-anchor="start">{escape(keys[0])}</text>'
    if len(keys) == 1:
        return first
    last = f'<text class="axis" x="{WIDTH - RIGHT}" y="{y}" text-anchor="end">{escape(keys[-1])}</text>'
    return first + last


def _legend() -> str:
    parts = []
    x = LEFT
    y = HEIGHT - 8
    for css, name in SEGMENTS:
        parts.append(f'<rect class="seg {css}" x="{x}" y="{y - 9}" width="10" height="10"/>')
        parts.append(f'<text class="axis" x="{x + 14}" y="{y}">{escape(name)}</text>')
        x += 24 + 8 * len(name)
    return "".join(parts)


def _count(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1_000:.0f}k"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:.0f}"


def percent(value: float) -> str:
    return f"{value:.0%}"


def usd(value: float) -> str:
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}"
