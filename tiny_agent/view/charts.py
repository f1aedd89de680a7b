"""Charts as inline SVG drawn here (no library, no script, no ``style=``; colours are the page's CSS classes): stacked
token bars and lines, laid out as docs/view.md says (*Charts*, *Big sessions*).  Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape
from typing import Final

import msgspec

from tiny_agent.oversight.cost import Cost, dollars, source, total
from tiny_agent.oversight.render import rate_text

MAX_BARS: Final = 400
WIDTH: Final = 960
HEIGHT: Final = 240
LEFT: Final = 64
RIGHT: Final = 48
TOP: Final = 16
BOTTOM: Final = 36
PLOT_WIDTH: Final = WIDTH - LEFT - RIGHT
PLOT_HEIGHT: Final = HEIGHT - TOP - BOTTOM
TICK_CHARS: Final = 12
"""An x-axis label is cut to this many characters (the tooltip has the whole)."""
CHAR_WIDTH: Final = 7.5
"""A generous width of one character of an 11 px axis label, to space the labels."""
SEGMENTS: Final = (("input", "input"), ("cache-read", "cache read"), ("cache-write", "cache write"), ("output", "output"))
"""CSS class and legend name of each stacked segment, bottom to top."""


class Bar(msgspec.Struct, frozen=True):
    """One bar: four stacked token counts (input, cache read, cache write, output)."""

    key: str
    """What it stands for, on the page (``data-key``): an attempt number, a day, a model, a session."""
    label: str
    """The tooltip's first line."""
    tokens: tuple[int, int, int, int]
    flag: str = ""
    """A CSS class for how it ended (``failed``, ``retried``), empty for an ordinary bar."""
    cost: Cost = Cost()
    tick: str = ""
    """Its x-axis label, when not ``key``."""

    @property
    def total(self) -> int:
        return sum(self.tokens)

    @property
    def hit_rate(self) -> float | None:
        prompt = self.tokens[0] + self.tokens[1] + self.tokens[2]
        return self.tokens[1] / prompt if prompt else None


def bucketed(bars: Sequence[Bar], limit: int = MAX_BARS) -> list[Bar]:
    """At most ``limit`` bars: consecutive ones summed into buckets when there are more."""
    if len(bars) <= limit:
        return list(bars)
    size = math.ceil(len(bars) / limit)
    return [_bucket(bars[start : start + size]) for start in range(0, len(bars), size)]


def _bucket(group: Sequence[Bar]) -> Bar:
    flagged = sum(1 for bar in group if bar.flag)
    key = f"{group[0].key}–{group[-1].key}"
    tokens = [sum(bar.tokens[index] for bar in group) for index in range(4)]
    return Bar(
        key=key,
        label=f"{key} ({len(group)} bars, {flagged} failed or retried)",
        tokens=(tokens[0], tokens[1], tokens[2], tokens[3]),
        flag="bucket",
        cost=total(bar.cost for bar in group),
    )


def token_bars(bars: Sequence[Bar], *, title: str, css: str) -> str:
    """Stacked bars of input, cache read, cache write and output tokens, one ``<g class="bar">`` each."""
    shown = bucketed(bars)
    if not any(bar.total for bar in shown):
        return note(title, "no tokens reported")
    top = ceiling(max(bar.total for bar in shown))
    slot = PLOT_WIDTH / len(shown)
    width = min(48.0, max(1.0, slot * 0.8))
    parts = [_open(title, css), _y_axis(top, count)]
    parts += (_bar(bar, centre(index, len(shown)) - width / 2, width, top) for index, bar in enumerate(shown))
    parts += [_x_labels([bar.tick or bar.key for bar in shown]), _legend(), "</svg>"]
    if len(shown) < len(bars):
        parts.append(f'<p class="note">{len(bars):,} bars drawn as {len(shown):,} buckets of consecutive ones.</p>')
    return "".join(parts)


def _bar(bar: Bar, x: float, width: float, top: float) -> str:
    flag = f" {bar.flag}" if bar.flag else ""
    tip = [bar.label, *(f"{name}: {number:,}" for (_, name), number in zip(SEGMENTS, bar.tokens, strict=True))]
    tip.append(f"cache hit rate: {rate_text(bar.hit_rate)}")
    pieces = [f'<g class="bar{flag}" data-key="{escape(bar.key)}"><title>{escape(chr(10).join(tip))}</title>']
    base: float = TOP + PLOT_HEIGHT
    for (css, _), number in zip(SEGMENTS, bar.tokens, strict=True):
        if number:
            height = number / top * PLOT_HEIGHT
            base -= height
            pieces.append(f'<rect class="seg {css}" x="{x:.2f}" y="{base:.2f}" width="{width:.2f}" height="{height:.2f}"/>')
    if not bar.total:
        pieces.append(f'<rect class="seg none" x="{x:.2f}" y="{TOP + PLOT_HEIGHT - 1:.2f}" width="{width:.2f}" height="1"/>')
    pieces.append("</g>")
    return "".join(pieces)


