"""Compaction: ``compactionStarted`` (session-v2 §9.2) and the compaction entry (§8.4).

Pure.  Compactions are rare: they have no fast twins.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from msgspec import UNSET

from tiny_agent.fold import contract
from tiny_agent.fold.contract import (
    INVALID_FACT,
    INVALID_REFERENCE,
    INVALID_TRANSCRIPT,
    INVALID_TRANSITION,
    fail,
    is_digest,
    is_safe_int,
    require_keys,
    require_object,
    require_uuid,
    show,
)
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.transcript_rules import parse_message, transcript_violation
from tiny_agent.journal.state import AppliedEntry, CompactionOperation, PendingCut
from tiny_agent.journal.transcript import Message, compaction_summary_message


def compaction_started(fold: FoldCore, record: dict[str, Any], fact_id: str) -> None:
    operation_id = fold.start(record, fold.profile.compaction_started_keys, "compaction")
    if "piece" in record and not is_safe_int(record["piece"], 1):
        fail(INVALID_FACT, f"compactionStarted piece is not a positive integer: {show(record['piece'])}")
    through_id = require_uuid(record.get("inputThroughEntryId"), "compactionStarted inputThroughEntryId")
    result_id = fold.reserve(record.get("resultEntryId"), contract.COMPACTION_RESULT, "compactionStarted resultEntryId")
    entries = fold.state.entries
    through = entries.get(through_id)
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
    count = through.transcriptIndex + 1 if through.message is not None else -1
    if count < 0 or compacted + retained != fold.sources.message_ids(entries, count):
        fail(
            INVALID_REFERENCE,
            "compactedEntryIds + retainedEntryIds are not the session's message entries through inputThroughEntryId",
        )
    source_digest = record.get("sourceDigest")
    if not is_digest(source_digest):
        fail(INVALID_FACT, "sourceDigest is not a sha256 digest")
    if source_digest != fold.sources.digest(entries, count):
        fail(INVALID_REFERENCE, "sourceDigest does not match the messages through inputThroughEntryId")
    fold.begin(CompactionOperation(operationId=operation_id, inputThroughEntryId=through_id, resultEntryId=result_id))
    fold.state.pendingCut = PendingCut(through=compacted[-1], retained=retained)


def compaction_entry(fold: FoldCore, entry: dict[str, Any], fact_id: str, timestamp: int) -> None:
    books = fold.books
    if books.reserved.get(fact_id) != contract.COMPACTION_RESULT:
        fail(INVALID_REFERENCE, f"compaction entry id {fact_id} was not reserved by compactionStarted")
    require_keys(entry, contract.COMPACTION_ENTRY_KEYS, "compaction entry")
    compaction = fold.lookup_operation(entry.get("operationId"), "compaction entry operationId")
    if type(compaction) is not CompactionOperation:
        fail(INVALID_TRANSITION, "compaction entry does not belong to a compaction")
    if compaction.resultEntryId != fact_id:
        fail(INVALID_REFERENCE, f"compaction entry id is not the reserved result id {compaction.resultEntryId}")
    through_id = require_uuid(entry.get("compactedThroughEntryId"), "compactedThroughEntryId")
    entries = fold.state.entries
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
    between = islice(entries.values(), through.position + 1, input_position + 1)
    retained = _retained_tail(entries, tail, [record.id for record in between if record.message is not None])
    breach = transcript_violation(retained)
    if breach is not None:
        fail(INVALID_TRANSCRIPT, f"retained tail breaks the role rule: {breach}")
    step = compaction.step
    attempt = books.attempts.get(step.attemptId) if step is not UNSET else None
    if step is UNSET or attempt is None or not attempt.open or attempt.step_kind != "compaction":
        fail(INVALID_TRANSITION, "compaction entry without an open compaction attempt")
    attempt.open = False
    step.status = "settled"
    step.settledEntryId = fact_id
    del books.reserved[fact_id]
    entries[fact_id] = AppliedEntry(
        fact_id, len(entries), None, -1, compaction.operationId, attempt.step_id, step.attemptId, None, timestamp
    )
    fold.state.activeContext = [compaction_summary_message(summary), *retained]
    fold.state.lastCount = None  # the provider's count was of the context just replaced
    fold.state.contextBoundary = compaction.inputThroughEntryId


def _retained_tail(entries: dict[str, AppliedEntry], tail: list[Any], expected: list[str]) -> list[Message]:
    """The retained messages, as the objects the transcript already holds (they must equal the tail's)."""
    retained: list[Message] = []
    for index, item in enumerate(tail):
        what = f"retainedTail[{index}]"
        element = require_object(item, what)
        require_keys(element, contract.RETAINED_KEYS, what)
        source_id = require_uuid(element.get("sourceEntryId"), f"{what}.sourceEntryId")
        message = parse_message(element.get("message"), f"{what}.message")
        if index >= len(expected) or source_id != expected[index]:
            fail(INVALID_REFERENCE, f"{what} is not the next message after compactedThroughEntryId")
        stored = entries[source_id].message
        if stored is None or stored != message:
            fail(INVALID_REFERENCE, f"{what}.message differs from the stored message {source_id}")
        retained.append(stored)
    if len(retained) != len(expected):
        fail(INVALID_REFERENCE, f"retainedTail holds {len(retained)} messages, expected {len(expected)}")
    return retained
