"""The composed fold: every concept's rules, and the dispatch from a fact to them.

Pure and deterministic: no I/O, no clock, no globals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tiny_agent.fold.compaction import CompactionRules
from tiny_agent.fold.contract import ENTRY_FACT_KEYS, INVALID_FACT, RECORD_FACT_KEYS, fail, show, unknown_key
from tiny_agent.fold.core import ReferenceRule
from tiny_agent.fold.messages import MessageRules
from tiny_agent.fold.operations import OperationRules
from tiny_agent.fold.sealing import SealRules, mcp_fact
from tiny_agent.fold.steps import StepRules
from tiny_agent.fold.tools import ToolRules
from tiny_agent.fold.transcript_rules import parse_message, role_rule
from tiny_agent.fold.typed import (
    AssistantWire,
    EntryFactWire,
    RecordFactWire,
    RunStartedWire,
    StepAttemptWire,
    ToolStartedWire,
    UserWire,
)
from tiny_agent.fold.usage import UsageRules
from tiny_agent.journal.transcript import AssistantMessage, ToolMessage, UserMessage


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
    ordinary line straight into typed Structs (:mod:`tiny_agent.fold.typed`) and
    applies a fact only when every rule holds; it never raises.  For each
    fact it first checks, then applies, so the first fact it cannot vouch
    for is still untouched and the reference path takes over from that fact,
    finding its first fault.  The two paths share the code that applies a
    fact; the differential tests (tests/test_fast_path.py) hold their
    outcomes identical.

    Linear time: every fact is checked against indexes (sets and dicts keyed
    by ID), state is updated in place, and nothing earlier is re-read.
    """

    def _reference_rules(self) -> Mapping[str, ReferenceRule]:
        return REFERENCE_RULES

    # -- entries (§8) ---------------------------------------------------------------
    #
    # The fast dispatchers call each rule from its own call site: CPython 3.11
    # specializes a call only where the callee never changes (a table of
    # rules called from one site measured ~5% slower), and ``match`` class
    # patterns cost about three times a ``type() is`` test.

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
        self._append_message(record, message, role_rule(self._outstanding, message))

    def _fast_entry_fact(self, fact: EntryFactWire, fact_id: str) -> bool:
        entry = fact.entry
        # Typed Any for one type() call and identity tests (see FoldCore._fast_fact); each rule is typed.
        message: Any = entry.message
        kind = type(message)
        if kind is UserWire:
            return self._fast_user_entry(entry, message, fact_id, fact.timestamp)
        if kind is AssistantWire:
            return self._fast_assistant_entry(entry, message, fact_id, fact.timestamp)
        return self._fast_tool_entry(entry, message, fact_id, fact.timestamp)

    # -- records (§9) -------------------------------------------------------------------

    def _record_fact(self, fact: dict[str, Any], fact_id: str) -> None:
        if not fact.keys() <= RECORD_FACT_KEYS:
            unknown_key(fact, RECORD_FACT_KEYS, "record fact")
        record = fact.get("record")
        if type(record) is not dict:
            fail(INVALID_FACT, "record is not an object")
        record_type = record.get("type")
        rule = RECORD_RULES.get(record_type) if type(record_type) is str else None
        if rule is None:
            fail(INVALID_FACT, f"unknown record type {show(record_type)}")
        rule(self, record, fact_id)

    def _fast_record_fact(self, fact: RecordFactWire, fact_id: str) -> bool:
        record: Any = fact.record
        kind = type(record)
        if kind is ToolStartedWire:
            return self._fast_tool_started(record, fact_id)
        if kind is StepAttemptWire:
            return self._fast_step_attempt(record, fact_id)
        if kind is RunStartedWire:
            return self._fast_run_started(record, fact_id)
        return self._fast_run_finished(record, fact_id)


REFERENCE_RULES: Final[Mapping[str, ReferenceRule]] = {
    "entry": Fold._entry_fact,
    "record": Fold._record_fact,
    "usage": Fold._usage_fact,
    "raw": Fold._raw_fact,
    "mcp": mcp_fact,
    "seal": Fold._seal_fact,
}
"""Each fact kind's reference rule (the header's profile says which kinds exist)."""

RECORD_RULES: Final[Mapping[str, ReferenceRule]] = {
    "runStarted": Fold._run_started,
    "compactionStarted": Fold._compaction_started,
    "stepAttempt": Fold._step_attempt,
    "stepFailed": Fold._step_failed,
    "toolStarted": Fold._tool_started_record,
    "abortRequested": Fold._abort_requested,
    "operationFinished": Fold._operation_finished,
}
"""Each record type's reference rule (session-v2 §9)."""

