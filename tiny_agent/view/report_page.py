"""``tiny-agent report --html``: the report's figures as a page, with charts (same document as ``view``).  Pure."""

from __future__ import annotations

from tiny_agent.oversight.cost import money
from tiny_agent.oversight.render import rate_text
from tiny_agent.oversight.report import COLUMNS, COLUMNS_REST, Report, Row, cost_notes, figures
from tiny_agent.view.charts import Bar, bucketed, cost_chart, line_chart, percent, token_bars
from tiny_agent.view.page import document, facts_table, grid, listing, text


def report_page(report: Report) -> str:
    scope = "every directory" if report.scope == "all" else report.scope
    rows = [
        ("grouped by", text(report.by)),
        ("sessions", text(f"{report.sessions:,}")),
        ("scope", f"<code>{text(scope)}</code>"),
        ("since", text(report.since or "the beginning")),
        ("tokens", text(f"{report.total.tokens:,}")),
        ("cache hit rate", text(rate_text(report.total.cacheHitRate))),
        ("cost", text(money(report.total.figure))),
    ]
    notes = "".join(f'<p class="note">{text(line)}</p>' for line in cost_notes(report.total))
    parts = [f"<header><h1>Usage by {text(report.by)}</h1>{facts_table(rows)}{notes}</header>"]
    if report.rows:
        parts.append(_charts(report))
    parts.append("<h2>Figures</h2>")
    parts.append(_table(report))
    if report.skipped:
        parts.append(f"<h2>Left out</h2>{listing([text(line) for line in report.skipped[:200]])}")
    return document(f"tiny-agent report by {report.by}", "".join(parts))


def _tick(report: Report, row: Row) -> str:
    """A bar's x-axis label: the session's handle (its label's first word), else the key."""
    return row.label.partition(" · ")[0] if report.by == "session" else row.key


def _charts(report: Report) -> str:
    bars = [
        Bar(row.key, row.label, (row.input, row.cacheRead, row.cacheWrite, row.output), cost=row.figure, tick=_tick(report, row))
        for row in report.rows
    ]
    shown = bucketed(bars)
    ticks = [bar.tick or bar.key for bar in shown]
    parts = [f"<h2>Tokens by {text(report.by)}</h2>"]
    parts.append(token_bars(bars, title=f"tokens by {report.by}: input, cache read, cache write, output", css="tokens"))
    rates = [bar.hit_rate for bar in shown]
    if any(rate is not None for rate in rates):
        parts.append(f"<h2>Cache hit rate by {text(report.by)}</h2>")
        parts.append(line_chart(ticks, [("solid", rates)], title="cache hit rate", css="rate", top=1.0, label=percent))
    parts.append(f"<h2>Cost by {text(report.by)}</h2>")
    parts.append(cost_chart(ticks, [bar.cost for bar in shown], report.total.figure, "cost", cumulative=False))
    return "".join(parts)


def _table(report: Report) -> str:
    body = [_cells(row) for row in report.rows]
    body.append([f"<strong>{cell}</strong>" for cell in _cells(report.total)])
    return grid([report.by, *COLUMNS, *COLUMNS_REST], body)


def _cells(row: Row) -> list[str]:
    return [f'<span data-key="{text(row.key)}">{text(row.label)}</span>', *map(text, figures(row))]
