"""The fold's own bookkeeping: what it remembers about attempts, operations and configurations.

Pure declarations.  None of this is conformance output (that is
:mod:`tiny_agent.journal.state`); it is what the rules look things up in.  The books
are flat on purpose: the fast path reads their attributes on every fact.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from tiny_agent.journal.facts import OperationKind
from tiny_agent.journal.state import CompactionOperation, ConfigurationSnapshot, LatestAttempt, RunOperation, StepKind


class AttemptBook(msgspec.Struct, gc=False):
    """One ``stepAttempt``: whose it is, what it saw, and how it ended."""

    id: str
    operation_id: str
    step_id: str
    step_kind: StepKind
    number: int
    context_through: str
    digest: str
    tool_names: frozenset[str]
    """The tools its configuration declared: the only ones a ``toolStarted`` of its entry may name."""
    step: LatestAttempt
    """The state's view of this attempt, which settling, failing and a raw fact update."""
    open: bool = True
    failed: bool = False
    settled_entry_id: str | None = None
    raw_id: str | None = None


class RunBook(msgspec.Struct):
    kind: ClassVar[OperationKind] = "run"
    state: RunOperation
    latest_step_id: str | None = None
    pending: int = 0
    """Started tool calls still waiting for their result (kept as a count: steps check it often)."""

    def first_pending(self) -> str:
        """The call ID of the first started call still pending (for an error reason; ``pending`` says whether one is)."""
        return next((call.toolCallId for call in self.state.toolCalls if call.status == "pending"), "?")


class CompactionBook(msgspec.Struct):
    kind: ClassVar[OperationKind] = "compaction"
    state: CompactionOperation
    latest_step_id: str | None = None
    pending: int = 0
    """Always 0 (a compaction starts no tools); kept so every book answers the same questions."""


OperationBook = RunBook | CompactionBook


class Configuration(msgspec.Struct, gc=False):
    """A validated configuration snapshot, as written (``source``) and normalized, with its digest."""

    source: dict[str, Any]
    snapshot: ConfigurationSnapshot
    digest: str
    tool_names: frozenset[str]
