"""Typed shapes of the common, well-formed journal lines: what the fold's fast path decodes.

The reducer's reference path reads every line as untrusted dicts and checks
each rule in the contract's order.  Most lines of a real journal are
ordinary: a message entry, a run's records, usage, a seal.  The fast path
decodes those straight into the Structs below (msgspec checks member types,
required members and unknown members in C) and, when the line fits and every
remaining rule holds, applies it without building dicts.  A line that does
not fit goes to the reference path, so these shapes may be *narrower* than
the contract (rare fact kinds, pre-execution tool results, failed outcomes
are simply absent here) but never wider.

Constraints the duplicate-key proof of
:class:`tiny_agent.json_profile.ProvenLineDecoder` puts on these types:

- no float member anywhere (integers are ``int``; untyped members refuse
  floats through the decoder's ``float_hook``);
- optional members default to UNSET, and Structs omit defaults;
- a tag only on a Struct that is decoded as one member of a tagged union
  (the tag is then required); ``MessageEntry.type`` is a plain member.

They hold for the types borrowed from :mod:`tiny_agent.state` and
:mod:`tiny_agent.transcript` too (``ConfigurationSnapshot``, ``ToolCall``);
tests/test_fast_path.py walks every reachable type and fails if an edit
anywhere breaks one of them.

Scalar rules that need no context (enumerated strings, integer ranges,
non-empty strings) are stated here as ``Literal`` and ``Meta`` types, which
msgspec checks in C while decoding; a value outside them sends the line to
the reference path.

Message contents are ``msgspec.Raw``: the fold decodes each one with
:func:`tiny_agent.json_profile.decode_text`, which validates it and keeps CPython
from caching a second, UTF-8 copy of the text inside the str.

Pure declarations.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from tiny_agent.state import ConfigurationSnapshot
from tiny_agent.transcript import ToolCall

_shape = {"forbid_unknown_fields": True, "omit_defaults": True, "gc": False}

MAX_SAFE_INTEGER: Final = 9007199254740991
"""2^53 - 1: the largest integer every JSON reader holds exactly (session-v2 §3)."""
SafeInt = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
"""A safe non-negative integer (session-v2 §3)."""
Seq = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
Text = Annotated[str, Meta(min_length=1)]
"""A non-empty string (§3)."""


# -- messages (session-v2 §7) --------------------------------------------------


class UserWire(msgspec.Struct, tag_field="role", tag="user", **_shape):
    content: Raw


class AssistantWire(msgspec.Struct, tag_field="role", tag="assistant", **_shape):
    content: Raw
    """A string or null: decoded with ``decode_text(..., nullable=True)``."""
    tool_calls: Union[list[ToolCall], UnsetType] = UNSET


class ToolWire(msgspec.Struct, tag_field="role", tag="tool", **_shape):
    content: Raw
    tool_call_id: str


MessageWire = Union[UserWire, AssistantWire, ToolWire]


# -- entries (§8) ------------------------------------------------------------


class ResultWire(msgspec.Struct, **_shape):
    """A started call's result (synthetic results take the reference path)."""

    type: Literal["success", "error"]


class MessageEntry(msgspec.Struct, **_shape):
    """Every message entry shape in one: the fold checks which members the role allows."""

    type: Literal["message"]
    message: MessageWire
    stepId: Union[str, UnsetType] = UNSET
    attemptId: Union[str, UnsetType] = UNSET
    stopReason: Union[Literal["stop", "toolUse", "length"], UnsetType] = UNSET
    toolName: Union[str, UnsetType] = UNSET
    toolStartedId: Union[str, UnsetType] = UNSET
    result: Union[ResultWire, UnsetType] = UNSET


# -- records (§9) ------------------------------------------------------------


class RunStartedWire(msgspec.Struct, tag_field="type", tag="runStarted", **_shape):
    operationId: str
    operationKind: Literal["run"]
    inputEntryId: str


class StepAttemptWire(msgspec.Struct, tag_field="type", tag="stepAttempt", **_shape):
    """A run's first attempt at a step (retries and compaction steps take the reference path)."""

    operationId: str
    stepId: str
    attemptId: str
    stepKind: Literal["assistant"]
    attempt: Literal[1]
    contextThroughEntryId: str
    configurationSnapshot: ConfigurationSnapshot
    configurationDigest: str


class ToolStartedWire(msgspec.Struct, tag_field="type", tag="toolStarted", **_shape):
    operationId: str
    stepId: str
    assistantEntryId: str
    toolIndex: SafeInt
    toolCallId: str
    toolName: str
    arguments: dict[str, Any]
    replay: Literal["safe", "never"]
    replayKey: Text
    environmentIdentity: Text
    resultEntryId: str


class OperationFinishedWire(msgspec.Struct, tag_field="type", tag="operationFinished", **_shape):
    """A run completed (other outcomes and compactions take the reference path)."""

    operationId: str
    operationKind: Literal["run"]
    outcome: Literal["completed"]
    completion: Literal["normal", "truncated"]
    finalEntryId: str


RecordWire = Union[RunStartedWire, StepAttemptWire, ToolStartedWire, OperationFinishedWire]


# -- facts (§5, §10, v3 seal) -------------------------------------------------


class EntryFactWire(msgspec.Struct, tag_field="kind", tag="entry", **_shape):
    seq: Seq
    id: str
    timestamp: SafeInt
    entry: MessageEntry


class RecordFactWire(msgspec.Struct, tag_field="kind", tag="record", **_shape):
    seq: Seq
    id: str
    timestamp: SafeInt
    record: RecordWire


class UsageWire(msgspec.Struct, **_shape):
    input: SafeInt
    output: SafeInt
    cacheRead: SafeInt
    cacheWrite: SafeInt


class UsageFactWire(msgspec.Struct, tag_field="kind", tag="usage", **_shape):
    seq: Seq
    id: str
    timestamp: SafeInt
    operationId: str
    usage: UsageWire
    attemptId: Union[str, UnsetType] = UNSET
    toolStartedId: Union[str, UnsetType] = UNSET


class RawResponseWire(msgspec.Struct, **_shape):
    """A text response body (a ``bodyBase64`` one takes the reference path)."""

    status: SafeInt
    contentType: Union[str, None]
    body: str


class RawFactWire(msgspec.Struct, tag_field="kind", tag="raw", **_shape):
    seq: Seq
    id: str
    timestamp: SafeInt
    operationId: str
    attemptId: str
    raw: RawResponseWire


class SealFactWire(msgspec.Struct, tag_field="kind", tag="seal", **_shape):
    seq: Seq
    id: str
    timestamp: SafeInt
    chain: str


FactWire = Union[EntryFactWire, RecordFactWire, UsageFactWire, RawFactWire, SealFactWire]

LineWire = Union[list[FactWire], FactWire]
"""A transaction line: one fact, or an array of facts."""
