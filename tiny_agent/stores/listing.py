"""What every store lists, made from states and lines (no I/O): a session's summary, its row in ``sessions``, its usage
buckets for ``report``.  The file store keeps summaries in its index file, the PostgreSQL store in its index table."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Final, Literal

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal.facts import RawResponse
from tiny_agent.journal.links import Origin, Parent, lineage_words
from tiny_agent.journal.state import Header, IdleOperation, SessionState, outcome_summary, refused
from tiny_agent.journal.transcript import Usage, UserMessage

Status = Literal["idle", "refused", "failed", "aborted", "truncated", "step-limit", "open", "corrupt", "unreadable"]
"""A journal at rest: idle (its last run completed), refused (it ended with a refusal), how its last run ended
otherwise, open, or not readable."""


class Bucket(msgspec.Struct):
    """One session's usage on one UTC day with one model, and the runs it started that day with that model."""

    day: str
    """``YYYY-MM-DD`` (UTC): of the usage fact; of a run's start for its outcome."""
    model: str
    """The model of the attempt (its configuration snapshot); a run counts under its first attempt's model."""
    attempts: int = 0
    reported: int = 0
    """Attempts whose response reported usage (the others have no usage fact: not reported, not zero)."""
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    completed: int = 0
    failed: int = 0
    aborted: int = 0
    open: int = 0
    reports: int = 0
    """Attempts whose response reported its own cost (OpenRouter's ``usage.cost``)."""
    cost: float = 0.0
    """USD those responses reported, for the usage in ``costed``."""
    costed: Usage = Usage()


class Summary(msgspec.Struct):
    """A session as a listing shows it (a corrupt one: its header, when intact, and its error)."""

    session: str
    created: int | None
    model: str | None
    status: Status
    cwd: str | None = None
    provider: str | None = None
    runs: int = 0
    prompt: str | None = None
    usage: Usage = Usage()
    error: str | None = None
    buckets: list[Bucket] = msgspec.field(default_factory=list)
    reason: str | None = None
    """How the last run ended, in words (failed: why; truncated; step limit...)."""
    origin: Origin | None = None
    parent: Parent | None = None


class Listed(msgspec.Struct):
    """One row of ``tiny-agent sessions``."""

    session: str
    handle: str
    path: str
    created: int | None
    cwd: str | None
    model: str | None
    status: str
    """A :data:`Status`, or ``crashed``, ``running by pid N``, ``locked by pid N`` (docs/cli.md, *sessions*)."""
    runs: int
    prompt: str | None
    tokens: int
    input: int
    output: int
    error: str | None = None
    reason: str | None = None
    parent: str | None = None
    lineage: str | None = None
    """Where the session came from, in words: ``fork of <handle> at line N`` or ``upgrade of <v2 file>``."""


class ReportEntry(msgspec.Struct):
    """What ``tiny-agent report`` reads of one session: its summary (with buckets) and its handle."""

    handle: str
    path: str
    summary: Summary


def summary_of(state: SessionState) -> Summary:
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
        prompt=next((message.content for message in state.transcript if type(message) is UserMessage), None),
        usage=state.usage,
        origin=state.origin,
        parent=state.parent,
    )


def failed_summary(session: str, status: Status, error: CorruptionError | str, header: Header | None = None) -> Summary:
    """A journal that cannot be listed from its state: ``corrupt`` (with its header when that is intact) or ``unreadable``."""
    if header is None:
        return Summary(session=session, created=None, model=None, status=status, error=str(error))
    return Summary(
        session=header.id, created=header.createdAt, model=header.model, status=status, cwd=header.cwd,
        provider=header.provider, error=str(error),
    )


def _status_of(state: SessionState) -> Status:
    if type(state.operation) is not IdleOperation:
        return "open"
    last = state.lastRunOutcome
    if refused(last, state):
        return "refused"
    if last is None or last.outcome == "completed":
        return "idle"
    if last.outcome == "aborted":
        return "aborted"
    return _FAILURE_STATUS.get(last.errorCode or "", "failed")


_FAILURE_STATUS: Final[dict[str, Status]] = {"length_without_calls": "truncated", "step_limit": "step-limit"}


def listed_row(summary: Summary, handle: str, name: str, holder: str | None, handles: Mapping[str, str]) -> Listed:
    """A row of ``sessions``: ``holder`` says who writes the session now (``pid N``; empty if unknown), None if nobody does;
    ``handles`` names a fork's parent when the store holds it."""
    status: str = summary.status
    if holder is not None:
        by = f" by {holder}" if holder else ""
        status = f"running{by}" if status == "open" else f"locked{by}"
    elif status == "open":
        status = "crashed"
    parent, usage = summary.parent, summary.usage
    return Listed(
        session=summary.session,
        handle=handle,
        path=name,
        created=summary.created,
        cwd=summary.cwd,
        model=summary.model,
        status=status,
        runs=summary.runs,
        prompt=summary.prompt,
        tokens=usage.input + usage.output + usage.cacheRead + usage.cacheWrite,
        reason=summary.reason,
        input=usage.input,
        output=usage.output,
        error=summary.error,
        parent=parent.session if parent is not None else None,
        lineage=lineage_words(summary.origin, parent, handles.get(parent.session) if parent is not None else None),
    )


class _Snapshot(msgspec.Struct):
    model: str
    adapterIdentity: str = ""


