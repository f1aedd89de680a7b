"""The reduced state of a session: what the fold rebuilds from a journal (owned by the fold: read-only).

``SessionState.to_json()`` is exactly the conformance shape of session-v2 §14; the state also
carries what recovery planning and audit need besides (the entry index, the context boundary).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.links import Origin, Parent
from tiny_agent.journal.partial import entries_in_order
from tiny_agent.journal.transcript import Message, StopReason, ToolMessage, Usage, UserMessage

StepKind = Literal["assistant", "compaction"]
StepStatus = Literal["attempting", "settled", "failed"]
ReplayPolicy = Literal["safe", "never"]
ToolCallStatus = Literal["pending", "completed"]


class Header(msgspec.Struct, frozen=True):
    id: str
    createdAt: int
    cwd: str
    provider: str
    model: str
    environmentIdentity: str


class ToolDigest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    definitionDigest: str


class InstructionDigest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An instruction file (AGENTS.md) or skill (SKILL.md) offered to the model, and the SHA-256 of its bytes."""

    path: str
    digest: str


class SentOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """v3: the request options a step was sent with, as chosen (docs/journal.md): what resume reuses.

    Outside the configuration digest: ``maxTokens`` and ``toolChoice`` are in ``outputOptionsDigest``
    already (a run's), and ``stream`` changes how an answer arrives, not what it says.
    """

    maxTokens: int | UnsetType = UNSET
    toolChoice: str | UnsetType = UNSET
    stream: bool = False


class GitState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """v3: the commit checked out in the working directory's git repository, and whether its tree had changes."""

    commit: str
    dirty: bool


class ConfigurationSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a model request depends on, minus secrets, paths and clocks (session-v2 §13.1)."""

    model: str
    systemPromptDigest: str
    tools: list[ToolDigest]
    adapterIdentity: str
    routingIdentity: str
    outputOptionsDigest: str
    instructions: list[InstructionDigest] | UnsetType = UNSET
    """v3: the project instructions and skills offered, in the order offered (absent when there are none)."""
    requestOptions: SentOptions | UnsetType = UNSET
    """v3: the request options, spelled out (not digested: :meth:`digested` leaves them out)."""
    git: GitState | UnsetType = UNSET
    """v3: the git commit worked on (not digested: a new commit does not block a resume)."""

    def digested(self) -> ConfigurationSnapshot:
        """What the configuration digest covers (session-v2 §13.2; v3 adds ``instructions``)."""
        if self.requestOptions is UNSET and self.git is UNSET:
            return self
        return msgspec.structs.replace(self, requestOptions=UNSET, git=UNSET)


class LatestAttempt(msgspec.Struct):
    """The newest attempt of an operation's latest step, with the step's status as it left it (``step`` in §14)."""

    operationId: str
    stepId: str
    attemptId: str
    attempt: int
    stepKind: StepKind
    status: StepStatus
    contextThroughEntryId: str
    configurationSnapshot: ConfigurationSnapshot
    configurationDigest: str
    settledEntryId: str | UnsetType = UNSET
    stopReason: StopReason | UnsetType = UNSET
    rawId: str | UnsetType = UNSET
    """v3: the ``raw`` fact holding the provider's response to this attempt, once it landed."""
    rawStatus: int | UnsetType = UNSET
    """v3: that response's HTTP status (set with ``rawId``): tells a retryable answer (429, 5xx) from a final one."""
    rawCut: bool | UnsetType = UNSET
    """v3: the connection ended before that response's body did (its ``incomplete`` starts "broke off"): retryable."""


class ToolCallState(msgspec.Struct):
    operationId: str
    toolStartedId: str
    stepId: str
    assistantEntryId: str
    toolIndex: int
    toolCallId: str
    toolName: str
    arguments: dict[str, Any]
    replay: ReplayPolicy
    replayKey: str
    environmentIdentity: str
    resultEntryId: str
    status: ToolCallStatus


class IdleOperation(msgspec.Struct, tag_field="kind", tag="idle", frozen=True):
    pass


class RunOperation(msgspec.Struct, tag_field="kind", tag="run"):
    operationId: str
    inputEntryId: str
    toolCalls: list[ToolCallState]
    abortRequested: bool = False
    step: LatestAttempt | UnsetType = UNSET


