"""Journal facts as typed Structs: what a writer builds and encodes into lines.  Pure.

One Struct per fact kind, entry shape and record type of session-v2, plus the v3 ``raw``, ``seal``
and ``mcp`` facts, with the spec's (camelCase) member names.  The fold derives the member set it
accepts for each object from them (:mod:`tiny_agent.fold.contract`); tests/test_schema.py pins
them to the spec's lists.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.links import Origin, Parent
from tiny_agent.journal.state import ConfigurationSnapshot, ReplayPolicy, StepKind
from tiny_agent.journal.transcript import (
    AssistantMessage,
    Message,
    StopReason,
    SyntheticReason,
    ToolMessage,
    Usage,
    UserMessage,
)

Outcome = Literal["completed", "aborted", "failed"]
Completion = Literal["normal", "truncated"]
AbortPhase = Literal["model", "tool", "compact"]
OperationKind = Literal["run", "compaction"]
ToolResultType = Literal["success", "error", "synthetic"]
FactKind = Literal["entry", "record", "usage", "raw", "seal", "mcp"]

# Every Struct below is closed and kw_only (so the envelope comes first although seq and timestamp
# have defaults); an UNSET member is never encoded, which is how an optional member stays absent.


class HeaderLine(msgspec.Struct, tag_field="kind", tag="header", forbid_unknown_fields=True, kw_only=True):
    version: int
    id: str
    createdAt: int
    cwd: str
    provider: str
    model: str
    environmentIdentity: str
    origin: Origin | UnsetType = UNSET
    """v3 only: the v2 journal this session continues (``tiny-agent upgrade``)."""
    parent: Parent | UnsetType = UNSET
    """v3 only: the session this one was forked from, and where (``tiny-agent fork``)."""


# -- entries ----------------------------------------------------------------


class UserEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    type: Literal["message"] = "message"
    message: UserMessage


class AssistantEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    type: Literal["message"] = "message"
    stepId: str
    attemptId: str
    stopReason: StopReason
    message: AssistantMessage


class ToolResult(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    type: ToolResultType
    reason: SyntheticReason | UnsetType = UNSET


class StartedToolResultEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The outcome of a call announced by ``toolStarted``; its fact id is the reserved ``resultEntryId``."""

    type: Literal["message"] = "message"
    stepId: str
    toolStartedId: str
    toolName: str
    message: ToolMessage
    result: ToolResult


class PreExecutionResultEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A call answered without being executed (invalid arguments, unknown tool, truncated, aborted)."""

    type: Literal["message"] = "message"
    stepId: str
    assistantEntryId: str
    toolIndex: int
    toolName: str
    message: ToolMessage
    result: ToolResult


class RetainedMessage(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    sourceEntryId: str
    message: Message


class CompactionEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    type: Literal["compaction"] = "compaction"
    operationId: str
    summary: str
    compactedThroughEntryId: str
    retainedTail: list[RetainedMessage]


Entry = UserEntry | AssistantEntry | StartedToolResultEntry | PreExecutionResultEntry | CompactionEntry


# -- records ----------------------------------------------------------------


class ErrorInfo(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    code: str
    message: str


class RunStarted(msgspec.Struct, tag_field="type", tag="runStarted", forbid_unknown_fields=True, kw_only=True):
    operationId: str
    operationKind: Literal["run"] = "run"
    inputEntryId: str


class CompactionStarted(msgspec.Struct, tag_field="type", tag="compactionStarted", forbid_unknown_fields=True, kw_only=True):
    operationId: str
    operationKind: Literal["compaction"] = "compaction"
    inputThroughEntryId: str
    resultEntryId: str
    compactedEntryIds: list[str]
    retainedEntryIds: list[str]
    sourceDigest: str
    piece: int | UnsetType = UNSET
    """v3: this compaction is piece ``piece`` of one made in pieces (docs/journal.md)."""


class StepAttempt(msgspec.Struct, tag_field="type", tag="stepAttempt", forbid_unknown_fields=True, kw_only=True):
    operationId: str
    stepId: str
    attemptId: str
    stepKind: StepKind
    attempt: int
    contextThroughEntryId: str
    configurationSnapshot: ConfigurationSnapshot
    configurationDigest: str


class StepFailed(msgspec.Struct, tag_field="type", tag="stepFailed", forbid_unknown_fields=True, kw_only=True):
    operationId: str
    stepId: str
    attemptId: str
    error: ErrorInfo


class ToolStarted(msgspec.Struct, tag_field="type", tag="toolStarted", forbid_unknown_fields=True, kw_only=True):
    operationId: str
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


class AbortRequested(msgspec.Struct, tag_field="type", tag="abortRequested", forbid_unknown_fields=True, kw_only=True):
    operationId: str
    operationKind: OperationKind
    phase: AbortPhase
    toolCallId: str | UnsetType = UNSET
    reason: Literal["escape"] = "escape"


class OperationFinished(msgspec.Struct, tag_field="type", tag="operationFinished", forbid_unknown_fields=True, kw_only=True):
    operationId: str
    operationKind: OperationKind
    outcome: Outcome
    completion: Completion | UnsetType = UNSET
    finalEntryId: str | UnsetType = UNSET
    error: ErrorInfo | UnsetType = UNSET


Record = RunStarted | CompactionStarted | StepAttempt | StepFailed | ToolStarted | AbortRequested | OperationFinished


# -- facts ------------------------------------------------------------------


class _Envelope(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every fact's first members, after its kind (the tag): the order people expect when they open a journal.

    The writer stamps ``seq`` and ``timestamp`` at commit; whoever builds a fact picks its ``id`` (others may name it).
    """

    seq: int = 0
    id: str
    timestamp: int = 0


