"""The fold at a line boundary as plain data, and back: what a checkpoint stores.

Pure.  A :class:`FoldSnapshot` holds everything a :class:`Fold` needs to go
on folding lines exactly as if it had folded the prefix itself: the reduced
state and the bookkeeping behind the rules (IDs in use, reservations,
attempts, operations, started tools, configurations, the seal chain).

Objects the fold shares are stored once and shared again on restore, so a
restored state costs what a folded one does:

- a message is held by the transcript, the active context and its entry's
  index record (:class:`~tiny_agent.journal.state.AppliedEntry`);
- an attempt's view (:class:`~tiny_agent.journal.state.LatestAttempt`) by its book
  and by its operation's ``step``;
- a started tool call by the fold's index and by its run's ``toolCalls``;
- a configuration snapshot by every attempt made under it.

What the fold only caches (the running source digest of compactions) is
rebuilt on demand.  Nothing here knows which journal a snapshot belongs to:
:mod:`tiny_agent.stores.checkpoints` keys it by the digest of the journal prefix,
and restores it only after checking that digest.

Capturing refuses (:class:`SnapshotRefused`) whatever it cannot store
exactly: a fold that has members or book fields this module does not know
(someone added one: teach it here, tests/test_checkpoints.py says so), or
tool arguments that JSON cannot carry back unchanged.  Restoring refuses
(:class:`SnapshotInvalid`) bytes that are not a consistent snapshot.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any, Final

import msgspec
from msgspec import UNSET

from tiny_agent.fold.books import AttemptBook, CompactionBook, Configuration, OperationBook, RunBook
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.version import PROFILES
from tiny_agent.journal.state import IDLE, AppliedEntry, LatestAttempt, SessionState, StepKind, StepStatus, ToolCallState
from tiny_agent.journal.transcript import Message, StopReason

SNAPSHOT_FORMAT: Final = 1
"""Bumped whenever the stored shape changes (a checkpoint of another format is not read)."""


class SnapshotRefused(Exception):
    """This fold cannot be stored exactly (the reason is one line)."""


class SnapshotInvalid(Exception):
    """These bytes are not a snapshot this code can restore (the reason is one line)."""


class AttemptRow(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """An attempt's book and its view, less what they share: the view's fixed members are the book's."""

    id: str
    operation_id: str
    step_id: str
    step_kind: StepKind
    number: int
    context_through: str
    digest: str
    """Names the configuration: its snapshot and tool names are shared, not stored per attempt."""
    open: bool
    failed: bool
    settled_entry_id: str | None
    raw_id: str | None
    status: StepStatus
    step_settled_entry_id: str | None
    stop_reason: StopReason | None
    step_raw_id: str | None
    raw_status: int | None


class RunRow(msgspec.Struct, tag="run", array_like=True, forbid_unknown_fields=True, gc=False):
    book: RunBook
    """Its operation's shared members taken out (``toolCalls`` empty, ``step`` unset): restoring puts them back."""


class CompactionRow(msgspec.Struct, tag="compaction", array_like=True, forbid_unknown_fields=True, gc=False):
    book: CompactionBook
    """Its operation's ``step`` taken out."""


