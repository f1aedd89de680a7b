"""The fast path's shapes of journal lines, derived from the fact Structs that write them (docs/performance.md).

Pure declarations.  Only message entries have a shape of their own (:class:`MessageEntry`): the entry
Structs share ``type: "message"``.  The duplicate-key proof needs of every shape (tests/test_fast_path.py
checks): no float member, no default but UNSET, a tag only inside a tagged union.
"""

from __future__ import annotations

import functools
import operator
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeVar, Union, cast, get_args, get_origin

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from tiny_agent.journal import facts
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER, NOT_TEXT, decode_text_or_null
from tiny_agent.journal.transcript import StopReason, ToolCall

SafeInt = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
"""A safe non-negative integer (session-v2 §3): every integer of a journal is one (some have a higher minimum)."""

S = TypeVar("S", bound=msgspec.Struct)


def shape(struct: type[S], **members: Any) -> type[S]:
    """``struct`` as the fast path decodes it: a closed, untracked subclass whose only defaults are UNSET (another
    default is dropped: the member is required), nested Structs with defaults shaped too; ``members`` retypes members."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in msgspec.structs.fields(struct):
        kind = members.get(field.name, _narrowed(field.type))
        fields.append((field.name, kind, UNSET) if field.default is UNSET else (field.name, kind))
    made = msgspec.defstruct(
        struct.__name__ + "Wire", fields, bases=(struct,), module=__name__, kw_only=True, omit_defaults=True, gc=False
    )
    return cast("type[S]", made)


def _narrowed(kind: Any) -> Any:
    if kind is int:
        return SafeInt
    if get_origin(kind) in (Union, UnionType):
        return functools.reduce(operator.or_, map(_narrowed, get_args(kind)))
    if get_origin(kind) is list:
        return list[_narrowed(get_args(kind)[0])]  # type: ignore[misc]
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct) and not kind.__struct_config__.omit_defaults:
        fields = msgspec.structs.fields(kind)
        if any(field.default is not msgspec.NODEFAULT or field.default_factory is not msgspec.NODEFAULT for field in fields):
            return shape(kind)
    return kind


# -- message entries (session-v2 §7, §8) -------------------------------------------------------


class UserWire(msgspec.Struct, tag_field="role", tag="user", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    content: Raw


class AssistantWire(msgspec.Struct, tag_field="role", tag="assistant", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    content: Raw
    """A string or null."""
    tool_calls: list[ToolCall] | UnsetType = UNSET


class ToolWire(msgspec.Struct, tag_field="role", tag="tool", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    content: Raw
    tool_call_id: str


if TYPE_CHECKING:
    ResultWire = facts.ToolResult
else:
    ResultWire = shape(facts.ToolResult)


class MessageEntry(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """Every message entry shape in one: which members a role allows is the fold's to check."""

    type: Literal["message"]
    message: UserWire | AssistantWire | ToolWire
    stepId: str | UnsetType = UNSET
    attemptId: str | UnsetType = UNSET
    stopReason: StopReason | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    toolStartedId: str | UnsetType = UNSET
    result: ResultWire | UnsetType = UNSET
    assistantEntryId: str | UnsetType = UNSET
    toolIndex: SafeInt | UnsetType = UNSET


# -- facts (§5, §9, §10, v3) ---------------------------------------------------------------------

RECORD_SHAPES: Final = {record: shape(record) for record in get_args(facts.Record)}
RunStartedWire: Final = RECORD_SHAPES[facts.RunStarted]
StepAttemptWire: Final = RECORD_SHAPES[facts.StepAttempt]
ToolStartedWire: Final = RECORD_SHAPES[facts.ToolStarted]
OperationFinishedWire: Final = RECORD_SHAPES[facts.OperationFinished]

EntryFactWire: Final = shape(facts.EntryFact, entry=MessageEntry)
RecordFactWire: Final = shape(facts.RecordFact, record=functools.reduce(operator.or_, RECORD_SHAPES.values()))
UsageFactWire: Final = shape(facts.UsageFact)
SealFactWire: Final = shape(facts.SealFact)

FACT_SHAPES: Final[dict[facts.FactKind, type[msgspec.Struct]]] = {
    "entry": EntryFactWire,
    "record": RecordFactWire,
    "usage": UsageFactWire,
    "raw": shape(facts.RawFact),
    "mcp": shape(facts.McpFact),
    "seal": SealFactWire,
}


@functools.cache
def line_type(kinds: frozenset[facts.FactKind]) -> Any:
    """A transaction line of facts of these kinds: one fact, or an array of facts."""
    fact = functools.reduce(operator.or_, (FACT_SHAPES[kind] for kind in FACT_SHAPES if kind in kinds))
    return list[fact] | fact  # type: ignore[valid-type]


LineWire: Final = line_type(frozenset(FACT_SHAPES))
"""A line of any version's facts."""


def builtins_of(fact: msgspec.Struct) -> dict[str, Any] | None:
    """A decoded fact as the dict the reference path reads from its line; None if only the line can say (a content not text)."""
    value: dict[str, Any] = msgspec.to_builtins(fact, builtin_types=(Raw,))
    if type(fact) is EntryFactWire:
        message = value["entry"]["message"]
        content = decode_text_or_null(message["content"])
        if content is NOT_TEXT:
            return None
        message["content"] = content
    return value
