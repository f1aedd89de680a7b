"""The transactions a session commits, as fact builders: what each step of a run writes, and nothing else.

The live loop and crash recovery both drive a session by asking the planner
for the next action and committing what that action produces; these
functions are that production, so a settle written live and one written by
``resume`` from a stored response are the same transaction.

Pure but for identifiers: each builder takes the reduced state it continues
from and returns facts ready for ``JournalWriter.commit``.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET

from tiny_agent.configuration import Configuration
from tiny_agent.facts import (
    AbortRequested,
    AssistantEntry,
    EntryFact,
    ErrorInfo,
    Fact,
    OperationFinished,
    PreExecutionResultEntry,
    RawFact,
    RawResponse,
    RecordFact,
    RunStarted,
    StartedToolResultEntry,
    StepAttempt,
    StepFailed,
    ToolResult,
    ToolStarted,
    UsageFact,
    UserEntry,
)
from tiny_agent.ids import uuid7
from tiny_agent.settlement import Settlement
from tiny_agent.state import CompactionOperation, LatestAttempt, RunOperation, SessionState, ToolCallState
from tiny_agent.tools import ToolDeclaration
from tiny_agent.transcript import SYNTHETIC_TEXTS, AssistantMessage, ToolMessage, Usage, UserMessage


def _operation_kind(state: SessionState) -> Literal["run", "compaction"]:
    return "run" if type(state.operation) is RunOperation else "compaction"


def _step(state: SessionState) -> LatestAttempt:
    operation = state.operation
    if type(operation) not in (RunOperation, CompactionOperation) or operation.step is UNSET:  # type: ignore[union-attr]
        raise ValueError("no step is open")
    return operation.step  # type: ignore[union-attr,return-value]


# -- runs ---------------------------------------------------------------------


def begin_run(prompt: str) -> list[Fact]:
    """``[user entry, runStarted]``: a run is accepted once this transaction is durable."""
    user_id = uuid7()
    return [
        EntryFact(id=user_id, entry=UserEntry(message=UserMessage(content=prompt))),
        RecordFact(id="", record=RunStarted(operationId=uuid7(), inputEntryId=user_id)),
    ]


def step_attempt(
    state: SessionState, configuration: Configuration, *, attempt: int, context_through: str, step_id: str | None = None
) -> list[Fact]:
    operation = state.operation
    kind = "assistant" if _operation_kind(state) == "run" else "compaction"
    return [
        RecordFact(
            id="",
            record=StepAttempt(
                operationId=operation.operationId,  # type: ignore[union-attr]
                stepId=step_id or uuid7(),
                attemptId=uuid7(),
                stepKind=kind,
                attempt=attempt,
                contextThroughEntryId=context_through,
                configurationSnapshot=configuration.snapshot(),
                configurationDigest=configuration.digest,
            ),
        )
    ]


def raw_response(state: SessionState, raw: RawResponse) -> list[Fact]:
    """The provider's answer to the open attempt, as received: its own transaction, before any parsing."""
    step = _step(state)
    return [RawFact(id="", operationId=step.operationId, attemptId=step.attemptId, raw=raw)]


def settle_assistant(state: SessionState, message: AssistantMessage, stop_reason: str, usage: Usage) -> list[Fact]:
    step = _step(state)
    return [
        EntryFact(
            id=uuid7(),
            entry=AssistantEntry(
                stepId=step.stepId,
                attemptId=step.attemptId,
                stopReason=stop_reason,  # type: ignore[arg-type]
                message=message,
            ),
        ),
        UsageFact(id="", operationId=step.operationId, attemptId=step.attemptId, usage=usage),
    ]


def fail_step(state: SessionState, code: str, message: str, usage: Usage | None) -> list[Fact]:
    """``[stepFailed, usage?]``: the attempt ended without an answer the transcript can take."""
    step = _step(state)
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
    if usage is not None:
        facts.append(UsageFact(id="", operationId=step.operationId, attemptId=step.attemptId, usage=usage))
    return facts


def settle(state: SessionState, decided: Settlement) -> tuple[list[Fact], str]:
    """The transaction that settles the open attempt as ``decided``, and its failpoint label."""
    if decided.failure is not None:
        code, reason = decided.failure
        return fail_step(state, code, reason, decided.usage), "step-failed"
    if decided.message is None or decided.stop_reason is None:
        raise ValueError("a settlement without a failure carries a message and a stop reason")
    return settle_assistant(state, decided.message, decided.stop_reason, decided.usage), "settle"


