"""Tool calls: ``toolStarted`` records (session-v2 §9.5), v3 ``mcp`` facts and tool result entries (§8.3).

Pure.  The fast twins take a started call and its success or error; the rest take the reference rules.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tiny_agent.fold import contract
from tiny_agent.fold.contract import (
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    check_body,
    fail,
    is_safe_int,
    is_word,
    one_of,
    require_keys,
    require_object,
    require_text,
    require_uuid,
    show,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.transcript_rules import tool_turn
from tiny_agent.fold.typed import MessageEntry, ToolWire
from tiny_agent.journal.facts import ToolStarted
from tiny_agent.journal.json_profile import NOT_TEXT, decode_text
from tiny_agent.journal.state import AppliedEntry, IdleOperation, ReplayPolicy, RunOperation, ToolCallState
from tiny_agent.journal.transcript import SYNTHETIC_TEXTS, AssistantMessage, ToolCall, ToolMessage

# -- toolStarted (§9.5) -----------------------------------------------------------


def tool_started(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    require_keys(record, contract.TOOL_STARTED_KEYS, "toolStarted record")
    run = fold.lookup_operation(record.get("operationId"), "toolStarted operationId")
    if type(run) is not RunOperation:
        fail(INVALID_TRANSITION, "toolStarted outside a run")
    assistant_id = record.get("assistantEntryId")
    target = fold.state.entries.get(assistant_id) if type(assistant_id) is str else None
    if target is None or target.operationId != run.operationId or target.stopReason != "toolUse":
        require_uuid(assistant_id, "toolStarted assistantEntryId")
        fail(INVALID_REFERENCE, f"assistantEntryId {assistant_id} is not a toolUse message of this run")
    tool_index = record.get("toolIndex")
    if not is_safe_int(tool_index):
        fail(INVALID_FACT, f"toolStarted toolIndex is not a safe non-negative integer: {show(tool_index)}")
    call_id = require_text(record.get("toolCallId"), "toolStarted toolCallId")
    tool_name = require_text(record.get("toolName"), "toolStarted toolName")
    call = _call_at(target, tool_index, call_id, tool_name)
    step_id = target.stepId
    if step_id is None or step_id != record.get("stepId"):
        fail(INVALID_REFERENCE, f"entry {assistant_id} belongs to step {step_id}, not {show(record.get('stepId'))}")
    _unused(fold, target.id, tool_index)
    arguments = record.get("arguments")
    if type(arguments) is not dict:
        fail(INVALID_FACT, "toolStarted arguments is not a JSON object")
    replay = record.get("replay")
    if not is_word(replay, contract.REPLAY_WORDS):
        fail(INVALID_FACT, f"toolStarted replay is not {one_of(contract.REPLAY_WORDS)}: {show(replay)}")
    replay_key = require_text(record.get("replayKey"), "toolStarted replayKey")
    environment = require_text(record.get("environmentIdentity"), "toolStarted environmentIdentity")
    if tool_name not in _declared(fold, target):
        fail(INVALID_TRANSITION, f"tool {tool_name} is not declared in the configuration of its step")
    result_id = fold.reserve(record.get("resultEntryId"), contract.TOOL_RESULT, "toolStarted resultEntryId")
    _start(fold, run, fact_id, target, call, tool_index, arguments, replay, replay_key, environment, result_id)


def fast_tool_started(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    record: ToolStarted = fact.record
    run = fold.state.operation
    target = fold.state.entries.get(record.assistantEntryId)
    if type(run) is not RunOperation or run.operationId != record.operationId or target is None:
        return False
    step_id = target.stepId
    if (
        step_id is None
        or step_id != record.stepId
        or target.operationId != record.operationId
        or target.stopReason != "toolUse"
        or not record.replayKey
        or not record.environmentIdentity
    ):
        return False
    # A toolUse entry holds an assistant message with tool calls (its settling rules say so).
    message = target.message
    if type(message) is not AssistantMessage or message.tool_calls is UNSET:
        return False
    calls = message.tool_calls
    tool_index = record.toolIndex
    if tool_index >= len(calls):
        return False
    call = calls[tool_index]
    tool_name = record.toolName
    pair = (target.id, tool_index)
    if (
        call.id != record.toolCallId
        or call.function.name != tool_name
        or pair in fold.books.used_pairs
        or tool_name not in _declared(fold, target)
        or not fold.reservable(record.resultEntryId, fact_id)
    ):
        return False
    result_id = record.resultEntryId
    fold.books.reserved[result_id] = contract.TOOL_RESULT
    arguments, replay, key, environment = record.arguments, record.replay, record.replayKey, record.environmentIdentity
    _start(fold, run, fact_id, target, call, tool_index, arguments, replay, key, environment, result_id)
    return True


def _start(
    fold: FoldCore,
    run: RunOperation,
    started_id: str,
    target: AppliedEntry,
    call: ToolCall,
    index: int,
    arguments: dict[str, Any],
    replay: ReplayPolicy,
    key: str,
    environment: str,
    result_id: str,
) -> None:
    """A call started; its IDs and names are the fold's own strings (equal to the record's), not a copy per line."""
    name = call.function.name
    started = ToolCallState(
        run.operationId,
        started_id,
        target.stepId or "",
        target.id,
        index,
        call.id,
        name,
        arguments,
        replay,
        key,
        environment,
        result_id,
        "pending",
    )
    books = fold.books
    books.used_pairs.add((target.id, index))
    books.tool_calls[started_id] = started
    run.toolCalls.append(started)
    books.pending += 1


def _declared(fold: FoldCore, entry: AppliedEntry) -> frozenset[str]:
    """The tools declared by the configuration of the attempt a toolUse entry settled."""
    books = fold.books
    return books.configurations[books.attempts[entry.attemptId or ""].digest].tool_names


def _call_at(entry: AppliedEntry, index: int, call_id: str, tool_name: str) -> ToolCall:
    """The entry's tool call at ``index``, which must have this ID and name (a started or pre-execution call)."""
    message = entry.message
    calls = message.tool_calls if type(message) is AssistantMessage and message.tool_calls is not UNSET else []
    if index >= len(calls):
        fail(INVALID_REFERENCE, f"entry {entry.id} has no tool call at index {index}")
    call = calls[index]
    if call.id != call_id or call.function.name != tool_name:
        fail(INVALID_REFERENCE, f"tool call {index} of entry {entry.id} is not {call_id}/{tool_name}")
    return call


