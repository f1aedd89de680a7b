"""The transactions a session commits, as fact builders: what each step of a run writes, and nothing else.

The live loop and ``resume`` commit what these build, so a settle written live and one written from a stored
response are the same transaction.  Pure but for identifiers: state in, facts for ``JournalWriter.commit`` out.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET

from tiny_agent.agent.compaction import Cut
from tiny_agent.agent.configuration import Configuration
from tiny_agent.agent.recovery import Finish, StartStep, StartTool
from tiny_agent.agent.settlement import Settlement
from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.journal.facts import (
    AbortPhase,
    AbortRequested,
    AssistantEntry,
    CompactionEntry,
    CompactionStarted,
    EntryFact,
    ErrorInfo,
    Fact,
    OperationFinished,
    OperationKind,
    PreExecutionResultEntry,
    RawFact,
    RawResponse,
    RecordFact,
    RetainedMessage,
    RunStarted,
    StartedToolResultEntry,
    StepAttempt,
    StepFailed,
    ToolResult,
    ToolStarted,
    UsageFact,
    UserEntry,
)
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.state import (
    AppliedEntry,
    CompactionOperation,
    LatestAttempt,
    RunOperation,
    SessionState,
    ToolCallState,
)
from tiny_agent.journal.tools import ToolDeclaration
from tiny_agent.journal.transcript import (
    SYNTHETIC_TEXTS,
    AssistantMessage,
    Message,
    PreExecutionReason,
    StopReason,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

USAGE_OVERFLOW: Final = "usage_overflow"
"""The step failure code for usage the session's totals cannot take."""


def _open_operation(state: SessionState) -> RunOperation | CompactionOperation:
    operation = state.operation
    if type(operation) is RunOperation or type(operation) is CompactionOperation:
        return operation
    raise ValueError("no operation is open")


def _operation_kind(state: SessionState) -> OperationKind:
    return "run" if type(_open_operation(state)) is RunOperation else "compaction"


def open_step(state: SessionState) -> LatestAttempt:
    step = _open_operation(state).step
    if step is UNSET:
        raise ValueError("no step is open")
    return step


def _tool_call(state: SessionState, assistant_entry_id: str, tool_index: int) -> tuple[AppliedEntry, ToolCall]:
    entry = state.entries[assistant_entry_id]
    message = entry.message
    if type(message) is not AssistantMessage or tool_index >= len(message.calls):
        raise ValueError(f"entry {assistant_entry_id} has no tool call {tool_index}")
    return entry, message.calls[tool_index]


# -- runs ---------------------------------------------------------------------


def begin_run(prompt: str) -> list[Fact]:
    """``[user entry, runStarted]``: a run is accepted once this transaction is durable."""
    user_id = uuid7()
    return [
        EntryFact(id=user_id, entry=UserEntry(message=UserMessage(content=prompt))),
        RecordFact(id="", record=RunStarted(operationId=uuid7(), inputEntryId=user_id)),
    ]


def step_attempt(state: SessionState, configuration: Configuration, plan: StartStep) -> list[Fact]:
    """``stepAttempt`` as the planner's ``plan`` says (a retry keeps its step's id)."""
    return [
        RecordFact(
            id="",
            record=StepAttempt(
                operationId=_open_operation(state).operationId,
                stepId=plan.stepId or uuid7(),
                attemptId=uuid7(),
                stepKind=plan.stepKind,
                attempt=plan.attempt,
                contextThroughEntryId=plan.contextThroughEntryId,
                configurationSnapshot=configuration.snapshot(),
                configurationDigest=configuration.digest,
            ),
        )
    ]


def raw_response(state: SessionState, raw: RawResponse) -> list[Fact]:
    """The provider's answer to the open attempt, as received: its own transaction, before any parsing."""
    step = open_step(state)
    return [RawFact(id="", operationId=step.operationId, attemptId=step.attemptId, raw=raw)]


def settle_assistant(state: SessionState, message: AssistantMessage, stop_reason: StopReason, usage: Usage | None) -> list[Fact]:
    """``[assistant entry, usage?]``: no usage fact when the response reported none (not reported is not zero)."""
    step = open_step(state)
    entry = AssistantEntry(stepId=step.stepId, attemptId=step.attemptId, stopReason=stop_reason, message=message)
    return [EntryFact(id=uuid7(), entry=entry), *_usage(step, usage)]


