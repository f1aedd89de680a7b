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
:class:`tiny_agent.journal.json_profile.ProvenLineDecoder` puts on these types:

- no float member anywhere (integers are ``int``; untyped members refuse
  floats through the decoder's ``float_hook``);
- optional members default to UNSET, and Structs omit defaults;
- a tag only on a Struct that is decoded as one member of a tagged union
  (the tag is then required); ``MessageEntry.type`` is a plain member.

They hold for the types borrowed from :mod:`tiny_agent.journal.state` and
:mod:`tiny_agent.journal.transcript` too (``ConfigurationSnapshot``, ``ToolCall``);
tests/test_fast_path.py walks every reachable type and fails if an edit
anywhere breaks one of them.

Scalar rules that need no context (enumerated strings, integer ranges,
non-empty strings) are stated here as ``Literal`` and ``Meta`` types, which
msgspec checks in C while decoding; a value outside them sends the line to
the reference path.

Attribute names are snake_case; ``rename="camel"`` gives the journal's
camelCase member names (measured: no cost to decoding).  The message shapes
keep their Chat Completions names (``tool_calls``), which are snake_case on
the wire already, so they are not renamed.  tests/test_schema.py pins these
shapes to :mod:`tiny_agent.journal.facts` and to the fold's key sets.

Message contents are ``msgspec.Raw``: the fold decodes each one with
:func:`tiny_agent.journal.json_profile.decode_text`, which validates it and keeps CPython
from caching a second, UTF-8 copy of the text inside the str.

Pure declarations.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.state import ConfigurationSnapshot
from tiny_agent.journal.transcript import ToolCall

SafeInt = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
"""A safe non-negative integer (session-v2 §3)."""
Seq = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
Count = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
"""A safe integer >= 1."""
Text = Annotated[str, Meta(min_length=1)]
"""A non-empty string (§3)."""

# Every shape is closed (forbid_unknown_fields), omits its defaults when
# re-encoded (the length proof needs that) and is untracked by the cyclic GC
# (gc=False: they hold no cycles, and a replay builds millions of them).


# -- messages (session-v2 §7) --------------------------------------------------


class UserWire(msgspec.Struct, tag_field="role", tag="user", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    content: Raw


class AssistantWire(
    msgspec.Struct, tag_field="role", tag="assistant", forbid_unknown_fields=True, omit_defaults=True, gc=False
):
    content: Raw
    """A string or null: decoded with ``decode_text(..., nullable=True)``."""
    tool_calls: list[ToolCall] | UnsetType = UNSET


class ToolWire(msgspec.Struct, tag_field="role", tag="tool", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    content: Raw
    tool_call_id: str


MessageWire = UserWire | AssistantWire | ToolWire


# -- entries (§8) ------------------------------------------------------------


class ResultWire(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A started call's result (synthetic results take the reference path)."""

    type: Literal["success", "error"]


class MessageEntry(msgspec.Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """Every message entry shape in one: the fold checks which members the role allows."""

    type: Literal["message"]
    message: MessageWire
    step_id: str | UnsetType = UNSET
    attempt_id: str | UnsetType = UNSET
    stop_reason: Literal["stop", "toolUse", "length"] | UnsetType = UNSET
    tool_name: str | UnsetType = UNSET
    tool_started_id: str | UnsetType = UNSET
    result: ResultWire | UnsetType = UNSET


# -- records (§9) ------------------------------------------------------------


class RunStartedWire(
    msgspec.Struct,
    tag_field="type",
    tag="runStarted",
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    operation_id: str
    operation_kind: Literal["run"]
    input_entry_id: str


class StepAttemptWire(
    msgspec.Struct,
    tag_field="type",
    tag="stepAttempt",
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    """A run's first attempt at a step (retries and compaction steps take the reference path)."""

    operation_id: str
    step_id: str
    attempt_id: str
    step_kind: Literal["assistant"]
    attempt: Literal[1]
    context_through_entry_id: str
    configuration_snapshot: ConfigurationSnapshot
    configuration_digest: str


class ToolStartedWire(
    msgspec.Struct,
    tag_field="type",
    tag="toolStarted",
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    operation_id: str
    step_id: str
    assistant_entry_id: str
    tool_index: SafeInt
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    replay: Literal["safe", "never"]
    replay_key: Text
    environment_identity: Text
    result_entry_id: str


class OperationFinishedWire(
    msgspec.Struct,
    tag_field="type",
    tag="operationFinished",
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    """A run completed (other outcomes and compactions take the reference path)."""

    operation_id: str
    operation_kind: Literal["run"]
    outcome: Literal["completed"]
    completion: Literal["normal", "truncated"]
    final_entry_id: str


RecordWire = RunStartedWire | StepAttemptWire | ToolStartedWire | OperationFinishedWire


# -- facts (§5, §10, v3 raw and seal) -------------------------------------------


class EntryFactWire(
    msgspec.Struct, tag_field="kind", tag="entry", forbid_unknown_fields=True, omit_defaults=True, gc=False
):
    seq: Seq
    id: str
    timestamp: SafeInt
    entry: MessageEntry


class RecordFactWire(
    msgspec.Struct, tag_field="kind", tag="record", forbid_unknown_fields=True, omit_defaults=True, gc=False
):
    seq: Seq
    id: str
    timestamp: SafeInt
    record: RecordWire


class UsageWire(msgspec.Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    input: SafeInt
    output: SafeInt
    cache_read: SafeInt
    cache_write: SafeInt


class UsageFactWire(
    msgspec.Struct,
    tag_field="kind",
    tag="usage",
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    seq: Seq
    id: str
    timestamp: SafeInt
    operation_id: str
    usage: UsageWire
    attempt_id: str | UnsetType = UNSET
    tool_started_id: str | UnsetType = UNSET


class RawResponseWire(msgspec.Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A text response body (a ``bodyBase64`` one takes the reference path)."""

    status: SafeInt
    content_type: str | None
    body: str
    content_encoding: Text | UnsetType = UNSET
    redactions: Count | UnsetType = UNSET
    incomplete: Text | UnsetType = UNSET


class RawFactWire(
    msgspec.Struct,
    tag_field="kind",
    tag="raw",
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    seq: Seq
    id: str
    timestamp: SafeInt
    operation_id: str
    attempt_id: str
    raw: RawResponseWire


class SealFactWire(msgspec.Struct, tag_field="kind", tag="seal", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    seq: Seq
    id: str
    timestamp: SafeInt
    chain: str


FactWire = EntryFactWire | RecordFactWire | UsageFactWire | RawFactWire | SealFactWire

LineWire: Final = list[FactWire] | FactWire
"""A transaction line: one fact, or an array of facts."""
