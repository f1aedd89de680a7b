"""``tiny-agent report --html``: the report's figures as a page, with charts (same document as ``view``).

Pure.
"""

from __future__ import annotations

from tiny_agent.oversight.report import Report, Row, row_cost
from tiny_agent.view.charts import Bar, line_chart, percent, token_bars, usd
from tiny_agent.view.page import document, facts_table, grid, text


def report_page(report: Report) -> str:
    scope = "every directory" if report.scope == "all" else report.scope
    rows = [
        ("grouped by", text(report.by)),
        ("sessions", text(f"{report.sessions:,}")),
        ("scope", f"<code>{text(scope)}</code>"),
        ("since", text(report.since or "the beginning")),
        ("tokens", text(f"{report.total.tokens:,}")),
        ("cache hit rate", text(_rate(report.total))),
        ("cost", text(row_cost(report.total))),
    ]
    if report.total.unpriced:
        rows.append(("no price for", f'<span class="warn">{text(report.total.unpriced)}</span>'))
    parts = [f"<header><h1>Usage by {text(report.by)}</h1>{facts_table(rows)}</header>"]
    if report.rows:
        parts.append(_charts(report))
    parts.append("<h2>Figures</h2>")
    parts.append(_table(report))
    if report.skipped:
        items = "".join(f"<li>{text(line)}</li>" for line in report.skipped[:200])
        parts.append(f'<h2>Left out</h2><ul class="plain">{items}</ul>')
    return document(f"tiny-agent report by {report.by}", "".join(parts))


def _bars(report: Report) -> list[Bar]:
    return [
        Bar(
            key=row.key,
            label=row.label,
            tokens=(row.input, row.cacheRead, row.cacheWrite, row.output),
            cost=row.cost,
            partial=0.0 if row.cost is not None else row.pricedCost,
        )
        for row in report.rows
    ]


def _charts(report: Report) -> str:
    bars = _bars(report)
    keys = [row.key for row in report.rows]
    parts = [f"<h2>Tokens by {text(report.by)}</h2>"]
    parts.append(token_bars(bars, title=f"tokens by {report.by}: input, cache read, cache write, output", css="tokens"))
    rates = [row.cacheHitRate for row in report.rows]
    if any(rate is not None for rate in rates):
        parts.append(f"<h2>Cache hit rate by {text(report.by)}</h2>")
        parts.append(line_chart(keys, [("solid", rates)], title="cache hit rate", css="rate", top=1.0, label=percent))
    costs = [row.pricedCost if (row.cost is not None or row.pricedCost) else None for row in report.rows]
    parts.append(f"<h2>Cost by {text(report.by)}</h2>")
    if any(cost for cost in costs):
        parts.append(line_chart(keys, [("cost", costs)], title="cost (USD, from your prices)", css="cost", label=usd))
        if report.total.unpriced:
            parts.append('<p class="note warn">Partial: some tokens have no price (see above).</p>')
    else:
        parts.append(
            '<p class="note">No prices known. Add <code>[models."NAME"]</code> with <code>input</code>, '
            "<code>output</code>, <code>cache_read</code>, <code>cache_write</code> (USD per million tokens) "
            "to the config file; no price is ever guessed.</p>"
        )
    return "".join(parts)


def _table(report: Report) -> str:
    head = [report.by, "sessions", "runs", "completed", "failed", "aborted", "open", "attempts"]
    head += ["input", "output", "cache read", "cache write", "hit rate", "cost"]
    body = [_cells(row) for row in report.rows]
    body.append([f"<strong>{cell}</strong>" for cell in _cells(report.total)])
    return grid(head, body)


def _cells(row: Row) -> list[str]:
    runs = row.runs
    counts = [row.sessions, runs.total, runs.completed, runs.failed, runs.aborted, runs.open, row.attempts]
    counts += [row.input, row.output, row.cacheRead, row.cacheWrite]
    return [
        f'<span data-key="{text(row.key)}">{text(row.label)}</span>',
        *(text(f"{count:,}") for count in counts),
        text(_rate(row)),
        text(row_cost(row)),
    ]


def _rate(row: Row) -> str:
    return "n/a" if row.cacheHitRate is None else f"{row.cacheHitRate:.1%}"
