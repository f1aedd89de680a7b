"""``tiny-agent report``: usage across sessions, per day, model or session, from the sessions index's per-session
buckets, so a report reads no journal the index can vouch for (docs/view.md, *report*).  Pure: entries in, figures and
lines out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from tiny_agent.errors import UsageError
from tiny_agent.journal.transcript import Usage
from tiny_agent.oversight.cost import Cost, money, price, source, unpriced
from tiny_agent.oversight.render import counted, rate_text
from tiny_agent.providers.userconfig import ModelSettings

if TYPE_CHECKING:  # types only: the report never reads the index itself
    from tiny_agent.stores.listing import Bucket, ReportEntry

Grouping = Literal["day", "model", "session"]

_DAY: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


class Runs(msgspec.Struct):
    completed: int = 0
    failed: int = 0
    aborted: int = 0
    open: int = 0

    @property
    def total(self) -> int:
        return self.completed + self.failed + self.aborted + self.open


class Row(msgspec.Struct):
    key: str
    """The day (``YYYY-MM-DD``), the model, or the session id."""
    label: str
    sessions: int = 0
    attempts: int = 0
    unreported: int = 0
    """Attempts whose response reported no usage: in no token column and no cost."""
    runs: Runs = msgspec.field(default_factory=Runs)
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    cacheHitRate: float | None = None
    cost: float | None = None
    """USD, when every token of the row has a figure (the provider's or a price)."""
    pricedCost: float = 0.0
    """USD of the tokens that have a figure (equals ``cost`` when it is known)."""
    unpriced: str = ""
    """``model (component, ...)`` for tokens without a price; empty when the cost is whole."""
    costFrom: list[str] = msgspec.field(default_factory=list)
    """Where the figures came from: ``provider`` (the responses' own), ``prices`` (the config's); none: n/a."""

    @property
    def figure(self) -> Cost:
        return Cost(self.pricedCost, (self.unpriced,) if self.unpriced else (), tuple(self.costFrom))

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cacheRead + self.cacheWrite


class Report(msgspec.Struct):
    by: Grouping
    since: str | None
    scope: str
    """The directory whose sessions are counted, or ``all``."""
    sessions: int
    rows: list[Row]
    total: Row
    skipped: list[str] = msgspec.field(default_factory=list)
    """Sessions left out, one line each (corrupt or unreadable)."""


def parse_day(text: str) -> str:
    """A ``--since`` value: ``YYYY-MM-DD``, a real date."""
    import datetime

    if not _DAY.fullmatch(text):
        raise UsageError(f"--since {text!r}: give a UTC day as YYYY-MM-DD")
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r}: not a date") from None
    return text


def build_report(
    entries: Sequence[ReportEntry],
    *,
    by: Grouping,
    since: str | None,
    prices: Mapping[str, ModelSettings],
    cwd: str | None,
) -> Report:
    groups: dict[str, _Group] = {}
    total = _Group(Row(key="total", label="total"))
    skipped: list[str] = []
    counted = 0
    for entry in entries:
        summary = entry.summary
        if summary.status in ("corrupt", "unreadable"):
            skipped.append(f"{entry.handle or summary.session}: {summary.status}: {summary.error or ''}".rstrip(": "))
            continue
        buckets = [bucket for bucket in summary.buckets if since is None or bucket.day >= since]
        if not buckets:
            continue
        counted += 1
        keyed: dict[str, list[Bucket]] = {}
        for bucket in buckets:
            keyed.setdefault(_key_of(by, entry, bucket), []).append(bucket)
        for key, mine in keyed.items():
            group = groups.get(key)
            if group is None:
                label = f"{entry.handle or summary.session[:13]} · {summary.model or '?'}" if by == "session" else key
                group = groups[key] = _Group(Row(key=key, label=label))
            group.add(summary.session, mine, prices)
        total.add(summary.session, buckets, prices)
    rows = [group.finish() for group in groups.values()]
    return Report(
        by=by,
        since=since,
        scope="all" if cwd is None else cwd,
        sessions=counted,
        rows=_ordered(rows, by, entries),
        total=total.finish(),
        skipped=skipped,
    )


def _key_of(by: Grouping, entry: ReportEntry, bucket: Bucket) -> str:
    if by == "day":
        return bucket.day
    if by == "model":
        return bucket.model
    return entry.summary.session


