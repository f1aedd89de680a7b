"""Compaction: ``compactionStarted`` (session-v2 §9.2), the compaction entry (§8.4), the source digest (§13.3).

Pure.  Compactions are rare and always take the reference path.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
from msgspec import UNSET

from tiny_agent.fold.books import CompactionBook
from tiny_agent.fold.contract import (
    COMPACTION_ENTRY_KEYS,
    COMPACTION_RESULT,
    COMPACTION_STARTED_KEYS,
    IDENTITY,
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    RETAINED_KEYS,
    fail,
    is_digest,
    require_keys,
    require_object,
    require_uuid,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.transcript_rules import parse_message, transcript_violation
from tiny_agent.journal.canonical import canonical_json
from tiny_agent.journal.state import AppliedEntry, CompactionOperation, PendingCut
from tiny_agent.journal.transcript import Message, compaction_summary_message


class CompactionRules(FoldCore):
    def __init__(self, *, fast_path: bool = True) -> None:
        super().__init__(fast_path=fast_path)
        self._source_digest = SourceDigest()

    # -- compactionStarted (§9.2) --------------------------------------------------

    def _compaction_started(self, record: dict[str, Any], fact_id: str) -> None:
        require_keys(record, COMPACTION_STARTED_KEYS, "compactionStarted record")
        if record.get("operationKind") != "compaction":
            fail(INVALID_TRANSITION, 'compactionStarted operationKind is not "compaction"')
        if self._current is not None:
            fail(INVALID_TRANSITION, "compactionStarted while another operation is unfinished")
        operation_id = self._reserve(record.get("operationId"), IDENTITY, "compactionStarted operationId")
        through_id = require_uuid(record.get("inputThroughEntryId"), "compactionStarted inputThroughEntryId")
        result_id = self._reserve(record.get("resultEntryId"), COMPACTION_RESULT, "compactionStarted resultEntryId")
        through = self.state.entries.get(through_id)
        if through is None:
            fail(INVALID_REFERENCE, f"inputThroughEntryId {through_id} names no entry")
        compacted = record.get("compactedEntryIds")
        retained = record.get("retainedEntryIds")
        if type(compacted) is not list or not compacted:
            fail(INVALID_FACT, "compactedEntryIds is not a non-empty array")
        if type(retained) is not list:
            fail(INVALID_FACT, "retainedEntryIds is not an array")
        for identifier in (*compacted, *retained):
            require_uuid(identifier, "compactedEntryIds/retainedEntryIds element")
        message_count = through.transcriptIndex + 1 if through.message is not None else -1
        if message_count < 0 or compacted + retained != self.message_ids[:message_count]:
            fail(
                INVALID_REFERENCE,
                "compactedEntryIds + retainedEntryIds are not the session's message entries through inputThroughEntryId",
            )
        source_digest = record.get("sourceDigest")
        if not is_digest(source_digest):
            fail(INVALID_FACT, "sourceDigest is not a sha256 digest")
        if source_digest != self._source_digest.through(self.message_ids, self.state.entries, message_count):
            fail(INVALID_REFERENCE, "sourceDigest does not match the messages through inputThroughEntryId")
        compaction = CompactionOperation(operationId=operation_id, inputThroughEntryId=through_id, resultEntryId=result_id)
        self._begin(CompactionBook(state=compaction))
        self.state.pendingCut = PendingCut(through=compacted[-1], retained=retained)

    # -- the compaction entry (§8.4) -----------------------------------------------------

    def _compaction_entry(self, entry: dict[str, Any], fact_id: str, timestamp: int) -> None:
        if self._reserved.get(fact_id) != COMPACTION_RESULT:
            fail(INVALID_REFERENCE, f"compaction entry id {fact_id} was not reserved by compactionStarted")
        require_keys(entry, COMPACTION_ENTRY_KEYS, "compaction entry")
        operation = self._lookup_operation(entry.get("operationId"), "compaction entry operationId")
        if type(operation) is not CompactionBook:
            fail(INVALID_TRANSITION, "compaction entry does not belong to a compaction")
        compaction = operation.state
        if compaction.resultEntryId != fact_id:
            fail(INVALID_REFERENCE, f"compaction entry id is not the reserved result id {compaction.resultEntryId}")
        through_id = require_uuid(entry.get("compactedThroughEntryId"), "compactedThroughEntryId")
        entries = self.state.entries
        through = entries.get(through_id)
        if through is None:
            fail(INVALID_REFERENCE, f"compactedThroughEntryId {through_id} names no entry")
        summary = entry.get("summary")
        if type(summary) is not str:
            fail(INVALID_FACT, "compaction summary is not a string")
        tail = entry.get("retainedTail")
        if type(tail) is not list:
            fail(INVALID_FACT, "compaction retainedTail is not an array")
        input_position = entries[compaction.inputThroughEntryId].position
        if input_position < through.position:
            fail(INVALID_REFERENCE, "compactedThroughEntryId lies after the compaction's input boundary")
        expected = [
            entry_id
            for entry_id in self._entry_order[through.position + 1 : input_position + 1]
            if entries[entry_id].message is not None
        ]
        retained = self._retained_tail(tail, expected)
        breach = transcript_violation(retained)
        if breach is not None:
            fail(INVALID_TRANSCRIPT, f"retained tail breaks the role rule: {breach}")
        step = compaction.step
        attempt = self._attempts.get(step.attemptId) if step is not UNSET else None
        if attempt is None or not attempt.open or attempt.step_kind != "compaction":
            fail(INVALID_TRANSITION, "compaction entry without an open compaction attempt")
        attempt.open = False
        attempt.settled_entry_id = fact_id
        attempt.step.status = "settled"
        attempt.step.settledEntryId = fact_id
        del self._reserved[fact_id]
        entries[fact_id] = AppliedEntry(
            fact_id, len(self._entry_order), None, -1, compaction.operationId, attempt.step_id, attempt.id, None, timestamp
        )
        self._entry_order.append(fact_id)
        self.state.activeContext = [compaction_summary_message(summary), *retained]
        self.state.contextBoundary = compaction.inputThroughEntryId

    def _retained_tail(self, tail: list[Any], expected: list[str]) -> list[Message]:
        """The retained messages, as the objects the transcript already holds (they must equal the tail's)."""
        retained: list[Message] = []
        for index, item in enumerate(tail):
            what = f"retainedTail[{index}]"
            element = require_object(item, what)
            require_keys(element, RETAINED_KEYS, what)
            source_id = require_uuid(element.get("sourceEntryId"), f"{what}.sourceEntryId")
            message = parse_message(element.get("message"), f"{what}.message")
            if index >= len(expected) or source_id != expected[index]:
                fail(INVALID_REFERENCE, f"{what} is not the next message after compactedThroughEntryId")
            stored = self.state.entries[source_id].message
            if stored is None or stored != message:
                fail(INVALID_REFERENCE, f"{what}.message differs from the stored message {source_id}")
            retained.append(stored)
        if len(retained) != len(expected):
            fail(INVALID_REFERENCE, f"retainedTail holds {len(retained)} messages, expected {len(expected)}")
        return retained


class SourceDigest:
    """Running SHA-256 over the canonical source list (session-v2 §13.3).

    Compactions normally summarise through the newest message, so the hash is
    extended forward and copied at each request instead of recomputed from the
    start: total work stays linear in the number of messages.
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256(b"[")
        self._count = 0

    def through(self, message_ids: list[str], entries: dict[str, AppliedEntry], message_count: int) -> str:
        if message_count < self._count:
            self._hash = hashlib.sha256(b"[")
            self._count = 0
        while self._count < message_count:
            entry_id = message_ids[self._count]
            if self._count:
                self._hash.update(b",")
            item = {"sourceEntryId": entry_id, "message": msgspec.to_builtins(entries[entry_id].message)}
            self._hash.update(canonical_json(item))
            self._count += 1
        final = self._hash.copy()
        final.update(b"]")
        return "sha256:" + final.hexdigest()
