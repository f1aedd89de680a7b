"""``sessions``: a store at a glance, without reducing every journal every time.

A summary per session (when and where it was made, its model, its status,
runs, first prompt, tokens) is kept in an index together with what the
journal looked like when it was summarized.  For the file store the index is
``.tiny-agent-index.json`` in the sessions directory, and a summary is trusted
only while the journal's length and a digest of its last bytes still match;
anything else (a new journal, an append, a changed tail) is reduced again
and the index rewritten.  The index is a cache: delete it and it is rebuilt.
Whether a writer holds a session is always checked live.

For ``tiny-agent report`` each summary also keeps the session's usage per
UTC day and model, and its runs by outcome (:class:`Bucket`), computed once
when the journal is (re)indexed by a light second read that decodes only
the envelope of each fact (never the contents).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal.links import Origin, Parent, lineage_words
from tiny_agent.journal.state import IdleOperation, SessionState, outcome_summary
from tiny_agent.journal.transcript import UserMessage
from tiny_agent.stores.base import file_holder, list_journals, session_id_of, shortest_handles

INDEX_NAME: Final = ".tiny-agent-index.json"
INDEX_VERSION: Final = 5
"""3: summaries carry usage and runs per day and model (``buckets``); 4: how the last run ended; 5: where the
session came from (``origin``, ``parent``)."""
TAIL_BYTES: Final = 4096

Status = Literal["idle", "failed", "aborted", "truncated", "step-limit", "open", "corrupt", "unreadable"]
"""A journal's state at rest: idle (its last run completed), how its last run ended otherwise, or open."""


class Bucket(msgspec.Struct):
    """One session's usage on one UTC day with one model, and the runs it started that day with that model."""

    day: str
    """``YYYY-MM-DD`` (UTC): of the usage fact; of a run's start for its outcome."""
    model: str
    """The model of the attempt (its configuration snapshot); a run counts under its first attempt's model."""
    attempts: int = 0
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    completed: int = 0
    failed: int = 0
    aborted: int = 0
    open: int = 0


class Summary(msgspec.Struct):
    session: str
    created: int | None
    model: str | None
    status: Status
    cwd: str | None = None
    provider: str | None = None
    runs: int = 0
    prompt: str | None = None
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    error: str | None = None
    buckets: list[Bucket] = msgspec.field(default_factory=list)
    reason: str | None = None
    """How the last run ended, in words (failed: why; truncated; step limit...)."""
    origin: Origin | None = None
    """The v2 journal an upgraded session continues (its header's ``origin``)."""
    parent: Parent | None = None
    """The session a fork branched from, and where (its header's ``parent``)."""


class IndexEntry(msgspec.Struct):
    size: int
    tail: str
    summary: Summary


class Index(msgspec.Struct):
    version: int = INDEX_VERSION
    journals: dict[str, IndexEntry] = msgspec.field(default_factory=dict)


class Listed(msgspec.Struct):
    """One row of ``tiny-agent sessions``."""

    session: str
    handle: str
    path: str
    created: int | None
    cwd: str | None
    model: str | None
    status: str
    """``idle``, ``failed``, ``aborted``, ``truncated``, ``step-limit``, ``crashed``, ``running by pid N``,
    ``locked by pid N`` (idle, held by a writer such as a chat), ``corrupt`` or ``unreadable``."""
    runs: int
    prompt: str | None
    tokens: int
    input: int
    output: int
    error: str | None = None
    reason: str | None = None
    """How the last run ended, in words, when it did not simply complete."""
    parent: str | None = None
    """A fork's parent session id."""
    lineage: str | None = None
    """Where the session came from, in words: ``fork of <handle> at line N`` or ``upgrade of <v2 file>``."""


