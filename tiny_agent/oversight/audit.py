"""Audit: for every model attempt, what the provider sent, what the seam kept, what it cost, and drift
(docs/oversight.md).  Reads a journal the reducer has accepted; pure apart from reading it."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

import msgspec
from msgspec import UNSET

from tiny_agent.agent.compaction import CHARS_PER_TOKEN, estimate_tokens, size
from tiny_agent.agent.recovery import RETRYABLE_STATUSES
from tiny_agent.agent.settlement import Settlement, settle_derived, summary_settlement
from tiny_agent.agent.transactions import USAGE_OVERFLOW
from tiny_agent.fold.fold import Fold
from tiny_agent.journal.canonical import canonical_json
from tiny_agent.journal.facts import (
    CUT_BY_PEER,
    AssistantEntry,
    CompactionEntry,
    CompactionStarted,
    Entry,
    EntryFact,
    Fact,
    McpFact,
    OperationFinished,
    PreExecutionResultEntry,
    RawFact,
    Record,
    RecordFact,
    StartedToolResultEntry,
    StepAttempt,
    StepFailed,
    ToolStarted,
    UsageFact,
    UserEntry,
)
from tiny_agent.journal.state import outcome_summary
from tiny_agent.journal.transcript import AssistantMessage, Message, Usage, compaction_summary_message
from tiny_agent.oversight.mcp import mcp_lines
from tiny_agent.stores.files import disk as filestore
from tiny_agent.stores.journal import CheckedFacts, collector_paused, lines_at
from tiny_agent.wire.registry import Derivation, StreamFacts, derive
from tiny_agent.wire.seam import Accepted

Settled = Literal["assistant", "compaction", "failed", "aborted", "retried", "open"]

_NO_RESPONSE: Final = {
    "retried": "no response on record: closed by a retry (attempt {next})",
    "open": "no response on record and not settled (a crash before the response landed)",
    "failed": "no response on record (the request itself failed, or a v2 journal)",
}
"""Why an attempt has no response on record, by how it settled."""


class ResponseAudit(msgspec.Struct):
    rawId: str
    line: int
    status: int
    contentType: str | None
    bytes: int
    responseId: str | None = None
    model: str | None = None
    finishReason: str | None = None
    seam: str = ""
    """What the seam made of it today: ``stop``/``toolUse``/``length``, or ``rejected: <reason>``."""
    derivation: str | None = None
    cost: float | None = None
    dropped: list[str] = msgspec.field(default_factory=list)
    hosted: list[str] = msgspec.field(default_factory=list)
    """Provider-side activity: the hosted tool calls the provider ran and their results (never run by us)."""
    api: str = "chat"
    adapters: list[str] = msgspec.field(default_factory=list)
    """The quirk adapters the attempt recorded (``name@version``), in the order they ran."""
    adapted: list[str] = msgspec.field(default_factory=list)
    """What each adapter changed: ``adapter: path: what``."""
    stream: StreamFacts | None = None
    """For a streamed response: its events, bytes, and what reassembly did not carry."""
    redactions: int = 0
    """Secrets replaced by a marker in the body before it was journaled."""
    incomplete: str | None = None
    """Why the body ended early, when it did."""


class AttemptAudit(msgspec.Struct):
    number: int
    operationId: str
    stepId: str
    attemptId: str
    attempt: int
    model: str
    configurationDigest: str
    systemPromptDigest: str
    adapterIdentity: str
    contextThroughEntryId: str
    requestMessages: int
    requestDigest: str
    """sha256 of the canonical JSON of the messages sent after the system prompt (the active context)."""
    settled: Settled = "open"
    stopReason: str | None = None
    failure: str | None = None
    usage: Usage | None = None
    """What its usage facts add up to; None: it has none (the response reported no usage, or there was none)."""
    response: ResponseAudit | None = None
    drift: list[str] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)


class ToolAudit(msgspec.Struct, omit_defaults=True):
    toolName: str
    toolCallId: str
    replay: str | None
    replayKey: str | None
    outcome: str
    """``success``, ``error``, ``pending``, or ``synthetic: <reason>``."""
    mcp: list[str] = msgspec.field(default_factory=list)
    """What the call exchanged with its MCP server, one message a line (:mod:`tiny_agent.oversight.mcp`)."""
    kept: str | None = None
    """For an MCP call: the tool result the transcript kept, beside the exchange."""


class InstructionAudit(msgspec.Struct):
    """An instruction file or skill offered (path and SHA-256 as the snapshot names it), from which attempt on."""

    path: str
    digest: str
    firstAttempt: int


class GitAudit(msgspec.Struct):
    """A git commit the working directory was at, whether its tree had changes, and from which attempt on."""

    commit: str
    dirty: bool
    firstAttempt: int


class ModelTotals(msgspec.Struct):
    attempts: int = 0
    usage: Usage = Usage()
    cost: float = 0.0


class CompactionAudit(msgspec.Struct):
    """One compaction: the model's context before and after it, what it kept, and whether it was one of pieces
    (docs/compaction.md, *Seeing it*)."""

    entryId: str
    operationId: str
    line: int
    summaryChars: int
    compactedThroughEntryId: str
    messagesBefore: int
    messagesAfter: int
    tokensBefore: int
    tokensAfter: int
    kept: int
    keptTokens: int
    keptFrom: int | None
    """replay's number (#N) of the first message kept."""
    beforeCounted: bool = False
    afterCounted: bool = False
    piece: int = 1
    pieces: int = 1