# -- tools --------------------------------------------------------------------


def tool_started(
    state: SessionState,
    *,
    assistant_entry_id: str,
    tool_index: int,
    arguments: dict[str, Any],
    declaration: ToolDeclaration,
    environment: str,
) -> list[Fact]:
    """Announce a tool before its effect: after this commit, a crash leaves the call pending, not forgotten."""
    step = _step(state)
    call = state.entries[assistant_entry_id].message.tool_calls[tool_index]  # type: ignore[union-attr,index]
    return [
        RecordFact(
            id=uuid7(),
            record=ToolStarted(
                operationId=step.operationId,
                stepId=step.stepId,
                assistantEntryId=assistant_entry_id,
                toolIndex=tool_index,
                toolCallId=call.id,
                toolName=call.function.name,
                arguments=arguments,
                replay=declaration.replay,
                replayKey=declaration.replayKey,
                environmentIdentity=environment,
                resultEntryId=uuid7(),
            ),
        )
    ]


def tool_result(started: ToolCallState, content: str, ok: bool, usage: Usage | None = None) -> list[Fact]:
    facts: list[Fact] = [
        EntryFact(
            id=started.resultEntryId,
            entry=StartedToolResultEntry(
                stepId=started.stepId,
                toolStartedId=started.toolStartedId,
                toolName=started.toolName,
                message=ToolMessage(content=content, tool_call_id=started.toolCallId),
                result=ToolResult(type="success" if ok else "error"),
            ),
        )
    ]
    if usage is not None:
        facts.append(UsageFact(id="", operationId=started.operationId, toolStartedId=started.toolStartedId, usage=usage))
    return facts


def interrupted_result(started: ToolCallState) -> EntryFact:
    """The answer for a started call whose outcome is unknown and which must not run again."""
    return EntryFact(
        id=started.resultEntryId,
        entry=StartedToolResultEntry(
            stepId=started.stepId,
            toolStartedId=started.toolStartedId,
            toolName=started.toolName,
            message=ToolMessage(content=SYNTHETIC_TEXTS["interrupted"], tool_call_id=started.toolCallId),
            result=ToolResult(type="synthetic", reason="interrupted"),
        ),
    )


def pre_execution_result(
    state: SessionState, *, assistant_entry_id: str, tool_index: int, reason: str
) -> EntryFact:
    """The answer for a call that was never executed (invalid arguments, unknown tool, truncated, aborted)."""
    record = state.entries[assistant_entry_id]
    call = record.message.tool_calls[tool_index]  # type: ignore[union-attr,index]
    return EntryFact(
        id=uuid7(),
        entry=PreExecutionResultEntry(
            stepId=record.stepId,  # type: ignore[arg-type]
            assistantEntryId=assistant_entry_id,
            toolIndex=tool_index,
            toolName=call.function.name,
            message=ToolMessage(content=SYNTHETIC_TEXTS[reason], tool_call_id=call.id),
            result=ToolResult(type="synthetic", reason=reason),  # type: ignore[arg-type]
        ),
    )


# -- ending -------------------------------------------------------------------


def request_abort(state: SessionState, phase: str, tool_call_id: str | None = None) -> list[Fact]:
    """Durably ask the open operation to stop, before anything in flight is cancelled."""
    return [
        RecordFact(
            id="",
            record=AbortRequested(
                operationId=state.operation.operationId,  # type: ignore[union-attr]
                operationKind=_operation_kind(state),
                phase=phase,  # type: ignore[arg-type]
                toolCallId=UNSET if tool_call_id is None else tool_call_id,
            ),
        )
    ]


def finish(
    state: SessionState,
    outcome: str,
    *,
    completion: str | None = None,
    final_entry_id: str | None = None,
    error: tuple[str, str] | None = None,
) -> list[Fact]:
    return [
        RecordFact(
            id="",
            record=OperationFinished(
                operationId=state.operation.operationId,  # type: ignore[union-attr]
                operationKind=_operation_kind(state),
                outcome=outcome,  # type: ignore[arg-type]
                completion=UNSET if completion is None else completion,  # type: ignore[arg-type]
                finalEntryId=UNSET if final_entry_id is None else final_entry_id,
                error=UNSET if error is None else ErrorInfo(code=error[0], message=error[1]),
            ),
        )
    ]
