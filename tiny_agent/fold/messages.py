"""User and assistant message entries (session-v2 §8.1, §8.2): each reference rule next to its fast twin.

Pure.  Tool results are message entries too (:mod:`tiny_agent.fold.tools`).
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tiny_agent.fold import contract
from tiny_agent.fold.books import AttemptBook
from tiny_agent.fold.contract import (
    DUPLICATE_ID,
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    fail,
    is_word,
    one_of,
    require_keys,
    require_uuid,
    show,
)
from tiny_agent.fold.core import FoldCore, newest
from tiny_agent.fold.transcript_rules import assistant_turn, plain_tool_calls, user_turn
from tiny_agent.fold.typed import AssistantWire, MessageEntry, UserWire
from tiny_agent.journal.json_profile import NOT_TEXT, decode_text, decode_text_or_null
from tiny_agent.journal.state import RunOperation
from tiny_agent.journal.transcript import AssistantMessage, StopReason, UserMessage


def user_entry(fold: FoldCore, entry: dict[str, Any], fact_id: str, message: UserMessage, timestamp: int) -> None:
    if fact_id in fold.books.reserved:
        fail(DUPLICATE_ID, f"user entry id {fact_id} is reserved by a record")
    require_keys(entry, contract.USER_ENTRY_KEYS, "user entry")
    fold.append_message(fact_id, message, timestamp, user_turn(fold.books.outstanding))


def fast_user_entry(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    entry: MessageEntry = fact.entry
    wire: UserWire = fact.entry.message
    if (
        entry.stepId is not UNSET
        or entry.attemptId is not UNSET
        or entry.stopReason is not UNSET
        or entry.toolName is not UNSET
        or entry.toolStartedId is not UNSET
        or entry.result is not UNSET
        or entry.assistantEntryId is not UNSET
        or entry.toolIndex is not UNSET
        or fact_id in fold.books.reserved
    ):
        return False
    content = decode_text(wire.content)
    if content is NOT_TEXT or not content:
        return False
    message = UserMessage(content)
    fold.append_message(fact_id, message, fact.timestamp, user_turn(fold.books.outstanding))
    return True


def assistant_entry(fold: FoldCore, entry: dict[str, Any], fact_id: str, message: AssistantMessage, timestamp: int) -> None:
    books = fold.books
    if fact_id in books.reserved:
        fail(DUPLICATE_ID, f"assistant entry id {fact_id} is reserved by a record")
    require_keys(entry, contract.ASSISTANT_ENTRY_KEYS, "assistant entry")
    step_id = entry.get("stepId")
    attempt_id = entry.get("attemptId")
    attempt = books.attempts.get(attempt_id) if type(attempt_id) is str else None
    if attempt is None or attempt.step_id != step_id:
        # An attempt we know has valid IDs; anything else gets the checks in order.
        require_uuid(step_id, "assistant entry stepId")
        require_uuid(attempt_id, "assistant entry attemptId")
    stop_reason = entry.get("stopReason")
    words = fold.profile.stop_reasons
    if not is_word(stop_reason, words):
        fail(INVALID_FACT, f"assistant entry stopReason is not {one_of(words)}: {show(stop_reason)}")
    if attempt is None:
        fail(INVALID_REFERENCE, f"assistant entry names unknown attempt {attempt_id}")
    if attempt.step_id != step_id:
        fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to step {attempt.step_id}, not {step_id}")
    if not attempt.open:
        fail(INVALID_REFERENCE, f"attempt {attempt_id} is already closed")
    if attempt.step_kind != "assistant":
        fail(INVALID_REFERENCE, f"attempt {attempt_id} is a compaction attempt")
    run = fold.state.operation
    if type(run) is not RunOperation or run.operationId != attempt.operation_id:
        fail(INVALID_TRANSITION, f"the operation of attempt {attempt_id} is not the current run")
    has_calls = message.tool_calls is not UNSET
    if stop_reason == "toolUse" and not has_calls:
        fail(INVALID_TRANSCRIPT, "stopReason toolUse but the message has no tool_calls")
    if (stop_reason == "stop" or stop_reason == "refusal") and has_calls:
        fail(INVALID_TRANSCRIPT, f"stopReason {stop_reason} but the message has tool_calls")
    settle(fold, run, attempt, fact_id, message, stop_reason, timestamp)


def fast_assistant_entry(fold: FoldCore, fact: Any, fact_id: str) -> bool:
    entry: MessageEntry = fact.entry
    wire: AssistantWire = fact.entry.message
    stop_reason = entry.stopReason
    attempt_id = entry.attemptId
    if (
        stop_reason is UNSET
        or stop_reason == "refusal"
        or attempt_id is UNSET
        or entry.toolName is not UNSET
        or entry.toolStartedId is not UNSET
        or entry.result is not UNSET
        or entry.assistantEntryId is not UNSET
        or entry.toolIndex is not UNSET
        or fact_id in fold.books.reserved
    ):
        return False
    attempt = fold.books.attempts.get(attempt_id)
    run = fold.state.operation
    if (
        attempt is None
        or attempt.step_id != entry.stepId
        or not attempt.open
        or attempt.step_kind != "assistant"
        or type(run) is not RunOperation
        or run.operationId != attempt.operation_id
    ):
        return False
    calls = wire.tool_calls
    if calls is UNSET:
        if stop_reason == "toolUse":
            return False
    elif stop_reason == "stop" or not plain_tool_calls(calls):
        return False
    content = decode_text_or_null(wire.content)
    if content is NOT_TEXT:
        return False
    message = AssistantMessage(content) if calls is UNSET else AssistantMessage(content, calls)
    settle(fold, run, attempt, fact_id, message, stop_reason, fact.timestamp)
    return True


def settle(
    fold: FoldCore,
    run: RunOperation,
    attempt: AttemptBook,
    fact_id: str,
    message: AssistantMessage,
    stop_reason: StopReason,
    timestamp: int,
) -> None:
    """Close the (open, so newest) attempt an assistant entry settles, and append its message."""
    attempt.open = False
    step = newest(run)
    step.status = "settled"
    step.settledEntryId = fact_id
    step.stopReason = stop_reason
    breach = assistant_turn(fold.books.outstanding, message)
    fold.append_message(fact_id, message, timestamp, breach, attempt.operation_id, attempt.step_id, step.attemptId, stop_reason)