class EntryFact(_Envelope, tag_field="kind", tag="entry", kw_only=True):
    entry: Entry


class RecordFact(_Envelope, tag_field="kind", tag="record", kw_only=True):
    record: Record


class UsageFact(_Envelope, tag_field="kind", tag="usage", kw_only=True):
    operationId: str
    attemptId: str | UnsetType = UNSET
    toolStartedId: str | UnsetType = UNSET
    usage: Usage


CUT_BY_PEER: Final = "broke off"
"""How a raw ``incomplete`` starts when the connection ended before the body did: retried like a transport failure."""


class RawResponse(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A provider response exactly as received: text body, or base64 when it is not UTF-8."""

    status: int
    contentType: str | None
    body: str | UnsetType = UNSET
    bodyBase64: str | UnsetType = UNSET
    contentEncoding: str | UnsetType = UNSET
    """The ``Content-Encoding`` the body came with (gzip, deflate); the body stored is the decoded one."""
    redactions: int | UnsetType = UNSET
    """How many occurrences of a secret were replaced by a marker in the body before it was committed (>= 1)."""
    incomplete: str | UnsetType = UNSET
    """Why the body ended early (a stream cut off, a read timeout, an interrupt); the body holds what did arrive."""


class RawFact(_Envelope, tag_field="kind", tag="raw", kw_only=True):
    operationId: str
    attemptId: str
    raw: RawResponse


class McpMessage(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One MCP message as it crossed the wire: a stdio line without its LF, or one HTTP body (docs/journal.md)."""

    direction: Literal["send", "recv"]
    method: str | UnsetType = UNSET
    """HTTP requests: the method (a POST carries a message, a GET opens the server's stream)."""
    url: str | UnsetType = UNSET
    status: int | UnsetType = UNSET
    """HTTP responses: the status."""
    contentType: str | None | UnsetType = UNSET
    body: str | UnsetType = UNSET
    bodyBase64: str | UnsetType = UNSET
    redactions: int | UnsetType = UNSET
    incomplete: str | UnsetType = UNSET


class McpFact(_Envelope, tag_field="kind", tag="mcp", kw_only=True):
    """v3: MCP messages of one server, linked to the ``toolStarted`` they serve (none: start-up, shutdown)."""

    server: str
    toolStartedId: str | UnsetType = UNSET
    messages: list[McpMessage]


class SealFact(_Envelope, tag_field="kind", tag="seal", kw_only=True):
    chain: str


Fact = EntryFact | RecordFact | UsageFact | RawFact | McpFact | SealFact

_encoder = msgspec.json.Encoder()


def encode_transaction(facts: list[Fact]) -> bytes:
    """A transaction line without its LF: a bare object for one fact, an array for several."""
    if len(facts) == 1:
        return _encoder.encode(facts[0])
    return _encoder.encode(facts)


def encode_seal_only(seal: SealFact) -> bytes:
    """The closing line of a clean close: ``[seal]`` (session-v3), covering the line before it."""
    return _encoder.encode([seal])


def encode_header(header: HeaderLine) -> bytes:
    return _encoder.encode(header)


# -- reading facts back (from journals the reducer has accepted) -------------------


def decode_fact(value: dict[str, Any]) -> Fact:
    """A fact of a journal the reducer accepted (it relies on its shape) as its typed Struct.

    Entry shapes share ``type: "message"``: they are told apart as the reducer does, by the message
    role and by which members are present.
    """
    if value["kind"] == "entry":
        return EntryFact(entry=_decode_entry(value["entry"]), seq=value["seq"], id=value["id"], timestamp=value["timestamp"])
    fact: Fact = msgspec.convert(value, RecordFact | UsageFact | RawFact | McpFact | SealFact)
    return fact


def _decode_entry(entry: dict[str, Any]) -> Entry:
    match entry:
        case {"type": "compaction"}:
            return msgspec.convert(entry, CompactionEntry)
        case {"message": {"role": "user"}}:
            return msgspec.convert(entry, UserEntry)
        case {"message": {"role": "assistant"}}:
            return msgspec.convert(entry, AssistantEntry)
        case {"assistantEntryId": _} | {"toolIndex": _}:
            return msgspec.convert(entry, PreExecutionResultEntry)
        case _:
            return msgspec.convert(entry, StartedToolResultEntry)