class FoldSnapshot(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    version: int
    lines: int
    committed_length: int
    next_seq: int
    chain: bytes
    """v3: the chain through the last line (the next line's seal must carry it); empty for v2."""
    state: SessionState
    """Every member but the four below, which are stored once in the rest of the snapshot."""
    entries: list[AppliedEntry]
    """In order; each holds its message (the transcript is these messages)."""
    context: list[int] | None
    """The active context as transcript positions (negative: ``context_extra[-1 - n]``); None: the whole transcript."""
    context_extra: list[Message]
    """Context messages the transcript does not hold (a compaction's summary)."""
    current: str | None
    """The unfinished operation (the state's ``operation``), if any."""
    operations: list[RunRow | CompactionRow]
    attempts: list[AttemptRow]
    """In the order they were made: an operation's ``step`` is the view of its newest attempt."""
    tool_calls: list[ToolCallState]
    """In the order they were started: a run's ``toolCalls`` are its calls, in this order."""
    configurations: list[Configuration]
    fact_ids: list[str]
    """The IDs in use by facts other than entries (an entry's is its index record's)."""
    reserved: dict[str, list[str]]
    """Reserved IDs by what reserved them (restored sharing the one flavour string)."""
    outstanding: list[str]
    used_pairs: list[tuple[str, int]]


CAPTURED: Final = frozenset(
    {
        "state",
        "lines",
        "committed_length",
        "profile",
        "message_ids",
        "_next_seq",
        "_fact_ids",
        "_reserved",
        "_entry_order",
        "_outstanding",
        "_operations",
        "_current",
        "_attempts",
        "_step_attempts",
        "_tool_started",
        "_used_pairs",
        "_configurations",
        "_chain",
    }
)
"""The fold's members a snapshot stores (some derived again from others on restore)."""

BETWEEN_LINES: Final = frozenset({"_spent", "_seq", "_transcript_breach", "_facts_in_line", "_fact_index"})
"""Members that matter only while a line is folded: reset or set afresh by the next line."""

REBUILT: Final = frozenset({"_sealed", "_fast_kinds", "_line_decoder", "_proven", "_source_digest"})
"""Members made again on restore: from the version's profile, fresh decoders, an empty digest cache."""

KNOWN_MEMBERS: Final = CAPTURED | BETWEEN_LINES | REBUILT

ATTEMPT_BOOK_FIELDS: Final = frozenset(
    {
        "id",
        "operation_id",
        "step_id",
        "step_kind",
        "number",
        "context_through",
        "digest",
        "tool_names",
        "step",
        "open",
        "failed",
        "settled_entry_id",
        "raw_id",
    }
)
LATEST_ATTEMPT_FIELDS: Final = frozenset(
    {
        "operationId",
        "stepId",
        "attemptId",
        "attempt",
        "stepKind",
        "status",
        "contextThroughEntryId",
        "configurationSnapshot",
        "configurationDigest",
        "settledEntryId",
        "stopReason",
        "rawId",
        "rawStatus",
    }
)
"""The members an :class:`AttemptRow` accounts for; a book or view with others is not captured."""


# -- capture ----------------------------------------------------------------------------


def capture(fold: Fold) -> FoldSnapshot:
    """The fold as a snapshot, after its last applied line; raises :class:`SnapshotRefused`."""
    _check_capturable(fold)
    state = fold.state
    entries = list(state.entries.values())
    _check_entries(fold, entries)
    context, extra = _context_of(state.transcript, state.activeContext)
    current = fold._current
    if (current is None) != (state.operation is IDLE) or (current is not None and state.operation is not current.state):
        raise SnapshotRefused("the state's operation is not the fold's current one")
    tool_calls = list(fold._tool_started.values())
    _check_arguments(tool_calls)
    _check_derivable(fold, tool_calls)
    return FoldSnapshot(
        format=SNAPSHOT_FORMAT,
        version=fold.profile.version,
        lines=fold.lines,
        committed_length=fold.committed_length,
        next_seq=fold._next_seq,
        chain=fold._chain,
        state=msgspec.structs.replace(state, transcript=[], activeContext=[], entries={}, operation=IDLE),
        entries=entries,
        context=context,
        context_extra=extra,
        current=None if current is None else current.state.operationId,
        operations=[_operation_row(book) for book in fold._operations.values()],
        attempts=[_attempt_row(book, fold._configurations) for book in fold._attempts.values()],
        tool_calls=tool_calls,
        configurations=list(fold._configurations.values()),
        fact_ids=[fact_id for fact_id in fold._fact_ids if fact_id not in state.entries],
        reserved=_by_flavour(fold._reserved),
        outstanding=sorted(fold._outstanding),
        used_pairs=sorted(fold._used_pairs),
    )


def _check_capturable(fold: Fold) -> None:
    members = set(vars(fold))
    unknown = sorted(members - KNOWN_MEMBERS)
    if unknown:
        raise SnapshotRefused(f"the fold has members a snapshot does not store: {', '.join(unknown)}")
    if fold._spent or not fold.lines or fold._transcript_breach is not None:
        raise SnapshotRefused("the fold is not at a line boundary of an accepted journal")
    if _field_names(AttemptBook) != ATTEMPT_BOOK_FIELDS or _field_names(LatestAttempt) != LATEST_ATTEMPT_FIELDS:
        raise SnapshotRefused("an attempt's book or view has members a snapshot does not store")


def _field_names(struct: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(field.name for field in msgspec.structs.fields(struct))


def _check_entries(fold: Fold, entries: list[AppliedEntry]) -> None:
    """The transcript, the message IDs and the entry order are what restoring derives from the entries."""
    if fold._entry_order != [entry.id for entry in entries]:
        raise SnapshotRefused("the entry order is not the index's")
    messages = [entry for entry in entries if entry.message is not None]
    transcript = fold.state.transcript
    if len(messages) != len(transcript) or fold.message_ids != [entry.id for entry in messages]:
        raise SnapshotRefused("the transcript is not the index's messages")
    for position, entry in enumerate(messages):
        if entry.message is not transcript[position] or entry.transcriptIndex != position:
            raise SnapshotRefused(f"entry {entry.id} does not hold transcript message {position}")


def _context_of(transcript: list[Message], context: list[Message]) -> tuple[list[int] | None, list[Message]]:
    """The active context by transcript position (the same objects), or None when it is the whole transcript."""
    if len(context) == len(transcript) and all(ours is theirs for ours, theirs in zip(context, transcript, strict=True)):
        return None, []
    where = {id(message): position for position, message in enumerate(transcript)}
    positions: list[int] = []
    extra: list[Message] = []
    for message in context:
        position = where.get(id(message))
        if position is None:
            extra.append(message)
            position = -len(extra)
        positions.append(position)
    return positions, extra


def _check_arguments(calls: list[ToolCallState]) -> None:
    """Tool arguments are any JSON; refuse what a snapshot cannot bring back equal (a huge integer, or its kept text)."""
    arguments = [call.arguments for call in calls]
    try:
        again = msgspec.msgpack.decode(msgspec.msgpack.encode(arguments))
    except (msgspec.DecodeError, msgspec.EncodeError, OverflowError, TypeError) as error:
        raise SnapshotRefused(f"tool arguments cannot be stored: {error}") from None
    if again != arguments:
        raise SnapshotRefused("tool arguments do not come back unchanged")


def _check_derivable(fold: Fold, tool_calls: list[ToolCallState]) -> None:
    """Each operation's ``step`` and ``toolCalls`` are what restoring derives from the attempts and the started calls."""
    newest: dict[str, LatestAttempt] = {}
    for attempt in fold._attempts.values():
        newest[attempt.operation_id] = attempt.step
    started: dict[str, list[ToolCallState]] = {}
    for call in tool_calls:
        started.setdefault(call.operationId, []).append(call)
    for operation_id, book in fold._operations.items():
        if book.state.step is not newest.get(operation_id, UNSET):
            raise SnapshotRefused(f"operation {operation_id}'s step is not its newest attempt's view")
        calls = book.state.toolCalls if isinstance(book, RunBook) else []
        expected = started.get(operation_id, [])
        if len(calls) != len(expected) or any(ours is not theirs for ours, theirs in zip(calls, expected, strict=True)):
            raise SnapshotRefused(f"operation {operation_id}'s tool calls are not the calls it started")


def _by_flavour(reserved: dict[str, str]) -> dict[str, list[str]]:
    flavours: dict[str, list[str]] = {}
    for reserved_id, flavour in reserved.items():
        flavours.setdefault(flavour, []).append(reserved_id)
    return flavours


def _operation_row(book: OperationBook) -> RunRow | CompactionRow:
    if isinstance(book, RunBook):
        run = msgspec.structs.replace(book.state, toolCalls=[], step=UNSET)
        return RunRow(book=msgspec.structs.replace(book, state=run))
    compaction = msgspec.structs.replace(book.state, step=UNSET)
    return CompactionRow(book=msgspec.structs.replace(book, state=compaction))


def _attempt_row(book: AttemptBook, configurations: dict[str, Configuration]) -> AttemptRow:
    step = book.step
    configuration = configurations.get(book.digest)
    if (
        configuration is None
        or step.configurationSnapshot != configuration.snapshot
        or book.tool_names != configuration.tool_names
        or step.configurationDigest != book.digest
        or step.attemptId != book.id
        or step.operationId != book.operation_id
        or step.stepId != book.step_id
        or step.attempt != book.number
        or step.stepKind != book.step_kind
        or step.contextThroughEntryId != book.context_through
    ):
        raise SnapshotRefused(f"attempt {book.id}'s view differs from its book")
    return AttemptRow(
        book.id,
        book.operation_id,
        book.step_id,
        book.step_kind,
        book.number,
        book.context_through,
        book.digest,
        book.open,
        book.failed,
        book.settled_entry_id,
        book.raw_id,
        step.status,
        _optional(step.settledEntryId),
        _optional(step.stopReason),
        _optional(step.rawId),
        _optional(step.rawStatus),
    )


def _optional(value: Any) -> Any:
    return None if value is UNSET else value


# -- restore ------------------------------------------------------------------------------


def restore(snapshot: FoldSnapshot) -> Fold:
    """A fold that goes on from the snapshot's last line; raises :class:`SnapshotInvalid`."""
    if snapshot.format != SNAPSHOT_FORMAT:
        raise SnapshotInvalid(f"snapshot format {snapshot.format} (this code reads {SNAPSHOT_FORMAT})")
    profile = PROFILES.get(snapshot.version)
    if profile is None:
        raise SnapshotInvalid(f"snapshot of an unknown journal version {snapshot.version}")
    try:
        return _restored(snapshot, Fold())
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise SnapshotInvalid(f"inconsistent snapshot ({type(error).__name__}: {error})") from None


def _restored(snapshot: FoldSnapshot, fold: Fold) -> Fold:
    fold._adopt(PROFILES[snapshot.version])
    fold.lines = snapshot.lines
    fold.committed_length = snapshot.committed_length
    fold._next_seq = snapshot.next_seq
    fold._chain = snapshot.chain
    state = snapshot.state
    entries = snapshot.entries
    state.entries = {entry.id: entry for entry in entries}
    fold._entry_order = list(state.entries)
    fold.message_ids, state.transcript = _messages(entries)
    state.activeContext = _context(state.transcript, snapshot.context, snapshot.context_extra)
    configurations = {configuration.digest: configuration for configuration in snapshot.configurations}
    fold._configurations = configurations
    attempts = _attempts(snapshot.attempts, configurations)
    fold._attempts = attempts
    fold._step_attempts = _by_step(attempts.values())
    fold._tool_started = {call.toolStartedId: call for call in snapshot.tool_calls}
    fold._operations = _operations(snapshot.operations, attempts, snapshot.tool_calls)
    fold._current = None if snapshot.current is None else fold._operations[snapshot.current]
    state.operation = IDLE if fold._current is None else fold._current.state
    fold._fact_ids = set(snapshot.fact_ids)
    fold._fact_ids.update(state.entries)
    fold._reserved = _reserved(snapshot.reserved)
    fold._outstanding = set(snapshot.outstanding)
    fold._used_pairs = set(snapshot.used_pairs)
    fold.state = state
    return fold


def _messages(entries: list[AppliedEntry]) -> tuple[list[str], list[Message]]:
    """The message entries' IDs and their messages, in order, in one pass (on a big heap every visit is a cache miss)."""
    message_ids: list[str] = []
    transcript: list[Message] = []
    add_id = message_ids.append
    add_message = transcript.append
    for entry in entries:
        message = entry.message
        if message is not None:
            add_id(entry.id)
            add_message(message)
    return message_ids, transcript


def _reserved(flavours: dict[str, list[str]]) -> dict[str, str]:
    """The reservations, every one sharing its flavour's string (a decoded string would be a new object per ID)."""
    reserved: dict[str, str] = {}
    for flavour, ids in flavours.items():
        reserved.update(dict.fromkeys(ids, flavour))
    return reserved


def _context(transcript: list[Message], positions: list[int] | None, extra: list[Message]) -> list[Message]:
    if positions is None:
        return list(transcript)
    return [transcript[position] if position >= 0 else extra[-1 - position] for position in positions]


def _attempts(rows: list[AttemptRow], configurations: dict[str, Configuration]) -> dict[str | None, AttemptBook]:
    attempts: dict[str | None, AttemptBook] = {}
    unset = UNSET
    for row in rows:
        configuration = configurations[row.digest]
        settled = row.step_settled_entry_id
        stop = row.stop_reason
        raw_id = row.step_raw_id
        raw_status = row.raw_status
        step = LatestAttempt(
            row.operation_id,
            row.step_id,
            row.id,
            row.number,
            row.step_kind,
            row.status,
            row.context_through,
            configuration.snapshot,
            row.digest,
            unset if settled is None else settled,
            unset if stop is None else stop,
            unset if raw_id is None else raw_id,
            unset if raw_status is None else raw_status,
        )
        attempts[row.id] = AttemptBook(
            row.id,
            row.operation_id,
            row.step_id,
            row.step_kind,
            row.number,
            row.context_through,
            row.digest,
            configuration.tool_names,
            step,
            row.open,
            row.failed,
            row.settled_entry_id,
            row.raw_id,
        )
    return attempts


def _by_step(attempts: Iterable[AttemptBook]) -> dict[str, list[AttemptBook]]:
    """Each step's attempts in the order they were made (the fold's ``_step_attempts``)."""
    steps: dict[str, list[AttemptBook]] = {}
    for attempt in attempts:
        same_step = steps.get(attempt.step_id)
        if same_step is None:
            steps[attempt.step_id] = [attempt]
        else:
            same_step.append(attempt)
    return steps


def _operations(
    rows: list[RunRow | CompactionRow], attempts: dict[str | None, AttemptBook], calls: list[ToolCallState]
) -> dict[str, OperationBook]:
    """The books, each operation's ``step`` its newest attempt's view, each run's ``toolCalls`` its started calls."""
    operations: dict[str, OperationBook] = {}
    runs: dict[str, RunBook] = {}
    for row in rows:
        book = row.book
        operations[book.state.operationId] = book
        if isinstance(book, RunBook):
            runs[book.state.operationId] = book
    for attempt in attempts.values():
        operations[attempt.operation_id].state.step = attempt.step
    for call in calls:
        runs[call.operationId].state.toolCalls.append(call)
    return operations


# -- bytes --------------------------------------------------------------------------------
#
# MessagePack, not JSON: strings are stored as UTF-8 without escapes, which
# decodes a fifth faster, and a float (an infinity in tool arguments) keeps
# its exact value.  A snapshot is a sequence of frames: its head (all but the
# entries), then the entries a few thousand at a time, so a reader holds one
# frame's bytes at a time besides what it restores, never the whole snapshot.

ENTRIES_PER_FRAME: Final = 4096


def snapshot_frames(snapshot: FoldSnapshot) -> Iterator[bytes]:
    """The snapshot's frames: its head, then its entries in slices of :data:`ENTRIES_PER_FRAME`."""
    entries = snapshot.entries
    yield msgspec.msgpack.encode(msgspec.structs.replace(snapshot, entries=[]))
    for start in range(0, len(entries), ENTRIES_PER_FRAME):
        yield msgspec.msgpack.encode(entries[start : start + ENTRIES_PER_FRAME])


class SnapshotReader:
    """Takes a snapshot's frames one by one (see :func:`snapshot_frames`); then :meth:`snapshot` is the whole of it."""

    def __init__(self) -> None:
        self._head: FoldSnapshot | None = None
        self._entries: list[AppliedEntry] = []

    def feed(self, frame: bytes | memoryview) -> None:
        """Raises :class:`SnapshotInvalid` for a frame that does not decode."""
        try:
            if self._head is None:
                self._head = _head_decoder().decode(frame)
            else:
                self._entries.extend(_entries_decoder().decode(frame))
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise SnapshotInvalid(f"not a snapshot ({error})") from None

    def snapshot(self) -> FoldSnapshot:
        if self._head is None:
            raise SnapshotInvalid("no frame at all")
        self._head.entries = self._entries
        return self._head


def encode_snapshot(snapshot: FoldSnapshot) -> bytes:
    """The frames, each after its length (4 bytes, big-endian): what :func:`decode_snapshot` reads."""
    return b"".join(len(frame).to_bytes(4, "big") + frame for frame in snapshot_frames(snapshot))


def decode_snapshot(data: bytes) -> FoldSnapshot:
    """Raises :class:`SnapshotInvalid` for bytes that are not :func:`encode_snapshot`'s."""
    reader = SnapshotReader()
    view = memoryview(data)
    position = 0
    while position < len(data):
        end = position + 4 + int.from_bytes(view[position : position + 4], "big")
        if end > len(data):
            raise SnapshotInvalid("a frame runs past the end")
        reader.feed(view[position + 4 : end])
        position = end
    return reader.snapshot()


@functools.cache
def _head_decoder() -> msgspec.msgpack.Decoder[FoldSnapshot]:
    """Built on first use: it costs milliseconds that a command which never restores should not pay."""
    return msgspec.msgpack.Decoder(FoldSnapshot)


@functools.cache
def _entries_decoder() -> msgspec.msgpack.Decoder[list[AppliedEntry]]:
    return msgspec.msgpack.Decoder(list[AppliedEntry])
