"""The composed fold: every concept's rules, and the dispatch from a fact to them.

Pure and deterministic: no I/O, no clock, no globals.
"""

from __future__ import annotations

from typing import Any

from tiny_agent.facts import FactKind
from tiny_agent.fold.compaction import CompactionRules
from tiny_agent.fold.contract import ENTRY_FACT_KEYS, INVALID_FACT, RECORD_FACT_KEYS, fail, show, unknown_key
from tiny_agent.fold.core import KindRules, ReferenceRule
from tiny_agent.fold.messages import MessageRules
from tiny_agent.fold.operations import OperationRules
from tiny_agent.fold.sealing import SealRules
from tiny_agent.fold.steps import StepRules
from tiny_agent.fold.tools import ToolRules
from tiny_agent.fold.transcript_rules import parse_message
from tiny_agent.fold.usage import UsageRules
from tiny_agent.transcript import AssistantMessage, ToolMessage, UserMessage
from tiny_agent.wire import (
    AssistantWire,
    EntryFactWire,
    OperationFinishedWire,
    RawFactWire,
    RecordFactWire,
    RunStartedWire,
    SealFactWire,
    StepAttemptWire,
    ToolStartedWire,
    ToolWire,
    UsageFactWire,
    UserWire,
)


class Fold(MessageRules, ToolRules, StepRules, OperationRules, CompactionRules, UsageRules, SealRules):
    """An incremental reduction of one journal, line by line.

    ``apply_header`` then ``apply_line`` for each committed line, in order.
    ``state`` is the reduced state so far (advanced in place).  Any
    :class:`~tiny_agent.errors.CorruptionError` spends the fold: the line that
    failed may be half applied, so the fold refuses further use; a caller
    that needs to go on (the writer, after refusing a candidate) starts a new
    fold.

    Two paths fold a line.  The reference path reads it as untrusted dicts
    and checks every rule in the contract's order, because the contract
    reports the *first* rule a fact breaks and structural and semantic rules
    are interleaved (an unknown operation outranks a malformed ``attempt``):
    it is the definition of what the fold accepts and of which error it
    reports.  The fast path (``fast_path=True``, the default) decodes an
    ordinary line straight into typed Structs (:mod:`tiny_agent.wire`) and
    applies a fact only when every rule holds; it never raises.  For each
    fact it first checks, then applies, so the first fact it cannot vouch
    for is still untouched and the reference path takes over from that fact,
    finding its first fault.  The two paths share the code that applies a
    fact; the differential tests (tests/test_fast_path.py) hold their
    outcomes identical.

    Linear time: every fact is checked against indexes (sets and dicts keyed
    by ID), state is updated in place, and nothing earlier is re-read.
    """

    def __init__(self, *, fast_path: bool = True) -> None:
        super().__init__(fast_path=fast_path)
        self._records: dict[str, ReferenceRule] = {
            "runStarted": self._run_started,
            "compactionStarted": self._compaction_started,
            "stepAttempt": self._step_attempt,
            "stepFailed": self._step_failed,
            "toolStarted": self._tool_started_record,
            "abortRequested": self._abort_requested,
            "operationFinished": self._operation_finished,
        }

    def _kind_rules(self) -> dict[FactKind, KindRules]:
        return {
            "entry": KindRules(self._entry_fact, EntryFactWire, self._fast_entry_fact),
            "record": KindRules(self._record_fact, RecordFactWire, self._fast_record_fact),
            "usage": KindRules(self._usage_fact, UsageFactWire, self._fast_usage),
            "raw": KindRules(self._raw_fact, RawFactWire, self._fast_raw),
            "seal": KindRules(self._seal_fact, SealFactWire, self._fast_seal),
        }

    # -- entries (§8) ---------------------------------------------------------------

    def _entry_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= ENTRY_FACT_KEYS:
            unknown_key(fact, ENTRY_FACT_KEYS, "entry fact")
        entry = fact.get("entry")
        if type(entry) is not dict:
            fail(INVALID_FACT, "entry is not an object")
        entry_type = entry.get("type")
        if entry_type == "message":
            self._message_entry(entry, fact_id, fact["timestamp"])
        elif entry_type == "compaction":
            self._compaction_entry(entry, fact_id, fact["timestamp"])
        else:
            fail(INVALID_FACT, f"unknown entry type {show(entry_type)}")

    def _message_entry(self, entry: dict[str, Any], fact_id: str, timestamp: int) -> None:
        message = parse_message(entry.get("message"))
        match message:
            case UserMessage():
                record = self._user_entry(entry, fact_id, message, timestamp)
            case AssistantMessage():
                record = self._assistant_entry(entry, fact_id, message, timestamp)
            case ToolMessage():
                record = self._tool_entry(entry, fact_id, message, timestamp)
        self._append_message(record, message)

    def _fast_entry_fact(self, fact: EntryFactWire, fact_id: str) -> bool:
        entry = fact.entry
        message = entry.message
        # ``type(...) is`` rather than ``match``: a class pattern costs about three times as much.
        if type(message) is UserWire:
            return self._fast_user_entry(entry, message, fact_id, fact.timestamp)
        if type(message) is AssistantWire:
            return self._fast_assistant_entry(entry, message, fact_id, fact.timestamp)
        if type(message) is ToolWire:
            return self._fast_tool_entry(entry, message, fact_id, fact.timestamp)
        return False

    # -- records (§9) -------------------------------------------------------------------

    def _record_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= RECORD_FACT_KEYS:
            unknown_key(fact, RECORD_FACT_KEYS, "record fact")
        record = fact.get("record")
        if type(record) is not dict:
            fail(INVALID_FACT, "record is not an object")
        record_type = record.get("type")
        rule = self._records.get(record_type) if type(record_type) is str else None
        if rule is None:
            fail(INVALID_FACT, f"unknown record type {show(record_type)}")
        rule(record, fact_id)

    def _fast_record_fact(self, fact: RecordFactWire, fact_id: str) -> bool:
        record = fact.record
        if type(record) is ToolStartedWire:
            return self._fast_tool_started(record, fact_id)
        if type(record) is StepAttemptWire:
            return self._fast_step_attempt(record, fact_id)
        if type(record) is RunStartedWire:
            return self._fast_run_started(record, fact_id)
        if type(record) is OperationFinishedWire:
            return self._fast_run_finished(record)
        return False