def _unused(fold: FoldCore, entry_id: str, index: int) -> tuple[str, int]:
    pair = (entry_id, index)
    if pair in fold.books.used_pairs:
        fail(INVALID_TRANSITION, f"tool call {index} of entry {entry_id} was already started or answered")
    return pair


def mcp_fact(fold: FoldCore, fact: dict[str, Any], fact_id: str) -> None:
    """v3 ``mcp``: MCP messages as they crossed the wire (docs/journal.md); they change no state."""
    require_keys(fact, contract.MCP_FACT_KEYS, "mcp fact")
    require_text(fact.get("server"), "mcp server")
    if "toolStartedId" in fact:
        started_id = require_uuid(fact["toolStartedId"], "mcp toolStartedId")
        started = fold.books.tool_calls.get(started_id)
        if started is None:
            fail(INVALID_REFERENCE, f"mcp toolStartedId {started_id} names no toolStarted record")
        if started.status != "pending":
            fail(INVALID_TRANSITION, f"mcp fact for tool call {started_id}, which is already answered")
    messages = fact.get("messages")
    if type(messages) is not list or not messages:
        fail(INVALID_FACT, "mcp messages is not a non-empty array")
    for message in messages:
        body = require_object(message, "mcp message")
        require_keys(body, contract.MCP_MESSAGE_KEYS, "mcp message")
        if body.get("direction") not in ("send", "recv"):
            fail(INVALID_FACT, f"mcp message direction is not send or recv: {show(body.get('direction'))}")
        for name in ("method", "url"):
            if name in body:
                require_text(body[name], f"mcp message {name}")
        if "status" in body and not is_safe_int(body["status"]):
            fail(INVALID_FACT, "mcp message status is not a safe non-negative integer")
        if "contentType" in body and body["contentType"] is not None and type(body["contentType"]) is not str:
            fail(INVALID_FACT, "mcp message contentType is not a string or null")
        check_body(body, "mcp message")


# -- tool result entries (§8.3) ------------------------------------------------


def tool_entry(fold: FoldCore, entry: dict[str, Any], fact_id: str, message: ToolMessage, timestamp: int) -> None:
    pre_execution = "assistantEntryId" in entry or "toolIndex" in entry
    require_keys(
        entry, contract.PRE_EXECUTION_RESULT_KEYS if pre_execution else contract.STARTED_RESULT_KEYS, "tool result entry"
    )
    result = require_object(entry.get("result"), "tool result")
    require_keys(result, contract.RESULT_KEYS, "tool result")
    step_id = require_uuid(entry.get("stepId"), "tool result stepId")
    tool_name = require_text(entry.get("toolName"), "tool result toolName")
    if pre_execution:
        operation_id = _pre_execution_result(fold, entry, message, result, step_id, tool_name)
    else:
        operation_id = _started_result(fold, entry, fact_id, message, result, step_id, tool_name)
    fold.append_message(
        fact_id, message, timestamp, tool_turn(fold.books.outstanding, message.tool_call_id), operation_id, step_id
    )


