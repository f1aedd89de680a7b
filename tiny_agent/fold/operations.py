"""Operations: ``runStarted`` (session-v2 §9.1), ``abortRequested`` (§9.6), ``operationFinished`` (§9.7).

Pure.  Each reference rule sits next to its fast twin: the fast path takes a
run's start and its normal or truncated completion; aborted and failed
outcomes and compactions take the reference path.  (``compactionStarted``
lives with the compaction entry, :mod:`tiny_agent.fold.compaction`.)
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tiny_agent.fold.books import CompactionBook, OperationBook, RunBook
from tiny_agent.fold.contract import (
    ABORT_PHASE_WORDS,
    ABORT_REQUESTED_KEYS,
    IDENTITY,
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    JS_WHITESPACE,
    OPERATION_FINISHED_KEYS,
    OUTCOME_WORDS,
    RUN_STARTED_KEYS,
    fail,
    is_blank,
    is_outcome,
    is_word,
    not_uuid,
    one_of,
    require_error,
    require_keys,
    require_uuid,
    show,
    unknown_key,
    uuid_match,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.typed import OperationFinishedWire, RunStartedWire
from tiny_agent.journal.state import IDLE, FinishedOperation, RunOperation
from tiny_agent.journal.transcript import AssistantMessage, UserMessage


class OperationRules(FoldCore):
    # -- runStarted (§9.1) -------------------------------------------------------

    def _run_started(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= RUN_STARTED_KEYS:
            unknown_key(record, RUN_STARTED_KEYS, "runStarted record")
        if record.get("operationKind") != "run":
            fail(INVALID_TRANSITION, 'runStarted operationKind is not "run"')
        if self._current is not None:
            fail(INVALID_TRANSITION, "runStarted while another operation is unfinished")
        operation_id = self._reserve(record.get("operationId"), IDENTITY, "runStarted operationId")
        input_id = record.get("inputEntryId")
        entry = self.state.entries.get(input_id) if type(input_id) is str else None
        if entry is None or type(entry.message) is not UserMessage:
            require_uuid(input_id, "runStarted inputEntryId")
            fail(INVALID_REFERENCE, f"inputEntryId {input_id} is not a user message entry")
        self._begin_run(operation_id, entry.id)

    def _fast_run_started(self, record: RunStartedWire, fact_id: str) -> bool:
        operation_id = record.operation_id
        if self._current is not None or not self._reservable(operation_id, fact_id):
            return False
        entry = self.state.entries.get(record.input_entry_id)
        if entry is None or type(entry.message) is not UserMessage:
            return False
        self._reserved[operation_id] = IDENTITY
        self._begin_run(operation_id, entry.id)
        return True

    def _begin_run(self, operation_id: str, input_id: str) -> None:
        self._begin(RunBook(state=RunOperation(operationId=operation_id, inputEntryId=input_id, toolCalls=[])))
        state = self.state
        state.runCount += 1
        state.runSteps = 0
        state.lastStepFailure = None

    # -- abortRequested (§9.6) ---------------------------------------------------------

    def _abort_requested(self, record: dict[str, Any], fact_id: str) -> None:
        require_keys(record, ABORT_REQUESTED_KEYS, "abortRequested record")
        operation = self._lookup_operation(record.get("operationId"), "abortRequested operationId")
        if record.get("operationKind") != operation.kind:
            fail(INVALID_TRANSITION, f"abortRequested operationKind is not {operation.kind}")
        if record.get("reason") != "escape":
            fail(INVALID_TRANSITION, 'abortRequested reason is not "escape"')
        phase = record.get("phase")
        if not is_word(phase, ABORT_PHASE_WORDS):
            fail(INVALID_FACT, f"abortRequested phase is not {one_of(ABORT_PHASE_WORDS)}: {show(phase)}")
        if (type(record.get("toolCallId")) is str) != (phase == "tool"):
            fail(INVALID_FACT, "abortRequested toolCallId must be a string exactly when phase is tool")
        if operation.state.abortRequested:
            fail(INVALID_TRANSITION, "an abort was already requested for this operation")
        operation.state.abortRequested = True

    # -- operationFinished (§9.7) ------------------------------------------------------

    def _operation_finished(self, record: dict[str, Any], fact_id: str) -> None:
        if not record.keys() <= OPERATION_FINISHED_KEYS:
            unknown_key(record, OPERATION_FINISHED_KEYS, "operationFinished record")
        operation = self._lookup_operation(record.get("operationId"), "operationFinished operationId")
        if record.get("operationKind") != operation.kind:
            fail(INVALID_TRANSITION, f"operationFinished operationKind is not {operation.kind}")
        outcome = record.get("outcome")
        if not is_outcome(outcome):
            fail(INVALID_TRANSITION, f"operationFinished outcome is not {one_of(OUTCOME_WORDS)}: {show(outcome)}")
        if outcome == "completed":
            if isinstance(operation, RunBook):
                self._check_run_completed(operation, record)
            else:
                self._check_compaction_completed(operation, record)
        elif outcome == "aborted":
            self._check_aborted(operation, record)
        elif "finalEntryId" in record:
            fail(INVALID_FACT, "a failed operation has no finalEntryId")
        if outcome != "completed" and "completion" in record:
            fail(INVALID_FACT, f"an {outcome} operation has no completion")
        if outcome == "failed":
            require_error(record.get("error"), "operationFinished error")
        elif "error" in record:
            fail(INVALID_FACT, f"an {outcome} operation has no error")
        error = record.get("error") or {}
        self.state.lastOutcome = FinishedOperation(
            kind=operation.kind,
            outcome=outcome,
            completion=record.get("completion"),
            errorCode=error.get("code"),
            errorMessage=error.get("message"),
            finalEntryId=record.get("finalEntryId"),
        )
        self._finish_operation()

    def _check_run_completed(self, operation: RunBook, record: dict[str, Any]) -> None:
        completion = record.get("completion")
        if completion != "normal" and completion != "truncated":
            fail(INVALID_FACT, "a completed run needs completion normal or truncated")
        final_id = record.get("finalEntryId")
        if type(final_id) is not str or uuid_match(final_id) is None:
            not_uuid(final_id, "operationFinished finalEntryId")
        final = self.state.entries.get(final_id)
        if final is None or final.message is None or final.operationId != operation.state.operationId:
            fail(INVALID_REFERENCE, f"finalEntryId {final_id} is not a message of this run")
        wanted = "stop" if completion == "normal" else "length"
        if final.stopReason != wanted:
            fail(INVALID_REFERENCE, f"a {completion} completion needs a final entry that stopped with {wanted}")
        attempt = self._attempts.get(final.attemptId)
        if (
            attempt is None
            or attempt.open
            or attempt.failed
            or attempt.step_id != operation.latest_step_id
            or attempt.settled_entry_id != final_id
        ):
            fail(INVALID_REFERENCE, f"finalEntryId {final_id} did not settle the run's latest step")
        message = final.message
        if completion == "normal":
            content = message.content if type(message) is AssistantMessage else None
            if content is None or is_blank(content):
                fail(INVALID_TRANSCRIPT, "a normal completion needs a final answer with non-blank content")
        elif type(message) is not AssistantMessage or message.tool_calls is UNSET:
            fail(INVALID_TRANSCRIPT, "a truncated completion needs a final entry with tool calls")
        if operation.pending:
            fail(INVALID_TRANSCRIPT, f"run completed while tool call {operation.first_pending()} is pending")

    def _fast_run_finished(self, record: OperationFinishedWire, fact_id: str) -> bool:
        """The twin of :meth:`_check_run_completed` with the envelope checks around it."""
        operation = self._current
        if (
            type(operation) is not RunBook
            or operation.state.operationId != record.operation_id
            or operation.pending
        ):
            return False
        completion = record.completion
        wanted = "stop" if completion == "normal" else "length"
        final_id = record.final_entry_id
        final = self.state.entries.get(final_id)
        if final is None or final.operationId != record.operation_id or final.stopReason != wanted:
            return False
        attempt = self._attempts.get(final.attemptId)
        if (
            attempt is None
            or attempt.open
            or attempt.failed
            or attempt.step_id != operation.latest_step_id
            or attempt.settled_entry_id != final_id
        ):
            return False
        # A settled stopReason marks an assistant message (only assistant entries carry one).
        message = final.message
        if type(message) is not AssistantMessage:
            return False
        if completion == "normal":
            if message.content is None or not message.content.strip(JS_WHITESPACE):
                return False
        elif message.tool_calls is UNSET:
            return False
        self.state.lastOutcome = FinishedOperation(kind="run", outcome="completed", completion=completion, finalEntryId=final_id)
        self._finish_operation()
        return True

    def _check_compaction_completed(self, operation: CompactionBook, record: dict[str, Any]) -> None:
        if "completion" in record:
            fail(INVALID_FACT, "a completed compaction has no completion")
        final_id = require_uuid(record.get("finalEntryId"), "operationFinished finalEntryId")
        compaction = operation.state
        step = compaction.step
        if (
            final_id != compaction.resultEntryId
            or final_id not in self.state.entries
            or step is UNSET
            or step.settledEntryId != final_id
        ):
            fail(INVALID_REFERENCE, f"finalEntryId {final_id} is not this compaction's settled result entry")

    def _check_aborted(self, operation: OperationBook, record: dict[str, Any]) -> None:
        if "finalEntryId" in record:
            fail(INVALID_TRANSITION, "an aborted operation has no finalEntryId")
        state = operation.state
        if not state.abortRequested:
            fail(INVALID_TRANSITION, "operation aborted without an abort request")
        if type(operation) is RunBook and operation.pending:
            fail(INVALID_TRANSITION, f"operation aborted while tool call {operation.first_pending()} is pending")
        if state.step is not UNSET and state.step.status == "attempting":
            fail(INVALID_TRANSITION, "operation aborted while a model attempt is open")

    def _finish_operation(self) -> None:
        self._current = None
        state = self.state
        state.operation = IDLE
        state.pendingCut = None
        last = state.lastOutcome
        if last is not None and last.kind == "run":
            state.lastRunOutcome = last
