"""The fold at a line boundary as plain data, and back: what a checkpoint stores.

Pure.  A :class:`FoldSnapshot` holds everything a :class:`Fold` needs to go
on folding lines exactly as if it had folded the prefix itself: its books
(:class:`~tiny_agent.fold.books.Books`), stored whole, and the reduced state.
Objects the state shares are stored once and shared again on restore, so a
restored state costs what a folded one does: a message is held by the
transcript, the active context and its entry's index record
(:class:`~tiny_agent.journal.state.AppliedEntry`); a started call by the
books and by the current run's ``toolCalls``.  What the fold only caches
(the message IDs and running digest compactions check) is rebuilt on demand.

Nothing here knows which journal a snapshot belongs to:
:mod:`tiny_agent.stores.checkpoints` keys it by the digest of the journal
prefix, and restores it only after checking that digest.  Capturing refuses
(:class:`SnapshotRefused`) a fold that is not between two lines of an
accepted journal, or whose tool arguments JSON cannot carry back unchanged;
restoring refuses (:class:`SnapshotInvalid`) bytes that are not a consistent
snapshot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Final

import msgspec

from tiny_agent.fold.books import Books
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.version import PROFILES
from tiny_agent.journal.state import (
    AppliedEntry,
    Elder,
    PartialEntries,
    PartialTranscript,
    RunOperation,
    SessionState,
)
from tiny_agent.journal.transcript import Message

SNAPSHOT_FORMAT: Final = 3
"""Bumped whenever the stored shape changes (a checkpoint of another format is not read)."""


NOT_STORED: Final = frozenset(
    {"profile", "spent", "seq", "breach", "line_facts", "fact_index", "sources", "_line_decoder", "_proven"}
)
"""The fold's members besides its books and state: the profile (the state's version says which), what
matters only while a line is folded, the compactions' cache (rebuilt on demand) and the decoders."""


class SnapshotRefused(Exception):
    """This fold cannot be stored exactly (the reason is one line)."""


class SnapshotInvalid(Exception):
    """These bytes are not a snapshot this code can restore (the reason is one line)."""