def list_sessions(
    directory: Path,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cwd: str | None = None,
) -> list[Listed]:
    """Newest first (only those made in ``cwd`` when given); reduces only what the index cannot vouch for."""
    rows: list[Listed] = []
    for path, summary, handles in _summaries(directory, progress):
        if cwd is None or summary.cwd == cwd:
            rows.append(_row(path, summary, handles))
        if limit is not None and len(rows) >= limit:
            break
    return rows


class ReportEntry(msgspec.Struct):
    """What ``tiny-agent report`` reads of one session: its summary (with buckets) and its handle."""

    handle: str
    path: str
    summary: Summary


def report_entries(
    directory: Path, cwd: str | None = None, progress: Callable[[int, int], None] | None = None
) -> list[ReportEntry]:
    """Every session's summary with its buckets, newest first (only those made in ``cwd`` when given)."""
    return [
        ReportEntry(handle=handles.get(session_id_of(path) or "", ""), path=str(path), summary=summary)
        for path, summary, handles in _summaries(directory, progress)
        if cwd is None or summary.cwd == cwd
    ]


def upgrades_of(directory: Path, origin: Origin) -> list[Listed]:
    """The sessions that continue exactly these bytes of a v2 journal (an earlier ``upgrade`` of it), newest first."""
    return [
        _row(path, summary, handles)
        for path, summary, handles in _summaries(directory, None)
        if summary.origin == origin
    ]


def _summaries(
    directory: Path, progress: Callable[[int, int], None] | None
) -> Iterator[tuple[Path, Summary, dict[str, str]]]:
    """Each journal's summary and the store's handles, newest first, from the index where it still vouches.

    The index is saved if it changed, also when the caller stops early (``--limit``), since
    ``finally`` runs when a generator is closed.
    """
    journals = list_journals(directory)
    handles = shortest_handles([session_id_of(path) or "" for path in journals])
    index = _load_index(directory)
    changed = False
    try:
        for position, path in enumerate(journals, start=1):
            entry, fresh = _indexed(index, path)
            changed = changed or fresh
            if progress is not None:
                progress(position, len(journals))
            yield path, entry.summary, handles
    finally:
        if changed:
            _save_index(directory, index)


def _indexed(index: Index, path: Path) -> tuple[IndexEntry, bool]:
    """The index entry for a journal, summarizing it again if the journal changed; and whether it did."""
    try:
        size, tail = _fingerprint(path)
    except OSError as error:
        unreadable = Summary(session=session_id_of(path) or path.stem, created=None, model=None, status="unreadable")
        unreadable.error = f"unreadable: {error.strerror or error}"
        return IndexEntry(size=-1, tail="", summary=unreadable), False
    entry = index.journals.get(path.name)
    if entry is not None and entry.size == size and entry.tail == tail:
        return entry, False
    entry = IndexEntry(size=size, tail=tail, summary=summarize(path))
    if entry.summary.status != "unreadable":
        index.journals[path.name] = entry
    return entry, True


def known_lengths(directory: Path) -> dict[str, int]:
    """The length the index last saw for each journal (for ``verify``'s truncation check)."""
    return {name: entry.size for name, entry in _load_index(directory).journals.items()}


def read_journal(path: Path) -> SessionState:
    """Every line of the journal folded; the fold is imported on first use, since a listing from a warm index needs none."""
    from tiny_agent.stores.journal import read_journal as fold_every_line

    return fold_every_line(path)


def summarize(path: Path) -> Summary:
    from tiny_agent.stores.journal import committed_lines

    session = session_id_of(path) or path.stem
    try:
        state = read_journal(path)
    except CorruptionError as error:
        return Summary(session=session, created=None, model=None, status="corrupt", error=str(error))
    except OSError as error:
        reason = f"unreadable: {error.strerror or error}"
        return Summary(session=session, created=None, model=None, status="unreadable", error=reason)
    summary = summary_of(state)
    try:
        summary.buckets = usage_buckets(committed_lines(path), state.header.model)
    except (msgspec.DecodeError, msgspec.ValidationError, OSError) as error:
        # The fold has just accepted these bytes; failing now means the file changed under us.
        summary.error = f"usage by day and model unavailable: {error}"
    return summary