class AuditReport(msgspec.Struct):
    path: str
    session: str
    version: int
    attempts: list[AttemptAudit]
    dropped: dict[str, int]
    usage: Usage
    cacheHitRate: float | None
    cost: float | None
    models: dict[str, ModelTotals]
    tools: list[ToolAudit]
    drift: bool
    compactions: list[CompactionAudit] = msgspec.field(default_factory=list)
    instructions: list[InstructionAudit] = msgspec.field(default_factory=list)
    git: list[GitAudit] = msgspec.field(default_factory=list)
    mcp: list[str] = msgspec.field(default_factory=list)
    """MCP messages not linked to a call: start-up (server identity, tool list), shutdown."""
    lastRun: str | None = None
    """How the newest finished operation ended, in replay's words."""


class _Context:
    """The active context as the journal builds it, counted, not held (an uncompacted one is the whole transcript): its
    length, its size in characters (the token estimate's :func:`~tiny_agent.agent.compaction.size` adds up message by
    message) and a running digest of its canonical JSON (a hash of ``[m1,m2,…`` extended as messages are appended)."""

    def __init__(self) -> None:
        self.reset([])

    def reset(self, messages: list[Message]) -> None:
        self._hash = hashlib.sha256(b"[")
        self.length = 0
        self.chars = 0
        for message in messages:
            self.append(message)

    def append(self, message: Message) -> None:
        if self.length:
            self._hash.update(b",")
        self._hash.update(canonical_json(msgspec.to_builtins(message)))
        self.length += 1
        self.chars += size([message])

    def digest(self) -> str:
        closed = self._hash.copy()
        closed.update(b"]")
        return "sha256:" + closed.hexdigest()


def audit(path: Path, checkpoint: Fold | None = None) -> AuditReport:
    """Audit the journal at ``path`` (CorruptionError if the reducer refuses it); the lines ``checkpoint`` (a checked
    checkpoint's fold) covers are read, not folded again."""
    return audit_chunks(filestore.file_chunks(path), str(path), checkpoint, path)


