"""A typed view of one session, read from its journal: what ``tiny-agent view`` draws (docs/view.md).

Operations hold steps, steps hold attempts and tool calls, with the journal's timestamps; what each response was and
what the seam kept is audit's report, the integrity verdict verify's: nothing is derived twice here.  Bounded as
docs/view.md says (*Big sessions*).  Reads the journal; builds no HTML.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
from msgspec import UNSET

from tiny_agent.agent.recovery import STEP_LIMIT_CODE
from tiny_agent.journal.facts import (
    AbortRequested,
    AssistantEntry,
    CompactionEntry,
    CompactionStarted,
    Entry,
    EntryFact,
    Fact,
    HeaderLine,
    McpFact,
    OperationFinished,
    OperationKind,
    PreExecutionResultEntry,
    RawFact,
    RawResponse,
    Record,
    RecordFact,
    RunStarted,
    StartedToolResultEntry,
    StepAttempt,
    StepFailed,
    ToolStarted,
    UserEntry,
)
from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation
from tiny_agent.oversight.audit import AttemptAudit, AuditReport, CompactionAudit, Settled, audit_chunks
from tiny_agent.oversight.cost import Cost, attempt_cost, total
from tiny_agent.oversight.mcp import mcp_lines
from tiny_agent.oversight.verify import Verdict, file_session, verify_in
from tiny_agent.providers.userconfig import ModelSettings
from tiny_agent.stores.journal import facts_of, lines_of
from tiny_agent.wire.registry import API
from tiny_agent.wire.sse import looks_like_sse

if TYPE_CHECKING:
    from tiny_agent.stores.base import Session, Store

FULL_ATTEMPTS: Final = 20
"""The first and the last this many attempts show their raw-vs-canonical panels."""
ROW_ATTEMPTS: Final = 250
"""Operations with an attempt among the first or last this many are rows; the rest are folded."""
PREVIEW_CHARS: Final = 240
"""A content's preview in a row."""
DETAIL_CHARS: Final = 16_384
"""A content shown in full (a prompt, a tool result, an answer) beyond this is cut, its size shown."""
STREAM_CHARS: Final = 16_384
"""How much of an event stream's own text a panel keeps (the reassembled body is shown as JSON)."""

OperationOutcome = Literal["completed", "failed", "aborted", "open"]
RawKind = Literal["json", "stream", "text", "binary"]


class Clip(msgspec.Struct, frozen=True):
    """A text cut to a limit, with the size of the whole."""

    text: str
    size: int
    """Characters in the whole text."""

    @property
    def cut(self) -> bool:
        return len(self.text) < self.size


def clip(text: str, limit: int) -> Clip:
    return Clip(text=text[:limit], size=len(text))


class RawView(msgspec.Struct):
    """A stored response as a panel shows it."""

    kind: RawKind
    value: Any = None
    """The decoded body (``json``), or the body a stream reassembles into (``stream``)."""
    text: Clip | None = None
    """The body's own text: an event stream, a body that is not JSON, or base64."""


class AttemptDetail(msgspec.Struct):
    """What only attempts shown in full carry: the bodies themselves."""

    raw: RawView | None
    canonical: Any = None
    """The assistant message the journal kept, as plain JSON values (None when the step failed)."""


class AttemptView(msgspec.Struct):
    number: int
    """1, 2, ... over the session (audit's numbering)."""
    attempt: int
    """1 for a step's first attempt, 2 for its retry, ..."""
    started: int
    audit: AttemptAudit
    """What audit found: the response, what the seam kept and dropped, usage, notes, drift."""
    responded: int | None = None
    """When the response's ``raw`` fact was committed."""
    ended: int | None = None
    """When the attempt was settled, failed, or closed by the next attempt."""
    answer: Clip | None = None
    """The start of the answer's text, for the row."""
    calls: list[str] = msgspec.field(default_factory=list)
    """Names of the tool calls the answer asked for."""
    cost: Cost = Cost()
    detail: AttemptDetail | None = None

    @property
    def status(self) -> Settled:
        return self.audit.settled


class ToolView(msgspec.Struct):
    name: str
    callId: str
    arguments: Clip
    replay: str | None
    """``safe`` or ``never``; None for a call answered without running (a synthetic result)."""
    outcome: str = "pending"
    """``success``, ``error``, ``pending``, or ``synthetic: <reason>``."""
    started: int | None = None
    finished: int | None = None
    result: Clip | None = None
    mcp: list[str] = msgspec.field(default_factory=list)
    """An MCP call's messages as they crossed the wire, one a line (the journal's ``mcp`` facts)."""