class CompactionOperation(msgspec.Struct, tag_field="kind", tag="compaction"):
    operationId: str
    inputThroughEntryId: str
    resultEntryId: str
    abortRequested: bool = False
    step: LatestAttempt | UnsetType = UNSET


Operation = IdleOperation | RunOperation | CompactionOperation

IDLE: IdleOperation = IdleOperation()


class AppliedEntry(msgspec.Struct, gc=False):
    """An applied entry fact in the fold's index (not conformance output): where it sits and what it settled."""

    id: str
    position: int
    """Index in the entry order (all entries, messages and compactions)."""
    message: Message | None
    """None for a compaction entry."""
    transcriptIndex: int
    """Index in ``transcript``; -1 for a compaction entry."""
    operationId: str | None = None
    stepId: str | None = None
    attemptId: str | None = None
    stopReason: StopReason | None = None
    timestamp: int = 0


class FinishedOperation(msgspec.Struct, frozen=True, gc=False):
    """The ``operationFinished`` record of an operation, kept for people (not conformance output)."""

    kind: Literal["run", "compaction"]
    outcome: Literal["completed", "aborted", "failed"]
    completion: str | None = None
    errorCode: str | None = None
    errorMessage: str | None = None
    finalEntryId: str | None = None


class StepFailure(msgspec.Struct, frozen=True, gc=False):
    """A ``stepFailed`` record's error, and the response it failed on when one is on record."""

    code: str
    message: str
    rawId: str | None = None


class PendingCut(msgspec.Struct, frozen=True, gc=False):
    """Where an open compaction cuts: the last compacted message, and the message ids it retains."""

    through: str
    retained: list[str]


class SessionState(msgspec.Struct):
    header: Header
    version: int
    transcript: list[Message]
    activeContext: list[Message]
    usage: Usage
    operation: Operation
    repairedLength: int
    factCount: int = 0
    contextBoundary: str | None = None
    """ID of the last message the next step must see (session-v2 §15)."""
    entries: dict[str, AppliedEntry] = msgspec.field(default_factory=dict)
    sealed: bool = False
    """v3: the last committed line is a seal-only line (a clean close), so every byte is covered."""
    runCount: int = 0
    """Runs started in this session (finished or not)."""
    runSteps: int = 0
    """Model steps started by the current (or last) run: the step limit counts these."""
    lastSnapshot: ConfigurationSnapshot | None = None
    """The configuration of the newest model attempt: what ``run --session`` continues with."""
    lastOutcome: FinishedOperation | None = None
    """How the newest finished operation ended (for replay, sessions and view)."""
    lastCount: tuple[int, int, int] | None = None
    """The provider's count (prompt and answer tokens) of the request the context's last answer settled, and the
    transcript's and active context's lengths then: where estimates start (docs/compaction.md, *Sizes*)."""
    lastStepFailure: StepFailure | None = None
    """Why the newest failed model step failed (the run's ``operationFinished`` carries a fixed pair)."""
    lastRunOutcome: FinishedOperation | None = None
    """How the newest finished *run* ended (a compaction may have finished after it)."""
    pendingCut: PendingCut | None = None
    """The open compaction's cut, as its ``compactionStarted`` declared it (what settling it needs)."""
    origin: Origin | None = None
    """v3: the header's ``origin``, the v2 journal this session continues (not conformance output)."""
    parent: Parent | None = None
    """v3: the header's ``parent``, the session this one was forked from (not conformance output)."""

    def to_json(self) -> dict[str, Any]:
        """The conformance shape of session-v2 §14 (no version, no internal index)."""
        # Tool arguments may hold an integer too long for Python to convert, kept as its verbatim Raw text.
        shape: dict[str, Any] = msgspec.to_builtins(self._shape(), builtin_types=(msgspec.Raw,))
        return shape

    def to_json_bytes(self) -> bytes:
        """The conformance shape encoded as JSON: byte for byte ``msgspec.json.encode(self.to_json())``."""
        return _encode(self._shape())

    def _shape(self) -> _ConformanceShape:
        self.load()
        return _ConformanceShape(
            self.header, self.transcript, self.activeContext, self.usage, self.operation, self.repairedLength
        )

    def json_pieces(self, batch: int = 256) -> Iterator[bytes]:
        """:meth:`to_json_bytes` in pieces of at most ``batch`` messages: a long session's state without one buffer
        that holds every message's text again; a lean state stays lean (its older messages are streamed from the
        checkpoint, :func:`~tiny_agent.journal.partial.entries_in_order`)."""
        yield b'{"header":' + _encode(self.header) + b',"transcript":'
        entries = entries_in_order(self.entries)
        yield from json_array_pieces((entry.message for entry in entries if entry.message is not None), batch)
        yield b',"activeContext":'
        yield from json_array_pieces(self.activeContext, batch)
        tail = (b',"usage":', _encode(self.usage), b',"operation":', _encode(self.operation), b',"repairedLength":')
        yield b"".join(tail) + _encode(self.repairedLength) + b"}"

    def load(self) -> None:
        """Bring back what a lean restore left on disk (:class:`~tiny_agent.journal.partial.Elder`); a no-op otherwise."""
        elder = getattr(self.entries, "elder", None)
        if elder is not None:
            elder.load()