class FoldSnapshot(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    books: Books
    state: SessionState
    """Every member but the three below, which are stored once in the rest of the snapshot."""
    context: list[int] | None
    """The active context as transcript positions (negative: ``context_extra[-1 - n]``); None: the whole transcript."""
    context_extra: list[Message]
    """Context messages the transcript does not hold (a compaction's summary)."""
    entries: list[AppliedEntry]
    """In order; each holds its message (the transcript is these messages)."""
    older: int = 0
    """How many entries come before the active context's first transcript message (a lean restore leaves them on disk)."""
    older_ids: list[str] = msgspec.field(default_factory=list)
    """Their IDs (a lean fold still knows which IDs are in use)."""
    older_messages: int = 0
    """How many of them are messages."""


def capture(fold: Fold) -> FoldSnapshot:
    """The fold as a snapshot, after its last applied line; raises :class:`SnapshotRefused`."""
    if fold.spent or not fold.lines:
        raise SnapshotRefused("the fold is not at a line boundary of an accepted journal")
    _check_arguments([call.arguments for call in fold.books.tool_calls.values()])
    state = fold.state
    context, extra = _context_of(state.transcript, state.activeContext)
    entries = list(state.entries.values())
    messages = min((at for at in context or [0] if at >= 0), default=len(state.transcript))
    older = next((entry.position for entry in entries if entry.transcriptIndex >= messages), len(entries))
    return FoldSnapshot(
        format=SNAPSHOT_FORMAT,
        books=fold.books,
        state=msgspec.structs.replace(state, transcript=[], activeContext=[], entries={}),
        context=context,
        context_extra=extra,
        entries=entries,
        older=older,
        older_ids=[entry.id for entry in entries[:older]],
        older_messages=messages,
    )


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


def _check_arguments(arguments: list[dict[str, object]]) -> None:
    """Tool arguments are any JSON; refuse what a snapshot cannot bring back equal (a huge integer, or its kept text)."""
    try:
        again = msgspec.msgpack.decode(msgspec.msgpack.encode(arguments))
    except (msgspec.DecodeError, msgspec.EncodeError, OverflowError, TypeError) as error:
        raise SnapshotRefused(f"tool arguments cannot be stored: {error}") from None
    if again != arguments:
        raise SnapshotRefused("tool arguments do not come back unchanged")


def restore(snapshot: FoldSnapshot, older: Callable[[], list[AppliedEntry]] | None = None) -> Fold:
    """A fold that goes on from the snapshot's last line; raises :class:`SnapshotInvalid`.

    Lean, given ``older`` (a snapshot read without its older entries, :attr:`SnapshotReader.lean`): the state
    holds the entries from the active context on, and ``older`` gives the rest back when something needs them.
    """
    if snapshot.format != SNAPSHOT_FORMAT:
        raise SnapshotInvalid(f"snapshot format {snapshot.format} (this code reads {SNAPSHOT_FORMAT})")
    profile = PROFILES.get(snapshot.state.version)
    if profile is None:
        raise SnapshotInvalid(f"snapshot of an unknown journal version {snapshot.state.version}")
    fold = Fold()
    fold.adopt(profile)
    state = snapshot.state
    entries = snapshot.entries
    try:
        if older is not None and snapshot.older:
            elder = Elder(older, frozenset(snapshot.older_ids), snapshot.older_messages)
            state.entries = PartialEntries(elder, ((entry.id, entry) for entry in entries))
            state.transcript = PartialTranscript(elder, [entry.message for entry in entries if entry.message is not None])
        else:
            state.entries = {entry.id: entry for entry in entries}
            state.transcript = [entry.message for entry in entries if entry.message is not None]
        if len(state.entries) != len(entries) + (snapshot.older if older is not None else 0):
            raise IndexError("the entries are not the ones the snapshot counts")
        extra = snapshot.context_extra
        positions = snapshot.context
        state.activeContext = (
            list(state.transcript)
            if positions is None
            else [state.transcript[at] if at >= 0 else extra[-1 - at] for at in positions]
        )
        operation = state.operation
        if type(operation) is RunOperation:
            operation.toolCalls = [snapshot.books.tool_calls[call.toolStartedId] for call in operation.toolCalls]
    except (KeyError, IndexError) as error:
        raise SnapshotInvalid(f"inconsistent snapshot ({type(error).__name__}: {error})") from None
    fold.books = snapshot.books
    fold.state = state
    return fold


# -- bytes --------------------------------------------------------------------------------
#
# MessagePack, not JSON: strings are stored as UTF-8 without escapes, which
# decodes a fifth faster, and a float (an infinity in tool arguments) keeps
# its exact value.  A snapshot is a sequence of frames: its head (all but the
# entries), then the entries a few thousand at a time, so a reader holds one
# frame's bytes at a time besides what it restores, never the whole snapshot.

ENTRIES_PER_FRAME: Final = 4096


def snapshot_frames(snapshot: FoldSnapshot) -> Iterator[bytes]:
    """The snapshot's frames: its head, then its older entries, then the rest, in slices of :data:`ENTRIES_PER_FRAME`.

    The older entries end a frame, so a lean reader skips exactly :meth:`SnapshotReader.older_frames` frames.
    """
    entries = snapshot.entries
    yield msgspec.msgpack.encode(msgspec.structs.replace(snapshot, entries=[]))
    for part in (entries[: snapshot.older], entries[snapshot.older :]):
        for start in range(0, len(part), ENTRIES_PER_FRAME):
            yield msgspec.msgpack.encode(part[start : start + ENTRIES_PER_FRAME])


def decode_entries(frame: bytes | memoryview) -> list[AppliedEntry]:
    """One frame of entries; raises :class:`SnapshotInvalid`."""
    try:
        return _entries_decoder().decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise SnapshotInvalid(f"not a snapshot ({error})") from None


class SnapshotReader:
    """Takes a snapshot's frames one by one (see :func:`snapshot_frames`); then :meth:`snapshot` is the whole of it."""

    def __init__(self) -> None:
        self._head: FoldSnapshot | None = None
        self._entries: list[AppliedEntry] = []

    def feed(self, frame: bytes | memoryview) -> None:
        """Raises :class:`SnapshotInvalid` for a frame that does not decode."""
        if self._head is not None:
            self._entries.extend(decode_entries(frame))
            return
        try:
            self._head = _head_decoder().decode(frame)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise SnapshotInvalid(f"not a snapshot ({error})") from None

    def older_frames(self) -> int:
        """After the head: how many frames hold the older entries (a lean reader skips them)."""
        older = self._head.older if self._head is not None else 0
        return -(-older // ENTRIES_PER_FRAME)

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