class StepView(msgspec.Struct):
    stepId: str
    kind: str
    attempts: list[AttemptView] = msgspec.field(default_factory=list)
    tools: list[ToolView] = msgspec.field(default_factory=list)


class CompactionView(msgspec.Struct):
    summary: Clip
    compacted: int
    """Entries the summary stands for."""
    retained: int
    """Messages kept verbatim after the summary."""
    audit: CompactionAudit | None = None
    """Its tokens before and after, what it kept, and whether it was one of pieces."""


class OperationView(msgspec.Struct):
    operationId: str
    kind: OperationKind
    number: int
    """Runs and compactions are numbered apart: run 1, run 2, compaction 1."""
    started: int
    prompt: Clip | None = None
    finished: int | None = None
    outcome: OperationOutcome = "open"
    completion: str | None = None
    errorCode: str | None = None
    errorMessage: str | None = None
    abortPhase: str | None = None
    abortAt: int | None = None
    steps: list[StepView] = msgspec.field(default_factory=list)
    compaction: CompactionView | None = None
    attempts: int = 0
    retries: int = 0
    tools: int = 0
    folded: bool = False
    """Outside the rows kept for a big session: counts only, no steps."""

    @property
    def step_limit(self) -> bool:
        return self.errorCode == STEP_LIMIT_CODE


class SessionView(msgspec.Struct):
    header: HeaderLine
    handle: str
    path: str
    verdict: Verdict
    report: AuditReport
    """Every attempt's audit (raw vs canonical, dropped fields, adapters, usage derivation, drift)."""
    operations: list[OperationView]
    attempts: list[AttemptView]
    """Every attempt, in order, with its cost (rows and panels hold the same objects)."""
    cost: Cost
    full: int
    """How many attempts at each end carry panels."""
    rows: int
    """How many attempts at each end are rows."""

    @property
    def last_run(self) -> OperationView | None:
        runs = [operation for operation in self.operations if operation.kind == "run"]
        return runs[-1] if runs else None


def build_view(
    path: Path,
    *,
    handle: str,
    prices: Mapping[str, ModelSettings],
    full: int = FULL_ATTEMPTS,
    rows: int = ROW_ATTEMPTS,
) -> SessionView:
    """Read the journal at ``path`` (raises CorruptionError if the reducer refuses it, OSError if unreadable)."""
    store, session = file_session(path)
    return build_view_of(store, session, handle=handle, prices=prices, full=full, rows=rows)


def build_view_of(
    store: Store,
    session: Session,
    *,
    handle: str,
    prices: Mapping[str, ModelSettings],
    full: int = FULL_ATTEMPTS,
    rows: int = ROW_ATTEMPTS,
) -> SessionView:
    """Read a session of a store (raises CorruptionError if the reducer refuses it)."""
    report = audit_chunks(store.chunks(session), session.name, path=session.path)
    verdict = verify_in(store, session)
    header = next(msgspec.json.decode(line, type=HeaderLine) for _, line in lines_of(store.chunks(session)))
    walk = _Walk(report, prices, full=max(0, full), rows=max(full, rows))
    for _, transaction in facts_of(store.chunks(session)):
        if not all(walk.fact(fact) for fact in transaction):
            break
    walk.finish()
    attempts = walk.attempt_views
    return SessionView(
        header=header,
        handle=handle,
        path=session.name,
        verdict=verdict,
        report=report,
        operations=walk.operations,
        attempts=attempts,
        cost=total(attempt.cost for attempt in attempts),
        full=walk.full,
        rows=walk.rows,
    )


