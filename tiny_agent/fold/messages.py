"""User and assistant message entries (session-v2 §8.1, §8.2): each reference rule next to its fast twin.

Pure.  Tool results are message entries too; they live with the tools
(:mod:`tiny_agent.fold.tools`).  The composed fold
(:class:`tiny_agent.fold.Fold`) parses the message and dispatches on its
role; these methods return the entry's index record, which it appends.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from tiny_agent.fold.books import AttemptBook, RunBook
from tiny_agent.fold.contract import (
    ASSISTANT_ENTRY_KEYS,
    DUPLICATE_ID,
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    STOP_REASON_WORDS,
    USER_ENTRY_KEYS,
    fail,
    is_stop_reason,
    one_of,
    require_uuid,
    show,
    unknown_key,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.transcript_rules import assistant_turn, plain_tool_calls, user_turn
from tiny_agent.fold.typed import AssistantWire, MessageEntry, UserWire
from tiny_agent.journal.json_profile import NOT_TEXT, decode_text, decode_text_or_null
from tiny_agent.journal.state import AppliedEntry
from tiny_agent.journal.transcript import AssistantMessage, StopReason, UserMessage


class MessageRules(FoldCore):
    # -- user entries (§8.1) ----------------------------------------------------

    def _user_entry(self, entry: dict[str, Any], fact_id: str, message: UserMessage, timestamp: int) -> AppliedEntry:
        if fact_id in self._reserved:
            fail(DUPLICATE_ID, f"user entry id {fact_id} is reserved by a record")
        if not entry.keys() <= USER_ENTRY_KEYS:
            unknown_key(entry, USER_ENTRY_KEYS, "user entry")
        return AppliedEntry(
            fact_id, len(self._entry_order), message, len(self.state.transcript), None, None, None, None, timestamp
        )

    def _fast_user_entry(self, entry: MessageEntry, wire: UserWire, fact_id: str, timestamp: int) -> bool:
        if (
            entry.step_id is not UNSET
            or entry.attempt_id is not UNSET
            or entry.stop_reason is not UNSET
            or entry.tool_name is not UNSET
            or entry.tool_started_id is not UNSET
            or entry.result is not UNSET
            or fact_id in self._reserved
        ):
            return False
        content = decode_text(wire.content)
        if content is NOT_TEXT or not content:
            return False
        message = UserMessage(content)
        record = AppliedEntry(
            fact_id, len(self._entry_order), message, len(self.state.transcript), None, None, None, None, timestamp
        )
        self._append_message(record, message, user_turn(self._outstanding))
        return True

    # -- assistant entries (§8.2) --------------------------------------------------

    def _assistant_entry(
        self, entry: dict[str, Any], fact_id: str, message: AssistantMessage, timestamp: int
    ) -> AppliedEntry:
        if fact_id in self._reserved:
            fail(DUPLICATE_ID, f"assistant entry id {fact_id} is reserved by a record")
        if not entry.keys() <= ASSISTANT_ENTRY_KEYS:
            unknown_key(entry, ASSISTANT_ENTRY_KEYS, "assistant entry")
        step_id = entry.get("stepId")
        attempt_id = entry.get("attemptId")
        attempt = self._attempts.get(attempt_id) if type(attempt_id) is str else None
        if attempt is None or attempt.step_id != step_id:
            # An attempt we know has valid IDs; anything else gets the checks in order.
            require_uuid(step_id, "assistant entry stepId")
            require_uuid(attempt_id, "assistant entry attemptId")
        stop_reason = entry.get("stopReason")
        if not is_stop_reason(stop_reason):
            fail(INVALID_FACT, f"assistant entry stopReason is not {one_of(STOP_REASON_WORDS)}: {show(stop_reason)}")
        if attempt is None:
            fail(INVALID_REFERENCE, f"assistant entry names unknown attempt {attempt_id}")
        if attempt.step_id != step_id:
            fail(INVALID_REFERENCE, f"attempt {attempt_id} belongs to step {attempt.step_id}, not {step_id}")
        if not attempt.open:
            fail(INVALID_REFERENCE, f"attempt {attempt_id} is already closed")
        if attempt.step_kind != "assistant":
            fail(INVALID_REFERENCE, f"attempt {attempt_id} is a compaction attempt")
        current = self._current
        if type(current) is not RunBook or current.state.operationId != attempt.operation_id:
            fail(INVALID_TRANSITION, f"the operation of attempt {attempt_id} is not the current run")
        has_calls = message.tool_calls is not UNSET
        if stop_reason == "toolUse" and not has_calls:
            fail(INVALID_TRANSCRIPT, "stopReason toolUse but the message has no tool_calls")
        if stop_reason == "stop" and has_calls:
            fail(INVALID_TRANSCRIPT, "stopReason stop but the message has tool_calls")
        return self._settle_assistant(attempt, fact_id, message, stop_reason, timestamp)

    def _fast_assistant_entry(self, entry: MessageEntry, wire: AssistantWire, fact_id: str, timestamp: int) -> bool:
        stop_reason = entry.stop_reason
        attempt_id = entry.attempt_id
        if (
            stop_reason is UNSET
            or attempt_id is UNSET
            or entry.tool_name is not UNSET
            or entry.tool_started_id is not UNSET
            or entry.result is not UNSET
            or fact_id in self._reserved
        ):
            return False
        attempt = self._attempts.get(attempt_id)
        current = self._current
        if (
            attempt is None
            or attempt.step_id != entry.step_id
            or not attempt.open
            or attempt.step_kind != "assistant"
            or type(current) is not RunBook
            or current.state.operationId != attempt.operation_id
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
        record = self._settle_assistant(attempt, fact_id, message, stop_reason, timestamp)
        self._append_message(record, message, assistant_turn(self._outstanding, message))
        return True

    def _settle_assistant(
        self, attempt: AttemptBook, fact_id: str, message: AssistantMessage, stop_reason: StopReason, timestamp: int
    ) -> AppliedEntry:
        """Close the attempt an assistant entry settles; the entry's index record, to append."""
        attempt.open = False
        attempt.settled_entry_id = fact_id
        step = attempt.step
        step.status = "settled"
        step.settledEntryId = fact_id
        step.stopReason = stop_reason
        return AppliedEntry(
            fact_id,
            len(self._entry_order),
            message,
            len(self.state.transcript),
            attempt.operation_id,
            attempt.step_id,
            attempt.id,
            stop_reason,
            timestamp,
        )