def line_chart(
    ticks: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    css: str,
    label: Callable[[float], str],
    top: float | None = None,
) -> str:
    """Lines over the same slots as a bar chart: each series a CSS class and its points (None: no point)."""
    values = [value for _, points in series for value in points if value is not None]
    if not ticks or not values:
        return note(title, "nothing to draw")
    top = top or ceiling(max(values))
    parts = [_open(title, css), _y_axis(top, label)]
    for name, points in series:
        xy = [
            (centre(index, len(ticks)), TOP + PLOT_HEIGHT - value / top * PLOT_HEIGHT)
            for index, value in enumerate(points)
            if value is not None
        ]
        if len(xy) == 1:
            parts.append(f'<circle class="line {escape(name)}" cx="{xy[0][0]:.2f}" cy="{xy[0][1]:.2f}" r="3"/>')
        else:
            line = " ".join(f"{x:.2f},{y:.2f}" for x, y in xy)
            parts.append(f'<polyline class="line {escape(name)}" points="{line}"/>')
    parts += [_x_labels(list(ticks)), "</svg>"]
    return "".join(parts)


def cost_chart(ticks: Sequence[str], costs: Sequence[Cost], whole: Cost, title: str, *, cumulative: bool) -> str:
    """Cost per slot (or summed so far), labelled with where it came from; a note when there is nothing to draw."""
    if not whole.sources:
        return (
            '<p class="note chart-note">No cost: the provider reported none, and the config has no price. '
            'Add <code>[models."NAME"]</code> with <code>input</code>, <code>output</code>, <code>cache_read</code>, '
            "<code>cache_write</code> (USD per million tokens) to the config file; no price is ever guessed.</p>"
        )
    running = 0.0
    points: list[float | None] = []
    for cost in costs:
        running = running + cost.amount if cumulative else cost.amount
        points.append(running if cumulative or cost.sources else None)
    title = f"{title} (USD, {source(whole)})"
    if not any(points):
        return note(title, "$0 throughout")
    chart = line_chart(ticks, [("cost", points)], title=title, css="cost", label=dollars)
    if whole.missing:
        chart += '<p class="note warn">Partial: some tokens have neither a reported cost nor a price (named above).</p>'
    return chart


def centre(index: int, count: int) -> float:
    """The x of slot ``index`` of ``count``: where its bar, its label and its points are centred."""
    return LEFT + (index + 0.5) * PLOT_WIDTH / count


def ceiling(top: float) -> float:
    """The y axis' top: 1, 2, 4, 5, 6 or 8 times a power of ten, at or above ``top`` (its half is round too)."""
    if top <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return next(round(step * power, 12) for step in (1, 2, 4, 5, 6, 8, 10, 20) if round(step * power, 12) >= top)


def note(title: str, why: str) -> str:
    return f'<p class="note chart-note">{escape(title[:1].upper() + title[1:])}: {escape(why)}.</p>'


def _open(title: str, css: str) -> str:
    return (
        f'<svg class="chart {escape(css)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
    )


def _y_axis(top: float, label: Callable[[float], str]) -> str:
    parts = []
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + PLOT_HEIGHT - fraction * PLOT_HEIGHT
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.2f}" y2="{y:.2f}"/>')
        parts.append(
            f'<text class="axis y" x="{LEFT - 6}" y="{y + 4:.2f}" text-anchor="end">{escape(label(top * fraction))}</text>'
        )
    return "".join(parts)


def _x_labels(ticks: list[str]) -> str:
    """Each label centred under its slot; every ``step``-th only, so that neighbours never touch."""
    cut = [tick if len(tick) <= TICK_CHARS else tick[: TICK_CHARS - 1] + "…" for tick in ticks]
    room = max(len(tick) for tick in cut) * CHAR_WIDTH + 12
    step = max(1, math.ceil(room / (PLOT_WIDTH / len(cut))))
    y = HEIGHT - BOTTOM + 16
    return "".join(
        f'<text class="axis x" data-slot="{index}" x="{centre(index, len(cut)):.2f}" y="{y}" text-anchor="middle">'
        f"{escape(tick)}</text>"
        for index, tick in enumerate(cut)
        if index % step == 0
    )


def _legend() -> str:
    parts = []
    x = LEFT
    y = HEIGHT - 8
    for css, name in SEGMENTS:
        parts.append(f'<rect class="seg {css}" x="{x}" y="{y - 9}" width="10" height="10"/>')
        parts.append(f'<text class="axis" x="{x + 14}" y="{y}">{escape(name)}</text>')
        x += 24 + 8 * len(name)
    return "".join(parts)


def count(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def percent(value: float) -> str:
    return f"{value:.0%}"
