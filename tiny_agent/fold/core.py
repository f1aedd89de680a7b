"""What the fold's rules work over (the state, the books, the line being folded) and the steps every concept
shares: the ID namespace (session-v2 §6), operation lookup (§9.0), appending a message (§8.1).  Pure."""

from __future__ import annotations

import hashlib
from itertools import islice
from typing import Any, cast

import msgspec

from tiny_agent.fold import contract
from tiny_agent.fold.books import Books, Flavour
from tiny_agent.fold.contract import (
    DUPLICATE_ID,
    INVALID_REFERENCE,
    INVALID_TRANSITION,
    fail,
    require_keys,
    require_uuid,
    uuid_match,
)
from tiny_agent.fold.version import V2, VersionProfile
from tiny_agent.journal.canonical import canonical_json
from tiny_agent.journal.facts import OperationKind
from tiny_agent.journal.state import (
    IDLE,
    AppliedEntry,
    CompactionOperation,
    IdleOperation,
    LatestAttempt,
    RunOperation,
    SessionState,
)
from tiny_agent.journal.transcript import Message, StopReason

Operation = RunOperation | CompactionOperation


class FoldCore:
    """The fold's data; ``state`` exists once the header is applied."""

    __slots__ = ("state", "books", "profile", "spent", "seq", "breach", "line_facts", "fact_index", "sources")

    state: SessionState

    def __init__(self) -> None:
        self.books = Books()
        self.profile: VersionProfile = V2
        """Replaced by the header's (:mod:`tiny_agent.fold.version`)."""
        self.spent = False
        """A line failed: the fold refuses further use."""
        # The line being folded:
        self.seq: int | None = None
        """The seq of the fact being folded, once it is known (errors carry it)."""
        self.breach: str | None = None
        """The first role-rule breach of the line: it fails the line once every fact is applied (§12)."""
        self.line_facts = 0
        self.fact_index = 0
        self.sources = Sources()

    # -- the ID namespace (§6) ----------------------------------------------------

    def reserve(self, value: object, flavour: Flavour, what: str) -> str:
        reserved = require_uuid(value, what)
        books = self.books
        if reserved in books.fact_ids or reserved in self.state.entries or reserved in books.reserved:
            fail(DUPLICATE_ID, f"{what} {reserved} is already in use")
        books.reserved[reserved] = flavour
        return reserved

    def reservable(self, value: str, fact_id: str) -> bool:
        """The fast twin of :meth:`reserve`'s checks, and the envelope's: the reserved ID is not the fact's own."""
        books = self.books
        return (
            value != fact_id
            and uuid_match(value) is not None
            and value not in books.fact_ids
            and value not in self.state.entries
            and value not in books.reserved
        )

    # -- operations (§9.0) ----------------------------------------------------------

    def lookup_operation(self, value: object, what: str) -> Operation:
        """A known, unfinished operation (at most one is unfinished: the current one)."""
        operation = self.state.operation
        if not isinstance(operation, IdleOperation) and operation.operationId == value:
            return operation
        if type(value) is not str or value not in self.books.operations:
            require_uuid(value, what)
            fail(INVALID_REFERENCE, f"{what} {value} names no operation")
        fail(INVALID_TRANSITION, f"operation {value} is already finished")

    def start(self, record: dict[str, Any], keys: frozenset[str], kind: OperationKind) -> str:
        """The first rules of ``runStarted`` and ``compactionStarted`` (§9.1, §9.2); the operation ID, reserved."""
        what = f"{kind}Started"
        require_keys(record, keys, f"{what} record")
        if record.get("operationKind") != kind:
            fail(INVALID_TRANSITION, f'{what} operationKind is not "{kind}"')
        if not isinstance(self.state.operation, IdleOperation):
            fail(INVALID_TRANSITION, f"{what} while another operation is unfinished")
        return self.reserve(record.get("operationId"), contract.IDENTITY, f"{what} operationId")

    def named(self, record: dict[str, Any], keys: frozenset[str], what: str) -> tuple[Operation, OperationKind]:
        """The unfinished operation a record names, of the kind it names (``abortRequested``, ``operationFinished``)."""
        require_keys(record, keys, f"{what} record")
        operation = self.lookup_operation(record.get("operationId"), f"{what} operationId")
        kind = kind_of(operation)
        if record.get("operationKind") != kind:
            fail(INVALID_TRANSITION, f"{what} operationKind is not {kind}")
        return operation, kind

    def begin(self, operation: Operation) -> None:
        self.books.operations.add(operation.operationId)
        self.books.pending = 0
        self.state.operation = operation

    def finish(self) -> None:
        state = self.state
        state.operation = IDLE
        state.pendingCut = None
        last = state.lastOutcome
        if last is not None and last.kind == "run":
            state.lastRunOutcome = last

    # -- entries (§8) ---------------------------------------------------------------

    def append_message(
        self,
        fact_id: str,
        message: Message,
        timestamp: int,
        breach: str | None,
        operation_id: str | None = None,
        step_id: str | None = None,
        attempt_id: str | None = None,
        stop_reason: StopReason | None = None,
    ) -> None:
        """Apply a message entry that passed every rule; a role-rule ``breach`` fails the line at its end."""
        state = self.state
        entries = state.entries
        transcript = state.transcript
        entries[fact_id] = AppliedEntry(
            fact_id, len(entries), message, len(transcript), operation_id, step_id, attempt_id, stop_reason, timestamp
        )
        transcript.append(message)
        state.activeContext.append(message)
        state.contextBoundary = fact_id
        if breach is not None and self.breach is None:
            self.breach = breach


def kind_of(operation: Operation) -> OperationKind:
    return "run" if type(operation) is RunOperation else "compaction"


def first_pending(run: RunOperation) -> str:
    """The call ID of the run's first started call still pending (for an error reason; ``books.pending`` says whether one is)."""
    return next((call.toolCallId for call in run.toolCalls if call.status == "pending"), "?")


def newest(operation: Operation) -> LatestAttempt:
    """The operation's newest attempt: only it can be open (:class:`~tiny_agent.fold.books.AttemptBook`)."""
    return cast(LatestAttempt, operation.step)


class Sources:
    """The session's messages as compactions name them: their IDs, and the running source digest (§13.3); a cache
    extended forward (compactions normally summarise through the newest message), so total work stays linear."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._scanned = 0
        self._hash = hashlib.sha256(b"[")
        self._hashed = 0

    def message_ids(self, entries: dict[str, AppliedEntry], count: int) -> list[str]:
        """The IDs of the first ``count`` message entries."""
        if len(self._ids) < count:
            keys = getattr(entries, "message_keys", None)  # entries that keep messages elsewhere name them cheaply
            if keys is not None:
                self._ids.extend(keys(self._scanned))
            else:
                added = islice(entries.values(), self._scanned, None)
                self._ids.extend(entry.id for entry in added if entry.message is not None)
            self._scanned = len(entries)
        return self._ids[:count]

    def digest(self, entries: dict[str, AppliedEntry], count: int) -> str:
        """The source digest through the first ``count`` messages."""
        ids = self.message_ids(entries, count)
        if count < self._hashed:
            self._hash = hashlib.sha256(b"[")
            self._hashed = 0
        while self._hashed < count:
            entry_id = ids[self._hashed]
            if self._hashed:
                self._hash.update(b",")
            item = {"sourceEntryId": entry_id, "message": msgspec.to_builtins(entries[entry_id].message)}
            self._hash.update(canonical_json(item))
            self._hashed += 1
        final = self._hash.copy()
        final.update(b"]")
        return "sha256:" + final.hexdigest()
