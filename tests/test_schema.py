"""One schema: the fact Structs, the fold's member sets and the fast path's wire shapes agree.

The member sets of the fold (:mod:`tiny_agent.fold.contract`) are derived
from the fact Structs, so these tests pin both to the spec's own lists
(session-v2 §4, §7-§10, §13.1 and session-v3, written out here by hand).
The fast path's shapes (:mod:`tiny_agent.fold.typed`) are derived from the
same Structs; these tests check that each has exactly its Struct's members,
with field types that match, and that the shapes written out by hand (the
messages, the message entry) cover exactly the contract's members.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import msgspec
import msgspec.inspect as inspect
import pytest

from tiny_agent.fold import contract
from tiny_agent.fold import typed as wire
from tiny_agent.fold.version import PROFILES, SUPPORTED_VERSIONS, V2, V3
from tiny_agent.journal import facts, state, transcript

COMPACTION_STARTED = {
    "type",
    "operationId",
    "operationKind",
    "inputThroughEntryId",
    "resultEntryId",
    "compactedEntryIds",
    "retainedEntryIds",
    "sourceDigest",
}
SPEC_MEMBERS: dict[str, set[str]] = {
    "HEADER_KEYS": {"kind", "version", "id", "createdAt", "cwd", "provider", "model", "environmentIdentity"},
    # Our v3 header: the v2 members and two optional links (docs/journal.md, "v2 compatibility").
    "V3_HEADER_KEYS": {"kind", "version", "id", "createdAt", "cwd", "provider", "model", "environmentIdentity", "origin", "parent"},
    "ORIGIN_KEYS": {"path", "length", "sha256"},
    "PARENT_KEYS": {"session", "line", "chain"},
    "ENTRY_FACT_KEYS": {"kind", "seq", "id", "timestamp", "entry"},
    "RECORD_FACT_KEYS": {"kind", "seq", "id", "timestamp", "record"},
    "USAGE_FACT_KEYS": {"kind", "seq", "id", "timestamp", "operationId", "usage", "attemptId", "toolStartedId"},
    "RAW_FACT_KEYS": {"kind", "seq", "id", "timestamp", "operationId", "attemptId", "raw"},
    "SEAL_FACT_KEYS": {"kind", "seq", "id", "timestamp", "chain"},
    "MCP_FACT_KEYS": {"kind", "seq", "id", "timestamp", "server", "toolStartedId", "messages"},
    "MCP_MESSAGE_KEYS": {
        "direction", "method", "url", "status", "contentType", "body", "bodyBase64", "redactions", "incomplete"
    },
    "USER_MESSAGE_KEYS": {"role", "content"},
    "ASSISTANT_MESSAGE_KEYS": {"role", "content", "tool_calls"},
    "TOOL_MESSAGE_KEYS": {"role", "content", "tool_call_id"},
    "TOOL_CALL_KEYS": {"id", "type", "function"},
    "FUNCTION_KEYS": {"name", "arguments"},
    "USER_ENTRY_KEYS": {"type", "message"},
    "ASSISTANT_ENTRY_KEYS": {"type", "stepId", "attemptId", "stopReason", "message"},
    "STARTED_RESULT_KEYS": {"type", "stepId", "message", "toolName", "toolStartedId", "result"},
    "PRE_EXECUTION_RESULT_KEYS": {"type", "stepId", "assistantEntryId", "toolIndex", "message", "toolName", "result"},
    "RESULT_KEYS": {"type", "reason"},
    "COMPACTION_ENTRY_KEYS": {"type", "operationId", "summary", "compactedThroughEntryId", "retainedTail"},
    "RETAINED_KEYS": {"sourceEntryId", "message"},
    "RUN_STARTED_KEYS": {"type", "operationId", "operationKind", "inputEntryId"},
    "COMPACTION_STARTED_KEYS": COMPACTION_STARTED,
    # Our v3 compactionStarted: the v2 members and the optional piece number (docs/journal.md).
    "V3_COMPACTION_STARTED_KEYS": COMPACTION_STARTED | {"piece"},
    "STEP_ATTEMPT_KEYS": {
        "type",
        "operationId",
        "stepId",
        "attemptId",
        "stepKind",
        "attempt",
        "contextThroughEntryId",
        "configurationSnapshot",
        "configurationDigest",
    },
    "STEP_FAILED_KEYS": {"type", "operationId", "stepId", "attemptId", "error"},
    "TOOL_STARTED_KEYS": {
        "type",
        "operationId",
        "stepId",
        "assistantEntryId",
        "toolIndex",
        "toolCallId",
        "toolName",
        "arguments",
        "replay",
        "replayKey",
        "environmentIdentity",
        "resultEntryId",
    },
    "ABORT_REQUESTED_KEYS": {"type", "operationId", "operationKind", "phase", "toolCallId", "reason"},
    "OPERATION_FINISHED_KEYS": {"type", "operationId", "operationKind", "outcome", "completion", "finalEntryId", "error"},
    "ERROR_KEYS": {"code", "message"},
    # The contract's usage members, and our v3 usage: the same and the optional reasoning count (docs/journal.md).
    "V2_USAGE_KEYS": {"input", "output", "cacheRead", "cacheWrite"},
    "USAGE_KEYS": {"input", "output", "cacheRead", "cacheWrite", "reasoning"},
    "SNAPSHOT_KEYS": {
        "model",
        "systemPromptDigest",
        "tools",
        "adapterIdentity",
        "routingIdentity",
        "outputOptionsDigest",
    },
    "V3_SNAPSHOT_KEYS": {
        "model",
        "systemPromptDigest",
        "tools",
        "adapterIdentity",
        "routingIdentity",
        "outputOptionsDigest",
        "instructions",
        "requestOptions",
        "git",
    },
    "TOOL_DIGEST_KEYS": {"name", "definitionDigest"},
    "INSTRUCTION_KEYS": {"path", "digest"},
    "REQUEST_OPTIONS_KEYS": {"maxTokens", "toolChoice", "stream"},
    "GIT_KEYS": {"commit", "dirty"},
    "RAW_KEYS": {"status", "contentType", "body", "bodyBase64", "contentEncoding", "redactions", "incomplete"},
}


@pytest.mark.parametrize("name", sorted(SPEC_MEMBERS))
def test_the_fold_accepts_exactly_the_specs_members(name):
    assert getattr(contract, name) == SPEC_MEMBERS[name]


def test_every_member_set_of_the_fold_is_pinned_here():
    defined = {name for name in vars(contract) if name.endswith("_KEYS")}
    assert defined == set(SPEC_MEMBERS)


def test_usage_counters_are_checked_in_the_contracts_order():
    assert contract.USAGE_COUNTERS == ("input", "output", "cacheRead", "cacheWrite", "reasoning")


# -- the wire shapes against the contract -----------------------------------------------


def _line_structs() -> list[type[msgspec.Struct]]:
    """Every Struct the fast path's line type can decode into."""
    found: list[type[msgspec.Struct]] = []

    def walk(info: Any) -> None:
        if isinstance(info, inspect.UnionType):
            for member in info.types:
                walk(member)
        elif isinstance(info, (inspect.ListType, inspect.DictType)):
            walk(info.item_type if isinstance(info, inspect.ListType) else info.value_type)
        elif isinstance(info, inspect.Metadata):
            walk(info.type)
        elif isinstance(info, inspect.StructType) and info.cls not in found:
            found.append(info.cls)
            for field in info.fields:
                walk(field.type)

    walk(inspect.type_info(wire.LineWire))
    return found