def summary_of(state: SessionState) -> Summary:
    first = next((message.content for message in state.transcript if type(message) is UserMessage), None)
    usage = state.usage
    header = state.header
    return Summary(
        session=header.id,
        created=header.createdAt,
        model=header.model,
        status=_status_of(state),
        reason=outcome_summary(state),
        cwd=header.cwd,
        provider=header.provider,
        runs=state.runCount,
        prompt=first,
        input=usage.input,
        output=usage.output,
        cacheRead=usage.cacheRead,
        cacheWrite=usage.cacheWrite,
        origin=state.origin,
        parent=state.parent,
    )


def _status_of(state: SessionState) -> Status:
    if type(state.operation) is not IdleOperation:
        return "open"
    last = state.lastRunOutcome
    if last is None or last.outcome == "completed":
        return "idle"
    if last.outcome == "aborted":
        return "aborted"
    return _FAILURE_STATUS.get(last.errorCode or "", "failed")


_FAILURE_STATUS: Final[dict[str, Status]] = {"length_without_calls": "truncated", "step_limit": "step-limit"}


def _row(path: Path, summary: Summary, handles: dict[str, str]) -> Listed:
    holder = None if summary.status in ("corrupt", "unreadable") else file_holder(path)
    parent = summary.parent
    lineage = lineage_words(summary.origin, parent, handles.get(parent.session) if parent is not None else None)
    return listed_row(summary, handles.get(session_id_of(path) or "", ""), str(path), holder, lineage)


def listed_row(summary: Summary, handle: str, name: str, holder: str | None, lineage: str | None) -> Listed:
    """A row of ``sessions`` from a summary, whatever the store.

    ``holder`` says who writes the session now (``pid N``; empty if unknown), None if nobody does.
    """
    status = summary.status
    if holder is not None:
        by = f" by {holder}" if holder else ""
        status_text = f"running{by}" if status == "open" else f"locked{by}"
    elif status == "open":
        status_text = "crashed"
    else:
        status_text = status
    parent = summary.parent
    return Listed(
        session=summary.session,
        handle=handle,
        path=name,
        created=summary.created,
        cwd=summary.cwd,
        model=summary.model,
        status=status_text,
        runs=summary.runs,
        prompt=summary.prompt,
        tokens=summary.input + summary.output + summary.cacheRead + summary.cacheWrite,
        reason=summary.reason,
        input=summary.input,
        output=summary.output,
        error=summary.error,
        parent=parent.session if parent is not None else None,
        lineage=lineage,
    )


def _fingerprint(path: Path) -> tuple[int, str]:
    """The journal's size and a digest of its last bytes: cheap, and enough to notice an append."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file")
        size = info.st_size
        tail = os.pread(fd, TAIL_BYTES, max(0, size - TAIL_BYTES))
    finally:
        os.close(fd)
    return size, hashlib.sha256(tail).hexdigest()


def _load_index(directory: Path) -> Index:
    """The index if it is a regular file we can read and decode; otherwise an empty one (it is only a cache)."""
    try:
        fd = os.open(directory / INDEX_NAME, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return Index()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Index()
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read()
        index = msgspec.json.decode(data, type=Index)
    except (OSError, msgspec.DecodeError):
        return Index()
    finally:
        os.close(fd)
    return index if index.version == INDEX_VERSION else Index()


def _save_index(directory: Path, index: Index) -> None:
    """Write the index atomically (a reader never sees half of it); failing to write only costs speed."""
    target = directory / INDEX_NAME
    staging = directory / f".{INDEX_NAME}.{os.getpid()}.new"
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(msgspec.json.encode(index))
        os.replace(staging, target)
    except OSError:
        # The index is a cache: a read-only or full directory only costs the next listing some speed.
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)


# -- usage per day and model, runs by outcome (for ``report``) ----------------------------


class _Snapshot(msgspec.Struct):
    model: str


class _Record(msgspec.Struct):
    type: str
    operationId: str = ""
    operationKind: str = ""
    attemptId: str = ""
    outcome: str = ""
    configurationSnapshot: _Snapshot | None = None


class _Counts(msgspec.Struct):
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0


class _Envelope(msgspec.Struct):
    """A fact's envelope and the few members the buckets need; contents are skipped, never decoded."""

    kind: str
    timestamp: int = 0
    attemptId: str = ""
    usage: _Counts | None = None
    record: _Record | None = None


