"""Operations: ``runStarted`` (session-v2 §9.1), ``abortRequested`` (§9.6), ``operationFinished`` (§9.7).

Pure.  The fast twins take a run's start and its normal or truncated completion; aborts, failures
and compactions take the reference rules (``compactionStarted``: :mod:`tiny_agent.fold.compaction`).
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
    fail,
    is_blank,
    is_word,
    one_of,
    require_error,
    require_uuid,
    show,
)
from tiny_agent.fold.core import FoldCore, Operation, first_pending
from tiny_agent.journal.facts import OperationFinished, RunStarted
from tiny_agent.journal.state import FinishedOperation, IdleOperation, RunOperation
from tiny_agent.journal.transcript import AssistantMessage, UserMessage


def run_started(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    operation_id = fold.start(record, contract.RUN_STARTED_KEYS, "run")
    input_id = record.get("inputEntryId")
    entry = fold.state.entries.get(input_id) if type(input_id) is str else None
    if entry is None or type(entry.message) is not UserMessage:
        require_uuid(input_id, "runStarted inputEntryId")
        fail(INVALID_REFERENCE, f"inputEntryId {input_id} is not a user message entry")
    _begin_run(fold, operation_id, entry.id)


def fast_run_started(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    record: RunStarted = fact.record
    operation_id = record.operationId
    entry = fold.state.entries.get(record.inputEntryId)
    if (
        not isinstance(fold.state.operation, IdleOperation)
        or not fold.reservable(operation_id, fact_id)
        or entry is None
        or type(entry.message) is not UserMessage
    ):
        return False
    fold.books.reserved[operation_id] = contract.IDENTITY
    _begin_run(fold, operation_id, entry.id)
    return True


def _begin_run(fold: FoldCore, operation_id: str, input_id: str) -> None:
    fold.begin(RunOperation(operationId=operation_id, inputEntryId=input_id, toolCalls=[]))
    state = fold.state
    state.runCount += 1
    state.runSteps = 0
    state.lastStepFailure = None


def abort_requested(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    operation, _ = fold.named(record, contract.ABORT_REQUESTED_KEYS, "abortRequested")
    if record.get("reason") != "escape":
        fail(INVALID_TRANSITION, 'abortRequested reason is not "escape"')
    phase = record.get("phase")
    if not is_word(phase, contract.ABORT_PHASE_WORDS):
        fail(INVALID_FACT, f"abortRequested phase is not {one_of(contract.ABORT_PHASE_WORDS)}: {show(phase)}")
    if (type(record.get("toolCallId")) is str) != (phase == "tool"):
        fail(INVALID_FACT, "abortRequested toolCallId must be a string exactly when phase is tool")
    if operation.abortRequested:
        fail(INVALID_TRANSITION, "an abort was already requested for this operation")
    operation.abortRequested = True


def operation_finished(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    operation, kind = fold.named(record, contract.OPERATION_FINISHED_KEYS, "operationFinished")
    outcome = record.get("outcome")
    if not is_word(outcome, contract.OUTCOME_WORDS):
        fail(INVALID_TRANSITION, f"operationFinished outcome is not {one_of(contract.OUTCOME_WORDS)}: {show(outcome)}")
    if outcome == "completed":
        if type(operation) is RunOperation:
            _check_run_completed(fold, operation, record)
        else:
            _check_compaction_completed(fold, operation, record)
    elif outcome == "aborted":
        _check_aborted(fold, operation, record)
    elif "finalEntryId" in record:
        fail(INVALID_FACT, "a failed operation has no finalEntryId")
    if outcome != "completed" and "completion" in record:
        fail(INVALID_FACT, f"an {outcome} operation has no completion")
    if outcome == "failed":
        require_error(record.get("error"), "operationFinished error")
    elif "error" in record:
        fail(INVALID_FACT, f"an {outcome} operation has no error")
    error = record.get("error") or {}
    fold.state.lastOutcome = FinishedOperation(
        kind=kind,
        outcome=outcome,
        completion=record.get("completion"),
        errorCode=error.get("code"),
        errorMessage=error.get("message"),
        finalEntryId=record.get("finalEntryId"),
    )
    fold.finish()


def _check_run_completed(fold: FoldCore, run: RunOperation, record: dict[str, Any]) -> None:
    completion = record.get("completion")
    if completion != "normal" and completion != "truncated":
        fail(INVALID_FACT, "a completed run needs completion normal or truncated")
    final_id = require_uuid(record.get("finalEntryId"), "operationFinished finalEntryId")
    final = fold.state.entries.get(final_id)
    if final is None or final.message is None or final.operationId != run.operationId:
        fail(INVALID_REFERENCE, f"finalEntryId {final_id} is not a message of this run")
    wanted = "stop" if completion == "normal" else "length"
    # v3: a refusal is the run's answer too (docs/journal.md), its text may be empty.
    refused = completion == "normal" and final.stopReason == "refusal"
    if final.stopReason != wanted and not refused:
        fail(INVALID_REFERENCE, f"a {completion} completion needs a final entry that stopped with {wanted}")
    # An entry with a stopReason settled its attempt (closed, not failed), which it names;
    # what remains to check is that the attempt was of the run's latest step.
    if run.step is UNSET or final.stepId != run.step.stepId:
        fail(INVALID_REFERENCE, f"finalEntryId {final_id} did not settle the run's latest step")
    message = final.message
    if completion == "normal":
        content = message.content if type(message) is AssistantMessage else None
        if not refused and (content is None or is_blank(content)):
            fail(INVALID_TRANSCRIPT, "a normal completion needs a final answer with non-blank content")
    elif type(message) is not AssistantMessage or message.tool_calls is UNSET:
        fail(INVALID_TRANSCRIPT, "a truncated completion needs a final entry with tool calls")
    if fold.books.pending:
        fail(INVALID_TRANSCRIPT, f"run completed while tool call {first_pending(run)} is pending")


def fast_run_finished(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    """A run completed: the twin of :func:`_check_run_completed` with the record's other rules around it."""
    record: OperationFinished = fact.record
    run = fold.state.operation
    completion = record.completion
    final = fold.state.entries.get(record.finalEntryId) if record.finalEntryId is not UNSET else None
    if (
        type(run) is not RunOperation
        or run.operationId != record.operationId
        or record.operationKind != "run"
        or record.outcome != "completed"
        or record.error is not UNSET
        or completion is UNSET
        or fold.books.pending
        or final is None
        or final.operationId != run.operationId
        or final.stopReason != ("stop" if completion == "normal" else "length")
        or run.step is UNSET
        or final.stepId != run.step.stepId
    ):
        return False
    # A settled stopReason marks an assistant message (only assistant entries carry one).
    message = final.message
    if type(message) is not AssistantMessage:
        return False
    if completion == "normal":
        if message.content is None or is_blank(message.content):
            return False
    elif message.tool_calls is UNSET:
        return False
    fold.state.lastOutcome = FinishedOperation(kind="run", outcome="completed", completion=completion, finalEntryId=final.id)
    fold.finish()
    return True


def _check_compaction_completed(fold: FoldCore, operation: Operation, record: dict[str, Any]) -> None:
    if "completion" in record:
        fail(INVALID_FACT, "a completed compaction has no completion")
    final_id = require_uuid(record.get("finalEntryId"), "operationFinished finalEntryId")
    step = operation.step
    if (
        isinstance(operation, RunOperation)
        or final_id != operation.resultEntryId
        or final_id not in fold.state.entries
        or step is UNSET
        or step.settledEntryId != final_id
    ):
        fail(INVALID_REFERENCE, f"finalEntryId {final_id} is not this compaction's settled result entry")


def _check_aborted(fold: FoldCore, operation: Operation, record: dict[str, Any]) -> None:
    if "finalEntryId" in record:
        fail(INVALID_TRANSITION, "an aborted operation has no finalEntryId")
    if not operation.abortRequested:
        fail(INVALID_TRANSITION, "operation aborted without an abort request")
    if type(operation) is RunOperation and fold.books.pending:
        fail(INVALID_TRANSITION, f"operation aborted while tool call {first_pending(operation)} is pending")
    if operation.step is not UNSET and operation.step.status == "attempting":
        fail(INVALID_TRANSITION, "operation aborted while a model attempt is open")