LINE_STRUCTS = _line_structs()
DERIVED = [struct for struct in LINE_STRUCTS if struct.__module__ == wire.__name__ and struct.__bases__[0] is not msgspec.Struct]
"""The shapes made by ``typed.shape``: each a subclass of the Struct it stands for."""

MESSAGE_SHAPES = [
    (wire.UserWire, "USER_MESSAGE_KEYS", transcript.UserMessage),
    (wire.AssistantWire, "ASSISTANT_MESSAGE_KEYS", transcript.AssistantMessage),
    (wire.ToolWire, "TOOL_MESSAGE_KEYS", transcript.ToolMessage),
]
"""The shapes written out by hand (message contents stay ``Raw``): exactly their messages' members."""


def test_every_fact_kind_and_record_type_has_a_derived_shape():
    stands_for = {shape.__bases__[0] for shape in DERIVED}
    assert set(get_args(facts.Fact)) | set(get_args(facts.Record)) <= stands_for
    assert {shape.__bases__[0] for shape in wire.RECORD_SHAPES.values()} == set(get_args(facts.Record))


@pytest.mark.parametrize("shape", DERIVED, ids=lambda shape: shape.__name__)
def test_a_derived_shape_has_exactly_the_members_of_its_struct(shape):
    assert contract.member_names(shape) == contract.member_names(shape.__bases__[0])


@pytest.mark.parametrize("shape, name, _", MESSAGE_SHAPES, ids=lambda item: getattr(item, "__name__", str(item)))
def test_message_shapes_have_exactly_the_contracts_members(shape, name, _):
    assert contract.member_names(shape) == getattr(contract, name)


def test_the_message_entry_shape_covers_every_message_entry_shape():
    assert contract.member_names(wire.MessageEntry) == (
        contract.USER_ENTRY_KEYS
        | contract.ASSISTANT_ENTRY_KEYS
        | contract.STARTED_RESULT_KEYS
        | contract.PRE_EXECUTION_RESULT_KEYS
    )