_ENVELOPES: Final = msgspec.json.Decoder(list[_Envelope] | _Envelope)


def usage_buckets(lines: Iterator[tuple[int, bytes]], header_model: str) -> list[Bucket]:
    """Usage per (UTC day, model) and runs by outcome, from the committed lines of an accepted journal."""
    tally = _Tally(header_model)
    for number, line in lines:
        if number == 1:
            continue
        decoded = _ENVELOPES.decode(line)
        for fact in decoded if isinstance(decoded, list) else [decoded]:
            tally.fact(fact)
    return tally.buckets()


class _Tally:
    def __init__(self, header_model: str) -> None:
        self.header_model = header_model
        self.by_key: dict[tuple[str, str], Bucket] = {}
        self.attempt_models: dict[str, str] = {}
        self.runs: dict[str, tuple[str, str | None]] = {}
        """Open runs: operation id -> (day it started, model of its first attempt)."""

    def bucket(self, day: str, model: str) -> Bucket:
        key = (day, model)
        found = self.by_key.get(key)
        if found is None:
            found = self.by_key[key] = Bucket(day=day, model=model)
        return found

    def fact(self, fact: _Envelope) -> None:
        if fact.kind == "usage" and fact.usage is not None:
            model = self.attempt_models.get(fact.attemptId, self.header_model)
            bucket = self.bucket(utc_day(fact.timestamp), model)
            bucket.input += fact.usage.input
            bucket.output += fact.usage.output
            bucket.cacheRead += fact.usage.cacheRead
            bucket.cacheWrite += fact.usage.cacheWrite
        elif fact.kind == "record" and fact.record is not None:
            self.record(fact.record, fact.timestamp)

    def record(self, record: _Record, at: int) -> None:
        if record.type == "runStarted":
            self.runs[record.operationId] = (utc_day(at), None)
        elif record.type == "stepAttempt" and record.configurationSnapshot is not None:
            model = record.configurationSnapshot.model
            self.attempt_models[record.attemptId] = model
            self.bucket(utc_day(at), model).attempts += 1
            run = self.runs.get(record.operationId)
            if run is not None and run[1] is None:
                self.runs[record.operationId] = (run[0], model)
        elif record.type == "operationFinished" and record.operationKind == "run":
            run = self.runs.pop(record.operationId, None)
            if run is not None:
                self.count_run(run, record.outcome)

    def count_run(self, run: tuple[str, str | None], outcome: str) -> None:
        bucket = self.bucket(run[0], run[1] or self.header_model)
        if outcome == "completed":
            bucket.completed += 1
        elif outcome == "aborted":
            bucket.aborted += 1
        else:
            bucket.failed += 1

    def buckets(self) -> list[Bucket]:
        for run in self.runs.values():
            self.bucket(run[0], run[1] or self.header_model).open += 1
        return sorted(self.by_key.values(), key=lambda bucket: (bucket.day, bucket.model))


DAY_MS: Final = 86_400_000
_days: dict[int, str] = {}


def utc_day(ms: int) -> str:
    """``YYYY-MM-DD`` of a journal timestamp, in UTC (cached: a session's facts fall on few days)."""
    number = ms // DAY_MS
    day = _days.get(number)
    if day is None:
        day = _days[number] = time.strftime("%Y-%m-%d", time.gmtime(number * 86_400))
    return day