def audit_chunks(chunks: Iterable[bytes], name: str, checkpoint: Fold | None = None, path: Path | None = None) -> AuditReport:
    """Audit a journal given as its bytes in chunks, from any store (``name`` is how the report names it); ``path``:
    its file, if it is one, where the fold leaves the older messages (the audit reads facts, not the transcript)."""
    walk = _Walk()
    checked = CheckedFacts(chunks, checkpoint, lines_at(path) if path is not None and checkpoint is None else None)
    with collector_paused():
        for line, transaction in checked:
            for fact in transaction:
                walk.fact(fact, line)
    state = checked.finish()
    walk.close_pieces()
    walk.finish_operation()
    attempts = list(walk.attempts.values())
    # What the seam dropped, and what a stream's reassembly did not carry (provider-only members too).
    responses = [attempt.response for attempt in attempts if attempt.response]
    dropped = Counter(path for r in responses for path in r.dropped + (r.stream.not_carried if r.stream else []))
    costs = [attempt.response.cost for attempt in attempts if attempt.response and attempt.response.cost is not None]
    return AuditReport(
        path=name,
        session=state.header.id,
        version=state.version,
        attempts=attempts,
        dropped=dict(sorted(dropped.items(), key=lambda item: (-item[1], item[0]))),
        usage=state.usage,
        cacheHitRate=state.usage.cache_hit_rate,
        cost=sum(costs) if costs else None,
        models=_per_model(attempts),
        tools=list(walk.tools.values()) + walk.synthetic,
        drift=any(attempt.drift for attempt in attempts),
        compactions=walk.compactions,
        instructions=list(walk.instructions.values()),
        git=list(walk.git.values()),
        mcp=walk.mcp,
        lastRun=outcome_summary(state),
    )