def _started_result(
    fold: FoldCore,
    entry: dict[str, Any],
    fact_id: str,
    message: ToolMessage,
    result: dict[str, Any],
    step_id: str,
    tool_name: str,
) -> str:
    if fold.books.reserved.get(fact_id) != contract.TOOL_RESULT:
        fail(INVALID_REFERENCE, f"tool result id {fact_id} was not reserved by a toolStarted record")
    result_type = result.get("type")
    if result_type == "success" or result_type == "error":
        if "reason" in result:
            fail(INVALID_FACT, f"a {result_type} tool result has a reason")
    elif result_type == "synthetic":
        if result.get("reason") != "interrupted":
            fail(INVALID_FACT, "a started tool result can only be synthetic for reason interrupted")
        if message.content != SYNTHETIC_TEXTS["interrupted"]:
            fail(INVALID_TRANSCRIPT, "interrupted tool result content is not the fixed interrupted text")
    else:
        fail(INVALID_FACT, f"tool result type is not {one_of(contract.RESULT_TYPE_WORDS)}: {show(result_type)}")
    started_id = entry.get("toolStartedId")
    started = fold.books.tool_calls.get(started_id) if type(started_id) is str else None
    if started is None:
        require_uuid(started_id, "tool result toolStartedId")
        fail(INVALID_REFERENCE, f"toolStartedId {started_id} names no toolStarted record")
    mismatch = started_mismatch(started, step_id, fact_id, message.tool_call_id, tool_name)
    if mismatch is not None:
        fail(INVALID_REFERENCE, f"tool result does not match toolStarted {started_id}: {mismatch}")
    _complete(fold, started, fact_id)
    return started.operationId


def fast_tool_result(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    """A started call's success or error (pre-execution and synthetic results take the reference rule)."""
    entry: MessageEntry = fact.entry
    wire: ToolWire = fact.entry.message
    started_id = entry.toolStartedId
    result = entry.result
    if (
        started_id is UNSET
        or result is UNSET
        or result.reason is not UNSET
        or result.type == "synthetic"
        or entry.attemptId is not UNSET
        or entry.stopReason is not UNSET
        or entry.assistantEntryId is not UNSET
        or entry.toolIndex is not UNSET
        or fold.books.reserved.get(fact_id) != contract.TOOL_RESULT
    ):
        return False
    started = fold.books.tool_calls.get(started_id)
    if started is None or started_mismatch(started, entry.stepId, fact_id, wire.tool_call_id, entry.toolName) is not None:
        return False
    content = decode_text(wire.content)
    if content is NOT_TEXT:
        return False
    call_id = started.toolCallId
    message = ToolMessage(content, call_id)
    _complete(fold, started, fact_id)
    breach = tool_turn(fold.books.outstanding, call_id)
    fold.append_message(fact_id, message, fact.timestamp, breach, started.operationId, started.stepId)
    return True


def _complete(fold: FoldCore, started: ToolCallState, result_id: str) -> None:
    """A started call answered; only the current run counts its pending calls (a result may come after its run)."""
    books = fold.books
    started.status = "completed"
    operation = fold.state.operation
    if not isinstance(operation, IdleOperation) and operation.operationId == started.operationId:
        books.pending -= 1
    del books.reserved[result_id]


def started_mismatch(started: ToolCallState, step_id: object, fact_id: str, call_id: str, tool_name: object) -> str | None:
    """How a result entry differs from the ``toolStarted`` it names, or None (§8.3, started result rule 5)."""
    if started.stepId != step_id:
        return "stepId differs"
    if started.resultEntryId != fact_id:
        return "it reserved another result id"
    if started.toolCallId != call_id:
        return "tool_call_id differs"
    if started.toolName != tool_name:
        return "toolName differs"
    if started.status != "pending":
        return "the call is already answered"
    return None


def _pre_execution_result(
    fold: FoldCore, entry: dict[str, Any], message: ToolMessage, result: dict[str, Any], step_id: str, tool_name: str
) -> str:
    reason = result.get("reason")
    if result.get("type") != "synthetic" or not is_word(reason, contract.PRE_EXECUTION_REASON_WORDS):
        fail(
            INVALID_FACT,
            f"a pre-execution tool result must be synthetic with reason {one_of(contract.PRE_EXECUTION_REASON_WORDS)}",
        )
    assistant_id = require_uuid(entry.get("assistantEntryId"), "tool result assistantEntryId")
    tool_index = entry.get("toolIndex")
    if not is_safe_int(tool_index):
        fail(INVALID_FACT, f"tool result toolIndex is not a safe non-negative integer: {show(tool_index)}")
    run = fold.state.operation
    if type(run) is not RunOperation:
        fail(INVALID_REFERENCE, "a pre-execution tool result needs a current run")
    target = fold.state.entries.get(assistant_id)
    if target is None or target.message is None or target.operationId != run.operationId or target.stepId != step_id:
        fail(INVALID_REFERENCE, f"assistantEntryId {assistant_id} is not a message of this run and step")
    _call_at(target, tool_index, message.tool_call_id, tool_name)
    pair = _unused(fold, assistant_id, tool_index)
    if message.content != SYNTHETIC_TEXTS[reason]:
        fail(INVALID_TRANSCRIPT, f"{reason} tool result content is not the fixed {reason} text")
    fold.books.used_pairs.add(pair)
    return run.operationId