def _kind(info: Any) -> Any:
    """A field type reduced to what must agree between a wire shape and its fact: the kind, and literal values."""
    if isinstance(info, inspect.Metadata):
        return _kind(info.type)
    if isinstance(info, inspect.UnionType):
        # (msgspec.inspect already leaves UNSET out of an optional member's union.)
        return ("union", frozenset(map(repr, (_kind(member) for member in info.types))))
    if isinstance(info, inspect.LiteralType):
        return ("literal", frozenset(info.values))
    if isinstance(info, inspect.StructType):
        return ("struct", info.cls.__name__)
    return type(info).__name__


def _fields(shape: type[msgspec.Struct]) -> dict[str, Any]:
    info = inspect.type_info(shape)
    assert isinstance(info, inspect.StructType)
    return {field.encode_name: _kind(field.type) for field in info.fields}


# The entry and record facts hold a union of Structs msgspec cannot decode (their shapes hold shapes of their own).
FIELD_PAIRS = [
    (shape, shape.__bases__[0]) for shape in DERIVED if shape not in (wire.EntryFactWire, wire.RecordFactWire)
] + [(shape, fact) for shape, _, fact in MESSAGE_SHAPES]


@pytest.mark.parametrize("shape, fact", FIELD_PAIRS, ids=lambda item: item.__name__)
def test_wire_field_types_match_the_facts(shape, fact):
    """Same kind of value per member, a nested shape where the fact has its Struct."""
    wire_fields = _fields(shape)
    fact_fields = _fields(fact)
    for member, kind in wire_fields.items():
        expected = fact_fields[member]
        if kind == "RawType":
            # Message contents are decoded on their own (a string, or null for an assistant).
            assert expected in ("StrType", ("union", frozenset({"'NoneType'", "'StrType'"}))), member
        elif isinstance(kind, tuple) and kind[0] == "struct":
            assert expected == ("struct", kind[1].removesuffix("Wire")), member
        else:
            assert kind == expected, member


def test_message_entry_literals_match_the_fact_types():
    fields = _fields(wire.MessageEntry)
    assert fields["stopReason"] == ("literal", frozenset(get_args(transcript.StopReason)))
    assert _fields(wire.ResultWire)["type"] == ("literal", frozenset(get_args(facts.ToolResultType)))


# -- enumerations from their Literal types -------------------------------------------------


def test_enumerations_come_from_their_literal_types():
    assert transcript.STOP_REASONS == frozenset(get_args(transcript.StopReason)) == contract.STOP_REASONS
    assert transcript.PRE_EXECUTION_REASONS == frozenset(get_args(transcript.PreExecutionReason))
    assert set(transcript.SYNTHETIC_TEXTS) == set(get_args(transcript.SyntheticReason))
    assert set(get_args(transcript.SyntheticReason)) == transcript.PRE_EXECUTION_REASONS | {"interrupted"}
    assert contract.STEP_KIND_WORDS == get_args(state.StepKind)
    assert contract.REPLAY_WORDS == get_args(state.ReplayPolicy)
    assert contract.OUTCOME_WORDS == get_args(facts.Outcome)
    assert contract.ABORT_PHASE_WORDS == get_args(facts.AbortPhase)
    assert contract.RESULT_TYPE_WORDS == get_args(facts.ToolResultType)


def test_the_version_profiles_name_real_fact_kinds():
    tags = {member.__struct_config__.tag for member in get_args(facts.Fact)}
    assert tags == set(get_args(facts.FactKind)) == V3.fact_kinds
    assert V2.fact_kinds == {"entry", "record", "usage"}
    assert sorted(PROFILES) == [2, 3] and SUPPORTED_VERSIONS == (2, 3)
    assert (V2.max_attempt, V3.max_attempt) == (2, 16)
    assert (V2.sealed, V3.sealed) == (False, True)


# -- Struct options are written out, and closed ------------------------------------------------

SOURCES = [Path(module.__file__) for module in (facts, wire, state, transcript) if module.__file__]


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.name)
def test_struct_options_are_written_out(path):
    """No ``**options`` splat in a class statement: mypy and readers see every option."""
    assert not re.search(r"^class .*\*\*", path.read_text(), re.M)


def _structs(module: Any) -> list[type[msgspec.Struct]]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == module.__name__
    ]


@pytest.mark.parametrize("module", [facts, wire], ids=lambda module: module.__name__)
def test_journal_shapes_are_closed(module):
    for struct in _structs(module):
        assert struct.__struct_config__.forbid_unknown_fields, struct.__name__


def test_the_shapes_read_members_by_the_fact_structs_names():
    """No renaming: a fast rule reads a member by the name a writer sets it by."""
    for struct in LINE_STRUCTS:
        for field in msgspec.structs.fields(struct):
            assert field.encode_name == field.name, (struct.__name__, field.name)