class _Walk:
    """One pass over the facts, collecting what each attempt and tool did."""

    def __init__(self) -> None:
        self.context = _Context()
        self.attempts: dict[str, AttemptAudit] = {}
        self.raw_bodies: dict[str, RawFact] = {}
        self.first_attempt_of_step: dict[str, AttemptAudit] = {}
        self.tools: dict[str, ToolAudit] = {}
        self.synthetic: list[ToolAudit] = []
        self.canonical: dict[str, AssistantMessage] = {}
        self.derivations: dict[str, Derivation] = {}
        self.summaries: dict[str, str] = {}
        """The summary each compaction attempt settled into."""
        self.compactions: list[CompactionAudit] = []
        self.pieces: list[CompactionAudit] = []
        """The pieces so far of a compaction made in pieces."""
        self.piece_of: dict[str, int] = {}
        self.messages = 0
        self.counted: tuple[int, int] | None = None
        """The provider's count of the context (prompt and answer) and the context's length then."""
        self.instructions: dict[tuple[str, str], InstructionAudit] = {}
        self.git: dict[tuple[str, bool], GitAudit] = {}
        self.latest_attempt_of_operation: dict[str, AttemptAudit] = {}
        self.latest_attempt_of_step: dict[str, AttemptAudit] = {}
        self.mcp: list[str] = []
        self._shared: dict[str, str] = {}
        """One object for each string the rows repeat (a model, a digest): msgspec decodes every line's afresh."""
        self.unfinished: list[AttemptAudit] = []
        """The current operation's attempts, checked (their bodies then let go) once no later fact can name them."""

    def finish_operation(self) -> None:
        """Check the operation's attempts against today's seam (notes, drift), then let go of what only that needed."""
        for attempt in self.unfinished:
            attempt_id = attempt.attemptId
            raw = self.raw_bodies.pop(attempt_id, None)
            _finish_attempt(attempt, raw, self.canonical.pop(attempt_id, None), self.derivations.pop(attempt_id, None))
            summary = self.summaries.pop(attempt_id, None)
            if attempt.settled == "compaction":
                _check_summary(attempt, raw, summary)
        self.unfinished.clear()

    def fact(self, fact: Fact, line: int) -> None:
        match fact:
            case EntryFact():
                if isinstance(fact.entry, CompactionEntry):
                    self._compaction(fact.id, fact.entry, line)
                else:
                    self.messages += 1
                self._entry(fact.entry)
            case RecordFact():
                self._record(fact.record, fact.id)
            case UsageFact() if fact.attemptId is not UNSET:
                attempt = self.attempts[fact.attemptId]
                attempt.usage = fact.usage if attempt.usage is None else attempt.usage + fact.usage
                if attempt.settled == "assistant" and fact.usage.prompt_total:
                    self._counted(fact.usage)
            case RawFact():
                attempt = self.attempts[fact.attemptId]
                self.raw_bodies[fact.attemptId] = fact
                derivation = derive(fact.raw, attempt.adapterIdentity)
                self.derivations[fact.attemptId] = derivation
                attempt.response = _response(fact, line, derivation)
            case McpFact() if fact.toolStartedId is not UNSET:
                self.tools[fact.toolStartedId].mcp += mcp_lines(fact)
            case McpFact():
                self.mcp += mcp_lines(fact)

    def _entry(self, entry: Entry) -> None:
        match entry:
            case CompactionEntry():
                retained = [item.message for item in entry.retainedTail]
                self.context.reset([compaction_summary_message(entry.summary), *retained])
            case UserEntry():
                self.context.append(entry.message)
            case AssistantEntry():
                self.context.append(entry.message)
                attempt = self.attempts[entry.attemptId]
                attempt.settled = "assistant"
                attempt.stopReason = entry.stopReason
                if entry.attemptId in self.raw_bodies:  # compared with what today's seam makes of it
                    self.canonical[entry.attemptId] = entry.message
            case StartedToolResultEntry():
                self.context.append(entry.message)
                tool = self.tools[entry.toolStartedId]
                result = entry.result
                tool.outcome = result.type if result.reason is UNSET else f"synthetic: {result.reason}"
                if tool.mcp and isinstance(entry.message.content, str):
                    tool.kept = entry.message.content
            case PreExecutionResultEntry():
                self.context.append(entry.message)
                self.synthetic.append(
                    ToolAudit(
                        toolName=entry.toolName,
                        toolCallId=entry.message.tool_call_id,
                        replay=None,
                        replayKey=None,
                        outcome=f"synthetic: {entry.result.reason}",
                    )
                )

    def _counted(self, usage: Usage) -> None:
        if self.counted is None and self.compactions:  # the first run request after a compaction
            self.compactions[-1].tokensAfter, self.compactions[-1].afterCounted = usage.prompt_total, True
        self.counted = (usage.prompt_total + usage.output, self.context.chars)

    def _compaction(self, entry_id: str, entry: CompactionEntry, line: int) -> None:
        before = self.context
        kept = [item.message for item in entry.retainedTail]
        tokens, counted = before.chars // CHARS_PER_TOKEN, self.counted is not None
        if self.counted is not None:  # the provider's count, then an estimate of what came after it
            tokens = self.counted[0] + (before.chars - self.counted[1]) // CHARS_PER_TOKEN
        self.counted, piece = None, self.piece_of.pop(entry.operationId, None)
        item = CompactionAudit(
            entryId=entry_id,
            operationId=entry.operationId,
            line=line,
            summaryChars=len(entry.summary),
            compactedThroughEntryId=entry.compactedThroughEntryId,
            messagesBefore=before.length,
            messagesAfter=len(kept) + 1,
            tokensBefore=tokens,
            tokensAfter=estimate_tokens([compaction_summary_message(entry.summary), *kept]),
            kept=len(kept),
            keptTokens=estimate_tokens(kept),
            keptFrom=self.messages - len(kept) + 1 if kept else None,
            beforeCounted=counted,
            piece=piece or 1,
        )
        self.compactions.append(item)
        if piece in (None, 1):
            self.close_pieces()
        if piece is not None:
            self.pieces.append(item)
        attempt = self.latest_attempt_of_operation.get(entry.operationId)
        if attempt is not None:
            attempt.settled = "compaction"
            self.summaries[attempt.attemptId] = entry.summary

    def close_pieces(self) -> None:
        for item in self.pieces:
            item.pieces = self.pieces[-1].piece
        self.pieces = []

    def _record(self, record: Record, fact_id: str) -> None:
        match record:
            case CompactionStarted() if record.piece is not UNSET:
                self.piece_of[record.operationId] = record.piece
            case StepAttempt():
                self._attempt(record)
            case StepFailed():
                attempt = self.attempts[record.attemptId]
                aborted = record.error.code == "aborted"
                attempt.settled = "aborted" if aborted else "failed"
                attempt.failure = f"{record.error.code}: {record.error.message}"
            case OperationFinished():
                self.finish_operation()
            case ToolStarted():
                share = self._shared.setdefault
                self.tools[fact_id] = ToolAudit(
                    toolName=share(record.toolName, record.toolName),
                    toolCallId=record.toolCallId,
                    replay=share(record.replay, record.replay),
                    replayKey=share(record.replayKey, record.replayKey),
                    outcome="pending",
                )

    def _attempt(self, record: StepAttempt) -> None:
        if record.attempt > 1:
            first = self.first_attempt_of_step[record.stepId]
            self.latest_attempt_of_step[record.stepId].settled = "retried"
            messages, digest = first.requestMessages, first.requestDigest
        else:
            messages, digest = self.context.length, self.context.digest()
        snapshot = record.configurationSnapshot
        share = self._shared.setdefault
        attempt = AttemptAudit(
            number=len(self.attempts) + 1,
            operationId=record.operationId,
            stepId=record.stepId,
            attemptId=record.attemptId,
            attempt=record.attempt,
            model=share(snapshot.model, snapshot.model),
            configurationDigest=share(record.configurationDigest, record.configurationDigest),
            systemPromptDigest=share(snapshot.systemPromptDigest, snapshot.systemPromptDigest),
            adapterIdentity=share(snapshot.adapterIdentity, snapshot.adapterIdentity),
            contextThroughEntryId=record.contextThroughEntryId,
            requestMessages=messages,
            requestDigest=digest,
        )
        self.attempts[record.attemptId] = attempt
        self.unfinished.append(attempt)
        for item in snapshot.instructions or []:
            self.instructions.setdefault((item.path, item.digest), InstructionAudit(item.path, item.digest, attempt.number))
        git = snapshot.git
        if git is not UNSET:
            self.git.setdefault((git.commit, git.dirty), GitAudit(git.commit, git.dirty, attempt.number))
        self.first_attempt_of_step.setdefault(record.stepId, attempt)
        self.latest_attempt_of_step[record.stepId] = attempt
        self.latest_attempt_of_operation[record.operationId] = attempt