class _Record(msgspec.Struct):
    type: str
    operationId: str = ""
    operationKind: str = ""
    attemptId: str = ""
    outcome: str = ""
    configurationSnapshot: _Snapshot | None = None


class _Envelope(msgspec.Struct):
    """A fact's envelope and the few members the buckets need; contents are skipped, never decoded."""

    kind: str
    timestamp: int = 0
    attemptId: str = ""
    usage: Usage | None = None
    record: _Record | None = None


class _Raw(msgspec.Struct):
    kind: str
    attemptId: str = ""
    raw: RawResponse | None = None


_ENVELOPES: Final = msgspec.json.Decoder(list[_Envelope] | _Envelope)
_RAWS: Final = msgspec.json.Decoder(list[_Raw] | _Raw)
COST_MARK: Final = b'\\"cost\\"'
"""``"cost"`` inside a body stored as a JSON string: only lines holding it can report a cost."""


def usage_buckets(lines: Iterator[tuple[int, bytes]], header_model: str) -> list[Bucket]:
    """Usage per (UTC day, model), runs by outcome, and the costs responses reported, from an accepted journal: only each
    fact's envelope is decoded, and the body of a response only when its line holds ``"cost"``."""
    tally = _Tally(header_model)
    for number, line in lines:
        if number > 1:
            if COST_MARK in line:
                raws = _RAWS.decode(line)
                for raw in raws if isinstance(raws, list) else [raws]:
                    tally.raw(raw)
            decoded = _ENVELOPES.decode(line)
            for fact in decoded if isinstance(decoded, list) else [decoded]:
                tally.fact(fact)
    return tally.buckets()


BUCKETS_VERSION: Final = 3
"""Of the buckets a database keeps beside a session (2: the costs responses reported; 3: attempts that reported
usage); others are made again."""


class _Kept(msgspec.Struct):
    version: int
    buckets: list[Bucket]


def kept_buckets(buckets: list[Bucket]) -> bytes:
    return msgspec.json.encode(_Kept(BUCKETS_VERSION, buckets))


def read_kept(data: bytes) -> list[Bucket] | None:
    """The buckets :func:`kept_buckets` encoded, or None when they are of another version (or not buckets)."""
    try:
        kept = msgspec.json.decode(data, type=_Kept)
    except msgspec.DecodeError:
        return None
    return kept.buckets if kept.version == BUCKETS_VERSION else None


class _Tally:
    def __init__(self, header_model: str) -> None:
        self.header_model = header_model
        self.by_key: dict[tuple[str, str], Bucket] = {}
        self.attempt_models: dict[str, str] = {}
        self.attempt_apis: dict[str, str] = {}
        self.reported: set[str] = set()
        self.costs: dict[str, float] = {}
        """Attempt id -> the cost its response reported, until its usage fact."""
        self.runs: dict[str, tuple[str, str | None]] = {}
        """Open runs: operation id -> (day it started, model of its first attempt)."""

    def bucket(self, day: str, model: str | None) -> Bucket:
        key = (day, model or self.header_model)
        found = self.by_key.get(key)
        if found is None:
            found = self.by_key[key] = Bucket(day=key[0], model=key[1])
        return found

    def fact(self, fact: _Envelope) -> None:
        if fact.kind == "usage" and fact.usage is not None:
            bucket, usage = self.bucket(utc_day(fact.timestamp), self.attempt_models.get(fact.attemptId)), fact.usage
            bucket.input += usage.input
            bucket.output += usage.output
            bucket.cacheRead += usage.cacheRead
            bucket.cacheWrite += usage.cacheWrite
            if fact.attemptId and fact.attemptId not in self.reported:
                self.reported.add(fact.attemptId)
                bucket.reported += 1
            cost = self.costs.pop(fact.attemptId, None)
            if cost is not None:
                bucket.reports += 1
                bucket.cost += cost
                bucket.costed = bucket.costed + usage
        elif fact.kind == "record" and fact.record is not None:
            self.record(fact.record, utc_day(fact.timestamp))

    def raw(self, fact: _Raw) -> None:
        """The cost a stored response reports, read as audit reads it."""
        from tiny_agent.wire.registry import derive

        if fact.kind == "raw" and fact.raw is not None and fact.attemptId in self.attempt_apis:
            cost = derive(fact.raw, self.attempt_apis[fact.attemptId]).outcome.derivation.cost
            if cost is not None:
                self.costs[fact.attemptId] = cost

    def record(self, record: _Record, day: str) -> None:
        if record.type == "runStarted":
            self.runs[record.operationId] = (day, None)
        elif record.type == "stepAttempt" and record.configurationSnapshot is not None:
            model = record.configurationSnapshot.model
            self.attempt_models[record.attemptId] = model
            self.attempt_apis[record.attemptId] = record.configurationSnapshot.adapterIdentity
            self.bucket(day, model).attempts += 1
            run = self.runs.get(record.operationId)
            if run is not None and run[1] is None:
                self.runs[record.operationId] = (run[0], model)
        elif record.type == "operationFinished" and record.operationKind == "run":
            run = self.runs.pop(record.operationId, None)
            if run is not None:
                bucket = self.bucket(*run)
                outcome = record.outcome if record.outcome in ("completed", "aborted") else "failed"
                setattr(bucket, outcome, getattr(bucket, outcome) + 1)

    def buckets(self) -> list[Bucket]:
        for run in self.runs.values():
            self.bucket(*run).open += 1
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