class _Group:
    """A row being summed: its buckets' counters, its sessions, its cost."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.sessions: set[str] = set()
        self.cost = Cost()

    def add(self, session: str, buckets: list[Bucket], prices: Mapping[str, ModelSettings]) -> None:
        row = self.row
        self.sessions.add(session)
        for bucket in buckets:
            row.unreported += bucket.attempts - bucket.reported
            for name in ("attempts", "input", "output", "cacheRead", "cacheWrite"):
                setattr(row, name, getattr(row, name) + getattr(bucket, name))
            for name in ("completed", "failed", "aborted", "open"):
                setattr(row.runs, name, getattr(row.runs, name) + getattr(bucket, name))
            costed = bucket.costed
            usage = Usage(
                input=bucket.input - costed.input,
                output=bucket.output - costed.output,
                cacheRead=bucket.cacheRead - costed.cacheRead,
                cacheWrite=bucket.cacheWrite - costed.cacheWrite,
            )
            reported = Cost(bucket.cost, sources=("provider",)) if bucket.reports else Cost()
            priced = price(usage, bucket.model, prices) if bucket.reported > bucket.reports else Cost()  # never price n/a
            self.cost = self.cost + priced + reported

    def finish(self) -> Row:
        row = self.row
        row.sessions = len(self.sessions)
        row.cacheHitRate = Usage(input=row.input, cacheRead=row.cacheRead, cacheWrite=row.cacheWrite).cache_hit_rate
        row.pricedCost = self.cost.amount
        row.cost = self.cost.amount if self.cost.known else None
        row.unpriced = unpriced(self.cost)
        row.costFrom = list(self.cost.sources)
        return row


def _ordered(rows: list[Row], by: Grouping, entries: Sequence[ReportEntry]) -> list[Row]:
    if by == "day":
        return sorted(rows, key=lambda row: row.key)
    if by == "model":
        return sorted(rows, key=lambda row: (-row.tokens, row.key))
    newest_first = {entry.summary.session: position for position, entry in enumerate(entries)}
    return sorted(rows, key=lambda row: newest_first.get(row.key, 0))


# -- the terminal table -------------------------------------------------------------------

COLUMNS: Final = ["sessions", "runs", "completed", "failed", "aborted", "open", "attempts", "input", "output"]
COLUMNS_REST: Final = ["cache read", "cache write", "hit rate", "cost"]


def report_lines(report: Report, store_label: str) -> Iterator[str]:
    scope = "every directory" if report.scope == "all" else f"sessions made in {report.scope}"
    since = f" since {report.since}" if report.since else ""
    yield f"usage by {report.by}: {counted(report.sessions, 'session')} ({scope}{since}) in {store_label}"
    if not report.rows:
        hint = "" if report.scope == "all" else " (--all counts every directory's)"
        yield f"no usage to report{hint}"
        yield from _skipped(report)
        return
    head = [report.by, *COLUMNS, *COLUMNS_REST]
    table = [head, *(_cells(row) for row in report.rows), _cells(report.total)]
    widths = [max(len(line[column]) for line in table) for column in range(len(head))]
    for index, line in enumerate(table):
        if index == len(table) - 1:
            yield "  ".join("-" * width for width in widths)
        cells = [line[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True))]
        yield "  ".join(cells).rstrip()
    notes = list(cost_notes(report.total))
    yield from ["", *notes] if notes else []
    yield from _skipped(report)


def _cells(row: Row) -> list[str]:
    return [row.label if len(row.label) <= 40 else row.label[:39] + "…", *figures(row)]


def figures(row: Row) -> list[str]:
    """A row's figures, in the order of :data:`COLUMNS` and :data:`COLUMNS_REST`."""
    runs = row.runs
    counts = [row.sessions, runs.total, runs.completed, runs.failed, runs.aborted, runs.open, row.attempts, row.input]
    counts += [row.output, row.cacheRead, row.cacheWrite]
    return [*(f"{count:,}" for count in counts), rate_text(row.cacheHitRate), money(row.figure)]


def cost_notes(row: Row) -> Iterator[str]:
    """Where the cost column's figures came from, and which tokens have none."""
    if row.costFrom:
        yield f"cost: {source(row.figure)}"
    if row.unreported:
        yield f"usage not reported by {counted(row.unreported, 'model attempt')}: n/a, in no token column and no cost"
    if row.unpriced:
        yield f'no price for {row.unpriced}: their tokens are not in the cost (add [models."NAME"] prices to the config)'


def _skipped(report: Report) -> Iterator[str]:
    if report.skipped:
        yield ""
        yield f"left out: {len(report.skipped)} session(s) that could not be read"
        for line in report.skipped[:20]:
            yield f"  {line}"
