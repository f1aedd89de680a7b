"""One schema: the fact Structs, the fold's member sets and the fast path's wire shapes agree.

The member sets of the fold (:mod:`tiny_agent.fold.contract`) are derived
from the fact Structs, so these tests pin both to the spec's own lists
(session-v2 §4, §7-§10, §13.1 and session-v3, written out here by hand) and
pin the wire shapes (:mod:`tiny_agent.fold.typed`) to them: a wire shape may be
narrower than the contract (it then sends the line to the reference path),
never wider, and where it stands for a whole object it has exactly its
members, with field types that match.
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
    "COMPACTION_STARTED_KEYS": {
        "type",
        "operationId",
        "operationKind",
        "inputThroughEntryId",
        "resultEntryId",
        "compactedEntryIds",
        "retainedEntryIds",
        "sourceDigest",
    },
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
    "USAGE_KEYS": {"input", "output", "cacheRead", "cacheWrite"},
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
    },
    "TOOL_DIGEST_KEYS": {"name", "definitionDigest"},
    "INSTRUCTION_KEYS": {"path", "digest"},
    "RAW_KEYS": {"status", "contentType", "body", "bodyBase64", "contentEncoding", "redactions", "incomplete"},
}


@pytest.mark.parametrize("name", sorted(SPEC_MEMBERS))
def test_the_fold_accepts_exactly_the_specs_members(name):
    assert getattr(contract, name) == SPEC_MEMBERS[name]


def test_every_member_set_of_the_fold_is_pinned_here():
    defined = {name for name in vars(contract) if name.endswith("_KEYS")}
    assert defined == set(SPEC_MEMBERS)


def test_usage_counters_are_checked_in_the_contracts_order():
    assert contract.USAGE_COUNTERS == ("input", "output", "cacheRead", "cacheWrite")


# -- the wire shapes against the contract -----------------------------------------------

WHOLE_SHAPES: list[tuple[type[msgspec.Struct], str, type[msgspec.Struct] | None]] = [
    (wire.UserWire, "USER_MESSAGE_KEYS", transcript.UserMessage),
    (wire.AssistantWire, "ASSISTANT_MESSAGE_KEYS", transcript.AssistantMessage),
    (wire.ToolWire, "TOOL_MESSAGE_KEYS", transcript.ToolMessage),
    (wire.RunStartedWire, "RUN_STARTED_KEYS", facts.RunStarted),
    (wire.StepAttemptWire, "STEP_ATTEMPT_KEYS", facts.StepAttempt),
    (wire.ToolStartedWire, "TOOL_STARTED_KEYS", facts.ToolStarted),
    (wire.EntryFactWire, "ENTRY_FACT_KEYS", facts.EntryFact),
    (wire.RecordFactWire, "RECORD_FACT_KEYS", facts.RecordFact),
    (wire.UsageFactWire, "USAGE_FACT_KEYS", facts.UsageFact),
    (wire.UsageWire, "USAGE_KEYS", transcript.Usage),
    (wire.RawFactWire, "RAW_FACT_KEYS", facts.RawFact),
    (wire.SealFactWire, "SEAL_FACT_KEYS", facts.SealFact),
]
"""Wire shapes that stand for a whole object: exactly its members."""

PARTIAL_SHAPES: list[tuple[type[msgspec.Struct], set[str], type[msgspec.Struct] | None]] = [
    # Every message entry shape the fast path takes, in one Struct.
    (
        wire.MessageEntry,
        contract.USER_ENTRY_KEYS | contract.ASSISTANT_ENTRY_KEYS | contract.STARTED_RESULT_KEYS,
        None,
    ),
    (wire.ResultWire, set(contract.RESULT_KEYS), facts.ToolResult),
    (wire.OperationFinishedWire, set(contract.OPERATION_FINISHED_KEYS), facts.OperationFinished),
    (wire.RawResponseWire, set(contract.RAW_KEYS), facts.RawResponse),
]
"""Narrower shapes: what they leave out takes the reference path."""


@pytest.mark.parametrize("shape, name, _", WHOLE_SHAPES, ids=lambda item: getattr(item, "__name__", str(item)))
def test_whole_wire_shapes_have_exactly_the_contracts_members(shape, name, _):
    assert contract.member_names(shape) == getattr(contract, name)


@pytest.mark.parametrize("shape, allowed, _", PARTIAL_SHAPES, ids=lambda item: getattr(item, "__name__", "keys"))
def test_narrower_wire_shapes_stay_within_the_contract(shape, allowed, _):
    assert contract.member_names(shape) <= allowed


def test_the_message_entry_shape_covers_the_three_fast_entry_shapes():
    assert contract.member_names(wire.MessageEntry) == (
        contract.USER_ENTRY_KEYS | contract.ASSISTANT_ENTRY_KEYS | contract.STARTED_RESULT_KEYS
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


# The entry and record facts hold unions of shapes: their members are compared one shape at a time.
FIELD_PAIRS = [
    (shape, fact)
    for shape, _, fact in WHOLE_SHAPES + PARTIAL_SHAPES
    if fact is not None and shape not in (wire.EntryFactWire, wire.RecordFactWire)
]


@pytest.mark.parametrize("shape, fact", FIELD_PAIRS, ids=lambda item: item.__name__)
def test_wire_field_types_match_the_facts(shape, fact):
    """Same kind of value per member; a wire literal may list fewer values, never others."""
    wire_fields = _fields(shape)
    fact_fields = _fields(fact)
    for member, kind in wire_fields.items():
        expected = fact_fields[member]
        if isinstance(kind, tuple) and kind[0] == "literal" and isinstance(expected, tuple) and expected[0] == "literal":
            assert kind[1] <= expected[1], member
        elif isinstance(kind, tuple) and kind[0] == "literal":
            assert expected in ("StrType", "IntType"), member
        elif kind == "RawType":
            # Message contents are decoded on their own (a string, or null for an assistant).
            assert expected in ("StrType", ("union", frozenset({"'NoneType'", "'StrType'"}))), member
        elif isinstance(kind, tuple) and kind[0] == "struct":
            assert isinstance(expected, tuple), member
        else:
            assert kind == expected, member


def test_the_record_shapes_the_fast_path_takes_are_records():
    tags = {member.__struct_config__.tag for member in get_args(facts.Record)}
    wire_tags = {member.__struct_config__.tag for member in get_args(wire.RecordWire)}
    assert wire_tags <= tags
    assert set(get_args(wire.RecordWire)) <= {shape for shape, _ in FIELD_PAIRS}


def test_message_entry_literals_match_the_fact_types():
    fields = _fields(wire.MessageEntry)
    assert fields["stopReason"] == ("literal", frozenset(get_args(transcript.StopReason)))
    result = _fields(wire.ResultWire)["type"]
    assert result[1] < frozenset(get_args(facts.ToolResultType))


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


def test_wire_attributes_are_snake_case_with_camel_case_members():
    for struct in _structs(wire):
        for field in msgspec.structs.fields(struct):
            assert field.name == field.name.lower(), (struct.__name__, field.name)
            if "_" in field.name and struct not in (wire.AssistantWire, wire.ToolWire):
                assert field.encode_name != field.name, (struct.__name__, field.name)