def _response(fact: RawFact, line: int, derivation: Derivation) -> ResponseAudit:
    raw, outcome = fact.raw, derivation.outcome
    if raw.body is not UNSET:
        size = len(raw.body) if raw.body.isascii() else len(raw.body.encode("utf-8"))
    else:
        size = len(raw.bodyBase64 or "") * 3 // 4
    accepted = outcome if isinstance(outcome, Accepted) else None
    return ResponseAudit(
        rawId=fact.id,
        line=line,
        status=raw.status,
        contentType=raw.contentType,
        bytes=size,
        responseId=outcome.response_id,
        model=outcome.model,
        finishReason=outcome.finish_reason,
        seam=outcome.stop_reason if isinstance(outcome, Accepted) else f"rejected: {outcome.reason}",
        derivation=outcome.derivation.explain(),
        cost=outcome.derivation.cost,
        dropped=[] if accepted is None else accepted.dropped,
        hosted=[] if accepted is None else accepted.hosted,
        api=derivation.api,
        adapters=list(derivation.adapters),
        adapted=[f"{change.adapter}: {change.path}: {change.detail}" for change in derivation.changes],
        stream=derivation.stream,
        redactions=raw.redactions or 0,
        incomplete=None if raw.incomplete is UNSET else raw.incomplete,
    )


def _finish_attempt(
    attempt: AttemptAudit, raw: RawFact | None, canonical: AssistantMessage | None, derivation: Derivation | None
) -> None:
    """Notes for attempts without a usable response, and the drift check for the others."""
    if raw is None or derivation is None:
        _note_missing_response(attempt)
        return
    if attempt.settled == "open":
        attempt.notes.append("response on record but never settled: `tiny-agent resume` settles it without a new request")
        return
    if attempt.settled == "aborted":
        attempt.notes.append("closed by an abort after its response landed; not settled from it")
        return
    if attempt.settled == "compaction":
        return
    if attempt.settled == "retried":
        cut = raw.raw.incomplete is not UNSET and raw.raw.incomplete.startswith(CUT_BY_PEER)
        retryable = cut or raw.raw.status in RETRYABLE_STATUSES
        why = "asks to try again later" if retryable else "is not one that asks to try again (a retry it did not need)"
        why = "was cut off by the connection" if cut else why
        attempt.notes.append(f"retried: HTTP {raw.raw.status} {why}")
        return
    if attempt.failure is not None and attempt.failure.startswith(USAGE_OVERFLOW + ":"):
        attempt.notes.append("failed: the usage it reported would have taken the session's totals past what a journal holds")
        return
    if attempt.failure is not None and attempt.failure.startswith("bad_summary:"):
        # A compaction's answer that is no summary (no text, tool calls, a refusal): its rule is the summary's.
        if summary_settlement(raw.raw, attempt.adapterIdentity).failure is None:
            attempt.drift.append("today's seam takes this response as a summary but the journal failed the step")
        return
    if not derivation.recognised:
        identity = attempt.adapterIdentity
        attempt.notes.append(f"adapterIdentity {identity!r} is not one this version wrote: re-derived as plain chat")
    expected = settle_derived(raw.raw, derivation)
    if _settled_by_an_older_rule(attempt, expected):
        attempt.notes.append("failed by an older rule; today the cut-off or empty answer is kept and the run then fails")
        return
    attempt.drift.extend(_differences(attempt, canonical, expected))