def _usage(step: LatestAttempt, usage: Usage | None) -> list[Fact]:
    return [] if usage is None else [UsageFact(id="", operationId=step.operationId, attemptId=step.attemptId, usage=usage)]


def usage_overflow(state: SessionState, usage: Usage | None) -> str | None:
    """Why ``usage`` cannot be added to the session's totals (one would pass the largest count a journal
    holds, and the fold would refuse the fact), or None.  A provider's report must not wedge a session."""
    totals = state.usage
    for field in msgspec.structs.fields(Usage) if usage is not None else ():
        added, total = getattr(usage, field.name) or 0, getattr(totals, field.name) or 0
        if total + added > MAX_SAFE_INTEGER:
            return (
                f"the provider reported usage.{field.encode_name} {added}, which would take the session's total "
                f"({total}) past {MAX_SAFE_INTEGER}, the largest count a journal holds: not counted"
            )
    return None


def fail_step(state: SessionState, code: str, message: str, usage: Usage | None) -> list[Fact]:
    """``[stepFailed, usage?]``: the attempt ended without an answer the transcript can take (as ``usage_overflow``,
    without the usage, when the session's totals cannot take it)."""
    overflow = usage_overflow(state, usage)
    if overflow is not None:
        code, message, usage = USAGE_OVERFLOW, overflow, None
    step = open_step(state)
    facts: list[Fact] = [
        RecordFact(
            id="",
            record=StepFailed(
                operationId=step.operationId,
                stepId=step.stepId,
                attemptId=step.attemptId,
                error=ErrorInfo(code=code, message=message or code),
            ),
        )
    ]
    return facts + _usage(step, usage)


def settle(state: SessionState, decided: Settlement) -> tuple[list[Fact], str]:
    """The transaction that settles the open attempt as ``decided``, and its failpoint label."""
    if decided.failure is not None or usage_overflow(state, decided.usage) is not None:
        code, reason = decided.failure or (USAGE_OVERFLOW, "")
        return fail_step(state, code, reason, decided.usage), "step-failed"
    if decided.message is None or decided.stop_reason is None:
        raise ValueError("a settlement without a failure carries a message and a stop reason")
    return settle_assistant(state, decided.message, decided.stop_reason, decided.usage), "settle"


# -- tools --------------------------------------------------------------------


def tool_started(state: SessionState, plan: StartTool, declaration: ToolDeclaration, environment: str) -> list[Fact]:
    """Announce a tool before its effect: after this commit, a crash leaves the call pending, not forgotten."""
    step = open_step(state)
    _, call = _tool_call(state, plan.assistantEntryId, plan.toolIndex)
    return [
        RecordFact(
            id=uuid7(),
            record=ToolStarted(
                operationId=step.operationId,
                stepId=step.stepId,
                assistantEntryId=plan.assistantEntryId,
                toolIndex=plan.toolIndex,
                toolCallId=call.id,
                toolName=call.function.name,
                arguments=plan.arguments,
                replay=declaration.replay,
                replayKey=declaration.replayKey,
                environmentIdentity=environment,
                resultEntryId=uuid7(),
            ),
        )
    ]


def tool_result(started: ToolCallState, content: str, ok: bool) -> list[Fact]:
    return [_started_result(started, content, ToolResult(type="success" if ok else "error"))]


def interrupted_result(started: ToolCallState) -> EntryFact:
    """The answer for a started call whose outcome is unknown and which must not run again."""
    return _started_result(started, SYNTHETIC_TEXTS["interrupted"], ToolResult(type="synthetic", reason="interrupted"))


def _started_result(started: ToolCallState, content: str, result: ToolResult) -> EntryFact:
    message = ToolMessage(content=content, tool_call_id=started.toolCallId)
    return EntryFact(
        id=started.resultEntryId,
        entry=StartedToolResultEntry(
            stepId=started.stepId, toolStartedId=started.toolStartedId, toolName=started.toolName, message=message, result=result
        ),
    )