def json_array_pieces(items: Iterable[object], batch: int) -> Iterator[bytes]:
    """``msgspec.json.encode(list(items))`` in pieces of at most ``batch`` items (joined, they are those bytes)."""
    given = iter(items)
    opening = b"["
    while chunk := list(islice(given, batch)):
        yield opening + memoryview(_encode(chunk))[1:-1]
        opening = b","
    yield b"[]" if opening == b"[" else b"]"


class _ConformanceShape(msgspec.Struct, gc=False):
    """Session-v2 §14, in the member order of :meth:`SessionState.to_json`."""

    header: Header
    transcript: list[Message]
    activeContext: list[Message]
    usage: Usage
    operation: Operation
    repairedLength: int


_encode = msgspec.json.Encoder().encode


def outcome_summary(state: SessionState, name: str | None = None) -> str | None:
    """How the newest finished operation ended, in words: completed, cut off, failed (why), aborted, step limit."""
    last = state.lastOutcome
    if last is None:
        return None
    if last.kind == "compaction":
        return f"compaction {last.outcome}"
    if last.outcome == "completed":
        if last.completion == "truncated":
            return "completed, truncated: the model's last tool calls were cut off by its token limit and not run"
        if refused(last, state):
            return "refused: the model declined to answer (its refusal is the run's answer)"
        refused_writes = refusal_note(state)
        return "completed" if refused_writes is None else f"completed, but {refused_writes}"
    if last.outcome == "aborted":
        return "aborted (Ctrl-C, SIGTERM or resume --abort); the journal records it cleanly"
    return _failure_summary(state, last.errorCode, last.errorMessage, name or state.header.id)


def refused(last: FinishedOperation | None, state: SessionState) -> bool:
    """The finished run ``last`` ended with the model's refusal (v3 stopReason ``refusal``)."""
    final = state.entries.get(last.finalEntryId) if last is not None and last.finalEntryId else None
    return final is not None and final.stopReason == "refusal"


NOT_APPROVED: Final = " was not approved: "
"""What the result of a refused ``write`` says: ``Error: writing a.txt was not approved: <why>``."""


def refusal_note(state: SessionState) -> str | None:
    """The writes the newest run was refused (``1 write was not approved: no terminal; ...``), or None."""
    reasons = []
    for message in reversed(state.transcript):
        if type(message) is UserMessage:
            break
        if type(message) is ToolMessage and message.content.startswith("Error: ") and NOT_APPROVED in message.content:
            reasons.append(message.content.partition(NOT_APPROVED)[2])
    if not reasons:
        return None
    count = "1 write was" if len(reasons) == 1 else f"{len(reasons)} writes were"
    return f"{count} not approved: {reasons[-1]}"


def _failure_summary(state: SessionState, code: str | None, message: str | None, name: str) -> str:
    if code == "length_without_calls":
        return "failed: the answer was cut off by the model's token limit (shown above; raise --max-tokens)"
    if code == "empty_answer":
        return "failed: the model's answer was empty"
    if code == "step_limit":
        return f"{message} (raise --max-steps to let it go on)"
    failure = state.lastStepFailure
    if failure is None:
        return f"failed: {code}: {message}"
    more = f"`tiny-agent audit {name}` shows the raw response"
    return f"failed: {failure.code}: {_clip(failure.message, 160)} ({more})"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