def _check_summary(attempt: AttemptAudit, raw: RawFact | None, summary: str | None) -> None:
    """A compaction's summary must be what today's seam makes of its stored response."""
    if raw is None or summary is None:
        return
    expected = summary_settlement(raw.raw, attempt.adapterIdentity)
    if expected.summary != summary:
        attempt.drift.append(f"summary differs: journal {_brief(summary)} vs today's seam {_brief(expected.summary)}")


def _note_missing_response(attempt: AttemptAudit) -> None:
    note = _NO_RESPONSE.get(attempt.settled, "no response on record (a v2 journal keeps none)")
    attempt.notes.append(note.format(next=attempt.attempt + 1))


def _settled_by_an_older_rule(attempt: AttemptAudit, expected: Settlement) -> bool:
    """Journals written before cut-off and empty answers were kept failed the step instead; that is not drift."""
    message, failure = expected.message, attempt.failure or ""
    older = "length_without_calls:" if expected.stop_reason == "length" else "empty_response:"
    return attempt.settled == "failed" and message is not None and message.tool_calls is UNSET and failure.startswith(older)


def _differences(attempt: AttemptAudit, canonical: AssistantMessage | None, expected: Settlement) -> list[str]:
    """How the journal's settlement of an attempt differs from what today's seam makes of its response."""
    found = []
    if expected.failure is not None:
        code, reason = expected.failure
        if attempt.settled != "failed":
            found.append(f"today's seam fails this response ({reason}) but the journal kept an answer")
        elif attempt.failure is not None and not attempt.failure.startswith(code + ":"):
            found.append(f"failure {attempt.failure!r} in the journal, {code!r} from today's seam")
    elif attempt.settled != "assistant":
        found.append(f"today's seam accepts this response ({expected.stop_reason}) but the journal failed the step")
    else:
        if canonical != expected.message:
            found.append(f"message differs: journal {_brief(canonical)} vs today's seam {_brief(expected.message)}")
        if attempt.stopReason != expected.stop_reason:
            found.append(f"stop reason {attempt.stopReason} in the journal, {expected.stop_reason} from today's seam")
    today = expected.usage
    if today is not None and attempt.usage is not None and attempt.usage.reasoning is UNSET:
        today = msgspec.structs.replace(today, reasoning=UNSET)  # older versions kept no reasoning counter
    if attempt.usage != today and not (today is None and attempt.usage == Usage()):  # nor "not reported" (zeros)
        found.append(f"usage {_usage(attempt.usage)} in the journal, {_usage(expected.usage)} from today's seam")
    return found


def _brief(message: object) -> str:
    text = msgspec.json.encode(message).decode() if message is not None else "none"
    return text if len(text) <= 100 else text[:97] + "..."


def _usage(usage: Usage | None) -> str:
    return "n/a (not reported)" if usage is None else msgspec.json.encode(usage).decode()


def _per_model(attempts: list[AttemptAudit]) -> dict[str, ModelTotals]:
    totals: dict[str, ModelTotals] = {}
    for attempt in attempts:
        entry = totals.setdefault(attempt.model, ModelTotals())
        entry.attempts += 1
        entry.usage = entry.usage if attempt.usage is None else entry.usage + attempt.usage
        if attempt.response is not None and attempt.response.cost is not None:
            entry.cost += attempt.response.cost
    return totals