def pre_execution_result(
    state: SessionState, *, assistant_entry_id: str, tool_index: int, reason: PreExecutionReason
) -> EntryFact:
    """The answer for a call that was never executed (invalid arguments, unknown tool, truncated, aborted)."""
    entry, call = _tool_call(state, assistant_entry_id, tool_index)
    if entry.stepId is None:
        raise ValueError(f"entry {assistant_entry_id} belongs to no step")
    return EntryFact(
        id=uuid7(),
        entry=PreExecutionResultEntry(
            stepId=entry.stepId,
            assistantEntryId=assistant_entry_id,
            toolIndex=tool_index,
            toolName=call.function.name,
            message=ToolMessage(content=SYNTHETIC_TEXTS[reason], tool_call_id=call.id),
            result=ToolResult(type="synthetic", reason=reason),
        ),
    )


# -- ending -------------------------------------------------------------------


def request_abort(state: SessionState, phase: AbortPhase, tool_call_id: str | None = None) -> list[Fact]:
    """Durably ask the open operation to stop, before anything in flight is cancelled."""
    return [
        RecordFact(
            id="",
            record=AbortRequested(
                operationId=_open_operation(state).operationId,
                operationKind=_operation_kind(state),
                phase=phase,
                toolCallId=UNSET if tool_call_id is None else tool_call_id,
            ),
        )
    ]


def finish(state: SessionState, plan: Finish) -> list[Fact]:
    """``operationFinished`` as the planner's ``plan`` says (its optional members are the record's)."""
    return [
        RecordFact(
            id="",
            record=OperationFinished(
                operationId=_open_operation(state).operationId,
                operationKind=_operation_kind(state),
                outcome=plan.outcome,
                completion=plan.completion,
                finalEntryId=plan.finalEntryId,
                error=UNSET if plan.error is UNSET else ErrorInfo(code=plan.error.code, message=plan.error.message),
            ),
        )
    ]


# -- compactions ------------------------------------------------------------------


def message_ids(state: SessionState) -> list[str]:
    """The ids of every message entry, in order (what a compaction's partition lists)."""
    return [entry.id for entry in state.entries.values() if entry.message is not None]


def begin_compaction(state: SessionState, cut: Cut, piece: int | None = None) -> list[Fact]:
    """``compactionStarted`` for a compaction through the context boundary, cut as ``cut`` says (``piece``: its
    number when it is one of pieces)."""
    through = state.contextBoundary
    if through is None:
        raise ValueError("a session without messages has nothing to compact")
    sources = [
        {"sourceEntryId": entry.id, "message": entry.message}
        for entry in state.entries.values()
        if entry.message is not None
    ]
    return [
        RecordFact(
            id="",
            record=CompactionStarted(
                operationId=uuid7(),
                inputThroughEntryId=through,
                resultEntryId=uuid7(),
                compactedEntryIds=cut.compacted,
                retainedEntryIds=cut.retained,
                sourceDigest=canonical_digest(sources),
                piece=UNSET if piece is None else piece,
            ),
        )
    ]


def settle_compaction(state: SessionState, summary: str, usage: Usage | None) -> list[Fact]:
    """The compaction entry (its id reserved by ``compactionStarted``) with the retained tail, and the attempt's usage."""
    operation = state.operation
    cut = state.pendingCut
    if not isinstance(operation, CompactionOperation) or cut is None:
        raise ValueError("no compaction is open")
    if usage_overflow(state, usage) is not None:
        return fail_step(state, USAGE_OVERFLOW, "", usage)
    step = open_step(state)
    retained = [RetainedMessage(sourceEntryId=entry_id, message=_message_of(state, entry_id)) for entry_id in cut.retained]
    return [
        EntryFact(
            id=operation.resultEntryId,
            entry=CompactionEntry(
                operationId=operation.operationId,
                summary=summary,
                compactedThroughEntryId=cut.through,
                retainedTail=retained,
            ),
        ),
        *_usage(step, usage),
    ]


def _message_of(state: SessionState, entry_id: str) -> Message:
    message = state.entries[entry_id].message
    if message is None:
        raise ValueError(f"entry {entry_id} is not a message")
    return message