class _Walk:
    """One pass over the facts, building operations, steps, attempts and tools in journal order."""

    def __init__(self, report: AuditReport, prices: Mapping[str, ModelSettings], *, full: int, rows: int) -> None:
        self.audits: dict[str, AttemptAudit] = {attempt.attemptId: attempt for attempt in report.attempts}
        self.compactions = {item.operationId: item for item in report.compactions}
        self.total = len(report.attempts)
        self.prices = prices
        self.full = full
        self.rows = rows
        self.operations: list[OperationView] = []
        self.attempt_views: list[AttemptView] = []
        self.current: OperationView | None = None
        self.steps: dict[str, StepView] = {}
        self.attempts: dict[str, AttemptView] = {}
        self.tools: dict[str, ToolView] = {}
        self.latest_of_step: dict[str, AttemptView] = {}
        self.prompt: Clip | None = None
        self.run_count = 0
        self.compaction_count = 0

    def at_ends(self, number: int, count: int) -> bool:
        """Whether attempt ``number`` is among the first or the last ``count`` of the session."""
        return number <= count or number > self.total - count

    def fact(self, fact: Fact) -> bool:
        """Apply one fact; False when the journal has grown past what the audit saw."""
        match fact:
            case EntryFact():
                self._entry(fact.entry, fact.timestamp)
            case RecordFact():
                return self._record(fact.record, fact.id, fact.timestamp)
            case RawFact():
                self._raw(fact)
            case McpFact() if fact.toolStartedId is not UNSET and fact.toolStartedId in self.tools:
                self.tools[fact.toolStartedId].mcp += mcp_lines(fact)
        return True

    # -- entries ---------------------------------------------------------------------

    def _entry(self, entry: Entry, at: int) -> None:
        match entry:
            case UserEntry():
                self.prompt = clip(entry.message.content, DETAIL_CHARS)
            case AssistantEntry():
                self._answered(entry, at)
            case StartedToolResultEntry():
                tool = self.tools.get(entry.toolStartedId)
                if tool is not None:
                    result = entry.result
                    tool.outcome = result.type if result.reason is UNSET else f"synthetic: {result.reason}"
                    tool.finished = at
                    tool.result = clip(entry.message.content, self._content_limit())
            case PreExecutionResultEntry():
                self._synthetic(entry, at)
            case CompactionEntry():
                if self.current is not None:
                    compaction = self.current.compaction
                    compacted = compaction.compacted if compaction else 0
                    audit = self.compactions.get(entry.operationId)
                    self.current.compaction = CompactionView(
                        clip(entry.summary, DETAIL_CHARS), compacted, len(entry.retainedTail), audit
                    )

    def _answered(self, entry: AssistantEntry, at: int) -> None:
        attempt = self.attempts.get(entry.attemptId)
        if attempt is None:
            return
        attempt.ended = at
        message = entry.message
        if message.content or not message.calls:
            limit = DETAIL_CHARS if attempt.detail is not None else PREVIEW_CHARS
            attempt.answer = clip(message.content or "(empty answer)", limit)
        attempt.calls = [call.function.name for call in message.calls]
        if attempt.detail is not None:
            attempt.detail.canonical = msgspec.to_builtins(message)

    def _synthetic(self, entry: PreExecutionResultEntry, at: int) -> None:
        step = self.steps.get(entry.stepId)
        if step is None or self.current is None:
            return
        step.tools.append(
            ToolView(
                name=entry.toolName,
                callId=entry.message.tool_call_id,
                arguments=clip("", 0),
                replay=None,
                outcome=f"synthetic: {entry.result.reason}",
                finished=at,
                result=clip(entry.message.content, PREVIEW_CHARS),
            )
        )
        self.current.tools += 1

    def _content_limit(self) -> int:
        """Contents of the latest step are kept in full when its attempt has a panel, else as a preview."""
        operation = self.current
        if operation is None or not operation.steps or not operation.steps[-1].attempts:
            return PREVIEW_CHARS
        return DETAIL_CHARS if operation.steps[-1].attempts[-1].detail is not None else PREVIEW_CHARS

    # -- records ---------------------------------------------------------------------

    def _record(self, record: Record, fact_id: str, at: int) -> bool:
        match record:
            case RunStarted():
                self.run_count += 1
                self._open(record.operationId, "run", self.run_count, at, self.prompt)
            case CompactionStarted():
                self.compaction_count += 1
                operation = self._open(record.operationId, "compaction", self.compaction_count, at, None)
                operation.compaction = CompactionView(
                    summary=clip("", 0), compacted=len(record.compactedEntryIds), retained=len(record.retainedEntryIds)
                )
            case StepAttempt():
                return self._attempt(record, at)
            case StepFailed():
                attempt = self.attempts.get(record.attemptId)
                if attempt is not None:
                    attempt.ended = at
            case ToolStarted():
                self._tool(record, fact_id, at)
            case AbortRequested():
                if self.current is not None:
                    self.current.abortPhase = record.phase
                    self.current.abortAt = at
            case OperationFinished():
                self._finish(record, at)
        return True

    def _open(self, operation_id: str, kind: OperationKind, number: int, at: int, prompt: Clip | None) -> OperationView:
        operation = OperationView(operationId=operation_id, kind=kind, number=number, started=at, prompt=prompt)
        self.operations.append(operation)
        self.current = operation
        self.prompt = None
        return operation

    def _attempt(self, record: StepAttempt, at: int) -> bool:
        audited = self.audits.get(record.attemptId)
        operation = self.current
        if audited is None or operation is None:
            return False
        previous = self.latest_of_step.get(record.stepId)
        if previous is not None and previous.ended is None:
            previous.ended = at
        step = self.steps.get(record.stepId)
        if step is None:
            step = StepView(stepId=record.stepId, kind=record.stepKind)
            self.steps[record.stepId] = step
            operation.steps.append(step)
        attempt = AttemptView(
            number=audited.number,
            attempt=record.attempt,
            started=at,
            audit=audited,
            cost=attempt_cost(audited, self.prices),
        )
        if self.at_ends(audited.number, self.full):
            attempt.detail = AttemptDetail(raw=None)
        step.attempts.append(attempt)
        self.attempts[record.attemptId] = attempt
        self.attempt_views.append(attempt)
        self.latest_of_step[record.stepId] = attempt
        operation.attempts += 1
        operation.retries += record.attempt > 1
        return True

    def _tool(self, record: ToolStarted, fact_id: str, at: int) -> None:
        step = self.steps.get(record.stepId)
        if step is None or self.current is None:
            return
        arguments = msgspec.json.encode(record.arguments).decode("utf-8")
        tool = ToolView(
            name=record.toolName,
            callId=record.toolCallId,
            arguments=clip(arguments, self._content_limit()),
            replay=record.replay,
            started=at,
        )
        step.tools.append(tool)
        self.tools[fact_id] = tool
        self.current.tools += 1

    def _raw(self, fact: RawFact) -> None:
        attempt = self.attempts.get(fact.attemptId)
        if attempt is None:
            return
        attempt.responded = fact.timestamp
        if attempt.detail is not None:
            response = attempt.audit.response
            attempt.detail.raw = raw_view(fact.raw, response.api if response is not None else "chat")

    def _finish(self, record: OperationFinished, at: int) -> None:
        operation = self.current
        if operation is None or operation.operationId != record.operationId:
            return
        operation.finished = at
        operation.outcome = record.outcome
        operation.completion = None if record.completion is UNSET else record.completion
        last = operation.steps[-1].attempts[-1:] if operation.steps else []
        if operation.completion == "normal" and last and last[0].audit.stopReason == "refusal":
            operation.completion = "refused"  # the model declined: its refusal is the run's answer
        if record.error is not UNSET:
            operation.errorCode = record.error.code
            operation.errorMessage = record.error.message
        self._close(operation)

    def _close(self, operation: OperationView) -> None:
        """Fold the operation when it lies outside the rows."""
        numbers = [attempt.number for step in operation.steps for attempt in step.attempts]
        position = numbers[0] if numbers else max(1, len(self.attempt_views))
        keep = any(self.at_ends(number, self.rows) for number in numbers) or (not numbers and self.at_ends(position, self.rows))
        if not keep:
            operation.folded = True
            operation.steps = []
            if operation.prompt is not None:
                operation.prompt = clip(operation.prompt.text, PREVIEW_CHARS)
        self.steps.clear()
        self.tools.clear()
        self.attempts.clear()
        self.latest_of_step.clear()
        self.current = None

    def finish(self) -> None:
        """An operation still open at the end (a crash, or a live session) keeps what it has."""
        if self.current is not None:
            self._close(self.current)


def raw_view(raw: RawResponse, api: str) -> RawView:
    """A stored body for a panel: decoded JSON, a stream and the body it reassembles into, or text."""
    if raw.body is UNSET:
        encoded = "" if raw.bodyBase64 is UNSET else raw.bodyBase64
        return RawView(kind="binary", text=clip(encoded, STREAM_CHARS))
    text = raw.body
    if looks_like_sse(text):
        return RawView(kind="stream", value=reassembled_body(text, api), text=clip(text, STREAM_CHARS))
    try:
        return RawView(kind="json", value=LineDecoder().decode(text.encode("utf-8")))
    except ProfileViolation:
        return RawView(kind="text", text=clip(text, DETAIL_CHARS))


def reassembled_body(text: str, api: str) -> Any:
    """The body the API's own stream reassembly makes of an event stream (after a problem: what had arrived)."""
    wire = next((wire for name, wire in API.items() if name == api), API["chat"])
    return wire.reassemble(text).body
