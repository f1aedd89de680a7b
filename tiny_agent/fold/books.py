"""The fold's bookkeeping: everything its rules remember besides the reduced state, in one object.

Pure declarations.  With the state, :class:`Books` is all a fold needs to go on; a snapshot stores
it as it is (it shares with the state only ``state.operation.toolCalls``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tiny_agent.journal.state import ConfigurationSnapshot, StepKind, ToolCallState

Flavour = Literal["identity", "tool-result", "compaction-result"]
"""What reserved an ID, and so which fact may later carry it (session-v2 §6)."""


class AttemptBook(msgspec.Struct, array_like=True, gc=False):
    """One ``stepAttempt``: whose it is, under which configuration, and whether it is still open.

    The rest is the state's ``step``, kept for the current operation's newest attempt only: the only
    one rules read or change, as an open attempt is its operation's newest.
    """

    operation_id: str
    step_id: str
    step_kind: StepKind
    number: int
    digest: str
    """Its configuration's: the tools a ``toolStarted`` of the entry it settled may name."""
    open: bool = True


class Configuration(msgspec.Struct, array_like=True, gc=False):
    """A validated configuration snapshot, as written (``source``) and normalized, with its digest."""

    source: dict[str, Any]
    snapshot: ConfigurationSnapshot
    digest: str
    tool_names: frozenset[str]


class Books(msgspec.Struct):
    """Where the fold is, and the IDs, attempts, operations, tools and configurations its rules check against."""

    lines: int = 0
    """Committed lines folded, the header included."""
    length: int = 0
    """Their bytes, each line's LF included."""
    next_seq: int = 1
    chain: bytes = b""
    """v3: the seal chain through the last committed line (empty for v2)."""
    fact_ids: set[str] = msgspec.field(default_factory=set)
    """IDs of the applied facts other than entries (an entry's is its key in ``state.entries``)."""
    reserved: dict[str, Flavour] = msgspec.field(default_factory=dict)
    outstanding: set[str] = msgspec.field(default_factory=set)
    """Tool call IDs the transcript has not answered yet (the role rule, §12)."""
    operations: set[str] = msgspec.field(default_factory=set)
    """Every operation started; the unfinished one, if any, is ``state.operation``."""
    pending: int = 0
    """The current run's started calls still waiting for their result (steps check it often)."""
    attempts: dict[str, AttemptBook] = msgspec.field(default_factory=dict)
    tool_calls: dict[str, ToolCallState] = msgspec.field(default_factory=dict)
    """Every started call by its ``toolStarted`` ID (the current run's are in its ``toolCalls`` too)."""
    used_pairs: set[tuple[str, int]] = msgspec.field(default_factory=set)
    """(assistant entry, tool index) pairs already started or answered before execution."""
    configurations: dict[str, Configuration] = msgspec.field(default_factory=dict)
    """By digest: sessions reuse one snapshot for step after step, which is validated once."""
