"""Tool calls: ``toolStarted`` records (session-v2 §9.5) and tool result entries (§8.3).

Pure.  Each reference rule sits next to its fast twin.  The fast path takes
a started call's success or error; pre-execution and synthetic results take
the reference path.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tiny_agent.fold.books import RunBook
from tiny_agent.fold.contract import (
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    PRE_EXECUTION_REASON_WORDS,
    PRE_EXECUTION_RESULT_KEYS,
    REPLAY_WORDS,
    RESULT_KEYS,
    RESULT_TYPE_WORDS,
    STARTED_RESULT_KEYS,
    TOOL_RESULT,
    TOOL_STARTED_KEYS,
    fail,
    is_replay_policy,
    is_safe_int,
    is_word,
    not_text,
    not_uuid,
    one_of,
    require_uuid,
    show,
    unknown_key,
    uuid_match,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.transcript_rules import tool_turn
from tiny_agent.fold.typed import MessageEntry, ToolStartedWire, ToolWire
from tiny_agent.journal.json_profile import NOT_TEXT, decode_text
from tiny_agent.journal.state import AppliedEntry, ToolCallState
from tiny_agent.journal.transcript import SYNTHETIC_TEXTS, AssistantMessage, ToolCall, ToolMessage


class ToolRules(FoldCore):
    # -- toolStarted (§9.5) -----------------------------------------------------------

    def _tool_started_record(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= TOOL_STARTED_KEYS:
            unknown_key(record, TOOL_STARTED_KEYS, "toolStarted record")
        operation = self._lookup_operation(record.get("operationId"), "toolStarted operationId")
        if type(operation) is not RunBook:
            fail(INVALID_TRANSITION, "toolStarted outside a run")
        run = operation.state
        assistant_id = record.get("assistantEntryId")
        target = self.state.entries.get(assistant_id) if type(assistant_id) is str else None
        if target is None or target.operationId != run.operationId or target.stopReason != "toolUse":
            require_uuid(assistant_id, "toolStarted assistantEntryId")
            fail(INVALID_REFERENCE, f"assistantEntryId {assistant_id} is not a toolUse message of this run")
        tool_index = record.get("toolIndex")
        if not is_safe_int(tool_index):
            fail(INVALID_FACT, f"toolStarted toolIndex is not a safe non-negative integer: {show(tool_index)}")
        call_id = record.get("toolCallId")
        if type(call_id) is not str or not call_id:
            not_text(call_id, "toolStarted toolCallId")
        tool_name = record.get("toolName")
        if type(tool_name) is not str or not tool_name:
            not_text(tool_name, "toolStarted toolName")
        calls = _calls_of(target)
        if tool_index >= len(calls):
            fail(INVALID_REFERENCE, f"entry {assistant_id} has no tool call at index {tool_index}")
        call = calls[tool_index]
        if call.id != call_id or call.function.name != tool_name:
            fail(INVALID_REFERENCE, f"tool call {tool_index} of entry {assistant_id} is not {call_id}/{tool_name}")
        step_id = target.stepId
        if step_id is None or step_id != record.get("stepId"):
            fail(INVALID_REFERENCE, f"entry {assistant_id} belongs to step {step_id}, not {show(record.get('stepId'))}")
        pair = (target.id, tool_index)
        if pair in self._used_pairs:
            fail(INVALID_TRANSITION, f"tool call {tool_index} of entry {assistant_id} was already started or answered")
        arguments = record.get("arguments")
        if type(arguments) is not dict:
            fail(INVALID_FACT, "toolStarted arguments is not a JSON object")
        replay = record.get("replay")
        if not is_replay_policy(replay):
            fail(INVALID_FACT, f"toolStarted replay is not {one_of(REPLAY_WORDS)}: {show(replay)}")
        replay_key = record.get("replayKey")
        if type(replay_key) is not str or not replay_key:
            not_text(replay_key, "toolStarted replayKey")
        environment = record.get("environmentIdentity")
        if type(environment) is not str or not environment:
            not_text(environment, "toolStarted environmentIdentity")
        if tool_name not in self._attempts[target.attemptId].tool_names:
            fail(INVALID_TRANSITION, f"tool {tool_name} is not declared in the configuration of its step")
        result_id = self._reserve(record.get("resultEntryId"), TOOL_RESULT, "toolStarted resultEntryId")
        started = ToolCallState(
            run.operationId,
            fact_id,
            step_id,
            target.id,
            tool_index,
            call_id,
            tool_name,
            arguments,
            replay,
            replay_key,
            environment,
            result_id,
            "pending",
        )
        self._start_tool(operation, started, pair)

    def _fast_tool_started(self, record: ToolStartedWire, fact_id: str) -> bool:
        operation = self._current
        if type(operation) is not RunBook or operation.state.operationId != record.operation_id:
            return False
        target = self.state.entries.get(record.assistant_entry_id)
        if target is None:
            return False
        step_id = target.stepId
        if (
            step_id is None
            or step_id != record.step_id
            or target.operationId != record.operation_id
            or target.stopReason != "toolUse"
        ):
            return False
        # A toolUse entry holds an assistant message with tool calls (its settling rules say so).
        message = target.message
        if type(message) is not AssistantMessage or message.tool_calls is UNSET:
            return False
        calls = message.tool_calls
        tool_index = record.tool_index
        if tool_index >= len(calls):
            return False
        call = calls[tool_index]
        tool_name = record.tool_name
        pair = (target.id, tool_index)
        if (
            call.id != record.tool_call_id
            or call.function.name != tool_name
            or pair in self._used_pairs
            or tool_name not in self._attempts[target.attemptId].tool_names
            or not self._reservable(record.result_entry_id, fact_id)
        ):
            return False
        self._reserved[record.result_entry_id] = TOOL_RESULT
        # IDs and names are taken from what the fold already holds (equal to the record's):
        # the state then points at one string each instead of a fresh copy per line.
        started = ToolCallState(
            operation.state.operationId,
            fact_id,
            step_id,
            target.id,
            tool_index,
            call.id,
            call.function.name,
            record.arguments,
            record.replay,
            record.replay_key,
            record.environment_identity,
            record.result_entry_id,
            "pending",
        )
        self._start_tool(operation, started, pair)
        return True

    def _start_tool(self, operation: RunBook, started: ToolCallState, pair: tuple[str, int]) -> None:
        self._used_pairs.add(pair)
        self._tool_started[started.toolStartedId] = started
        operation.state.toolCalls.append(started)
        operation.pending += 1

    # -- tool result entries (§8.3) ------------------------------------------------

    def _tool_entry(self, entry: dict[str, Any], fact_id: str, message: ToolMessage, timestamp: int) -> AppliedEntry:
        pre_execution = "assistantEntryId" in entry or "toolIndex" in entry
        allowed = PRE_EXECUTION_RESULT_KEYS if pre_execution else STARTED_RESULT_KEYS
        if not entry.keys() <= allowed:
            unknown_key(entry, allowed, "tool result entry")
        result = entry.get("result")
        if type(result) is not dict:
            fail(INVALID_FACT, "tool result is not an object")
        if not result.keys() <= RESULT_KEYS:
            unknown_key(result, RESULT_KEYS, "tool result")
        step_id = entry.get("stepId")
        if type(step_id) is not str or uuid_match(step_id) is None:
            not_uuid(step_id, "tool result stepId")
        tool_name = entry.get("toolName")
        if type(tool_name) is not str or not tool_name:
            not_text(tool_name, "tool result toolName")
        if pre_execution:
            operation_id = self._pre_execution_result(entry, message, result, step_id, tool_name)
        else:
            operation_id = self._started_result(entry, fact_id, message, result, step_id, tool_name)
        return AppliedEntry(
            fact_id, len(self._entry_order), message, len(self.state.transcript), operation_id, step_id, None, None, timestamp
        )

    def _started_result(
        self,
        entry: dict[str, Any],
        fact_id: str,
        message: ToolMessage,
        result: dict[str, Any],
        step_id: str,
        tool_name: str,
    ) -> str:
        if self._reserved.get(fact_id) != TOOL_RESULT:
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
            fail(INVALID_FACT, f"tool result type is not {one_of(RESULT_TYPE_WORDS)}: {show(result_type)}")
        started_id = entry.get("toolStartedId")
        started = self._tool_started.get(started_id) if type(started_id) is str else None
        if started is None:
            require_uuid(started_id, "tool result toolStartedId")
            fail(INVALID_REFERENCE, f"toolStartedId {started_id} names no toolStarted record")
        mismatch = started_mismatch(started, step_id, fact_id, message.tool_call_id, tool_name)
        if mismatch is not None:
            fail(INVALID_REFERENCE, f"tool result does not match toolStarted {started_id}: {mismatch}")
        self._complete_tool(started, fact_id)
        return started.operationId

    def _fast_tool_entry(self, entry: MessageEntry, wire: ToolWire, fact_id: str, timestamp: int) -> bool:
        """A started call's success or error (pre-execution and synthetic results take the reference path)."""
        started_id = entry.tool_started_id
        if (
            started_id is UNSET
            or entry.attempt_id is not UNSET
            or entry.stop_reason is not UNSET
            or entry.result is UNSET
            or self._reserved.get(fact_id) != TOOL_RESULT
        ):
            return False
        started = self._tool_started.get(started_id)
        if started is None or started_mismatch(started, entry.step_id, fact_id, wire.tool_call_id, entry.tool_name) is not None:
            return False
        content = decode_text(wire.content)
        if content is NOT_TEXT:
            return False
        call_id = started.toolCallId
        message = ToolMessage(content, call_id)
        self._complete_tool(started, fact_id)
        record = AppliedEntry(
            fact_id,
            len(self._entry_order),
            message,
            len(self.state.transcript),
            started.operationId,
            started.stepId,
            None,
            None,
            timestamp,
        )
        self._append_message(record, message, tool_turn(self._outstanding, call_id))
        return True

    def _complete_tool(self, started: ToolCallState, result_id: str) -> None:
        started.status = "completed"
        self._operations[started.operationId].pending -= 1
        del self._reserved[result_id]

    def _pre_execution_result(
        self, entry: dict[str, Any], message: ToolMessage, result: dict[str, Any], step_id: str, tool_name: str
    ) -> str:
        reason = result.get("reason")
        if result.get("type") != "synthetic" or not is_word(reason, PRE_EXECUTION_REASON_WORDS):
            fail(
                INVALID_FACT,
                f"a pre-execution tool result must be synthetic with reason {one_of(PRE_EXECUTION_REASON_WORDS)}",
            )
        assistant_id = require_uuid(entry.get("assistantEntryId"), "tool result assistantEntryId")
        tool_index = entry.get("toolIndex")
        if not is_safe_int(tool_index):
            fail(INVALID_FACT, f"tool result toolIndex is not a safe non-negative integer: {show(tool_index)}")
        current = self._current
        if type(current) is not RunBook:
            fail(INVALID_REFERENCE, "a pre-execution tool result needs a current run")
        run_id = current.state.operationId
        target = self.state.entries.get(assistant_id)
        if target is None or target.message is None or target.operationId != run_id or target.stepId != step_id:
            fail(INVALID_REFERENCE, f"assistantEntryId {assistant_id} is not a message of this run and step")
        calls = _calls_of(target)
        if tool_index >= len(calls):
            fail(INVALID_REFERENCE, f"entry {assistant_id} has no tool call at index {tool_index}")
        call = calls[tool_index]
        if call.id != message.tool_call_id or call.function.name != tool_name:
            fail(
                INVALID_REFERENCE,
                f"tool call {tool_index} of entry {assistant_id} is not {message.tool_call_id}/{tool_name}",
            )
        pair = (assistant_id, tool_index)
        if pair in self._used_pairs:
            fail(INVALID_TRANSITION, f"tool call {tool_index} of entry {assistant_id} was already started or answered")
        if message.content != SYNTHETIC_TEXTS[reason]:
            fail(INVALID_TRANSCRIPT, f"{reason} tool result content is not the fixed {reason} text")
        self._used_pairs.add(pair)
        return run_id


def _calls_of(entry: AppliedEntry) -> list[ToolCall]:
    """The tool calls of an entry's message (none for a user or tool message, or a compaction)."""
    message = entry.message
    if type(message) is not AssistantMessage or message.tool_calls is UNSET:
        return []
    return message.tool_calls


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
