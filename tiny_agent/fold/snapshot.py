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
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from tiny_agent.fold.books import AttemptBook, Books, Flavour
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.version import PROFILES
from tiny_agent.journal.partial import Elder, PartialDict, PartialSet, PartialTranscript, id_index
from tiny_agent.journal.state import AppliedEntry, IdleOperation, RunOperation, SessionState, ToolCallState
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


class Older(msgspec.Struct, forbid_unknown_fields=True):
    """The books' older part: what came before the current operation (a lean restore leaves it on disk)."""

    fact_ids: list[str]
    reserved: dict[str, Flavour]
    operations: list[str]
    attempts: dict[str, AttemptBook]
    tool_calls: dict[str, ToolCallState]
    used_pairs: list[tuple[str, int]]


class FoldSnapshot(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    books: Books
    """The books' newer part (the rest is :attr:`older_books`)."""
    state: SessionState
    """Every member but the three below, which are stored once in the rest of the snapshot."""
    context: list[int] | None
    """The active context as transcript positions (negative: ``context_extra[-1 - n]``); None: the whole transcript."""
    context_extra: list[Message]
    """Context messages the transcript does not hold (a compaction's summary)."""
    entries: list[AppliedEntry]
    """The entries from the active context's first transcript message on, in order; each holds its message."""
    older: dict[str, int]
    """How many items of each container (:data:`PARTS`) the older part holds."""
    index: bytes
    """The older part's IDs (:func:`~tiny_agent.journal.partial.id_index`): a lean fold still knows which are in use."""
    older_books: Older | None = None
    """Not in the head: the frame after it."""
    older_entries: list[AppliedEntry] = msgspec.field(default_factory=list)
    """Not in the head: the frames after that (the transcript's first ``older["transcript"]`` messages are theirs)."""


PARTS: Final = ("entries", "transcript", "fact_ids", "reserved", "operations", "attempts", "tool_calls", "used_pairs")
"""The containers a lean restore holds in part: the state's two, then the books' (:class:`Older`)."""
DICTS: Final = frozenset({"reserved", "attempts", "tool_calls"})


def capture(fold: Fold) -> FoldSnapshot:
    """The fold as a snapshot, after its last applied line; raises :class:`SnapshotRefused`."""
    if fold.spent or not fold.lines:
        raise SnapshotRefused("the fold is not at a line boundary of an accepted journal")
    if getattr(fold.books.tool_calls, "spilled", False):  # tiny_agent.fold.spilled: finished runs' calls are in the journal
        raise SnapshotRefused("the fold left its finished runs' calls in the journal")
    state, books = fold.state, fold.books
    state.load()
    _check_arguments([call.arguments for call in books.tool_calls.values()])
    context, extra = _context_of(state.transcript, state.activeContext)
    entries = list(state.entries.values())
    messages = min((at for at in context or [0] if at >= 0), default=len(state.transcript))
    cut = next((entry.position for entry in entries if entry.transcriptIndex >= messages), len(entries))
    operation = state.operation
    current = None if isinstance(operation, IdleOperation) else operation.operationId
    reserved = _split(books.reserved, lambda key, _: key == current)
    attempts = _split(books.attempts, lambda _, book: book.operation_id == current)
    tool_calls = _split(books.tool_calls, lambda _, call: call.operationId == current)
    older_ids = {entry.id for entry in entries[:cut]}
    older = Older(
        fact_ids=list(books.fact_ids),
        reserved=reserved[0],
        operations=[operation for operation in books.operations if operation != current],
        attempts=attempts[0],
        tool_calls=tool_calls[0],
        used_pairs=[pair for pair in books.used_pairs if pair[0] in older_ids],
    )
    newer = msgspec.structs.replace(
        books,
        fact_ids=set(),
        reserved=reserved[1],
        operations=books.operations - set(older.operations),
        attempts=attempts[1],
        tool_calls=tool_calls[1],
        used_pairs=books.used_pairs - set(older.used_pairs),
    )
    counts = {name: len(getattr(older, name)) for name in PARTS[2:]} | {"entries": cut, "transcript": messages}
    keys = (older_ids, older.fact_ids, older.reserved, older.operations, older.attempts, older.tool_calls)
    return FoldSnapshot(
        format=SNAPSHOT_FORMAT,
        books=newer,
        state=msgspec.structs.replace(state, transcript=[], activeContext=[], entries={}),
        context=context,
        context_extra=extra,
        entries=entries[cut:],
        older=counts,
        index=id_index(itertools.chain.from_iterable(keys)),
        older_books=older,
        older_entries=entries[:cut],
    )


def _split(items: dict[str, Any], newer: Callable[[str, Any], bool]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``items`` cut before the first that belongs to the current operation (its order is kept across the two)."""
    pairs = list(items.items())
    at = next((position for position, (key, value) in enumerate(pairs) if newer(key, value)), len(pairs))
    return dict(pairs[:at]), dict(pairs[at:])


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


@runtime_checkable
class OlderPart(Protocol):
    """A lean restore's older part on disk: read back whole, or its entries streamed (:func:`older_entries`)."""

    def __call__(self) -> tuple[Older, list[AppliedEntry]]: ...

    def entries(self) -> Iterator[AppliedEntry]: ...


def restore(snapshot: FoldSnapshot, load: Callable[[], tuple[Older, list[AppliedEntry]]] | None = None) -> Fold:
    """A fold that goes on from the snapshot's last line; raises :class:`SnapshotInvalid`.

    Lean, given ``load`` (for a snapshot read without its older part, see :meth:`SnapshotReader.older_frames`): the
    state and books hold their newer part (:mod:`tiny_agent.journal.partial`), and ``load`` reads the older part
    back when something first needs it (an :class:`OlderPart` can also stream its entries to a reader).
    """
    if snapshot.format != SNAPSHOT_FORMAT:
        raise SnapshotInvalid(f"snapshot format {snapshot.format} (this code reads {SNAPSHOT_FORMAT})")
    profile = PROFILES.get(snapshot.state.version)
    if profile is None:
        raise SnapshotInvalid(f"snapshot of an unknown journal version {snapshot.state.version}")
    fold = Fold()
    fold.adopt(profile)
    state, books, entries = snapshot.state, snapshot.books, snapshot.entries
    try:
        if load is None:
            parts = _parts(snapshot.older_books, snapshot.older_entries)
            if any(len(parts[name]) != snapshot.older.get(name, 0) for name in PARTS):
                raise IndexError("the older part is not the one the snapshot counts")
            state.entries = dict(parts["entries"])
            state.entries.update((entry.id, entry) for entry in entries)
            state.transcript = parts["transcript"] + [entry.message for entry in entries if entry.message is not None]
            for name in PARTS[2:]:
                older, newer = parts[name], getattr(books, name)
                setattr(books, name, dict(older) | newer if name in DICTS else set(older) | newer)
        else:
            streamed = load.entries if isinstance(load, OlderPart) else None
            elder = Elder(lambda: _parts(*load()), snapshot.index, snapshot.older, streamed)
            state.entries = PartialDict(elder, "entries", ((entry.id, entry) for entry in entries))
            state.transcript = PartialTranscript(elder, [entry.message for entry in entries if entry.message is not None])
            for name in PARTS[2:]:
                part = getattr(books, name)
                setattr(books, name, PartialDict(elder, name, part.items()) if name in DICTS else PartialSet(elder, name, part))
        extra = snapshot.context_extra
        positions = snapshot.context
        state.activeContext = (
            state.transcript[:]
            if positions is None
            else [state.transcript[at] if at >= 0 else extra[-1 - at] for at in positions]
        )
        operation = state.operation
        if type(operation) is RunOperation:
            operation.toolCalls = [books.tool_calls[call.toolStartedId] for call in operation.toolCalls]
    except (KeyError, IndexError) as error:
        raise SnapshotInvalid(f"inconsistent snapshot ({type(error).__name__}: {error})") from None
    fold.books = books
    fold.state = state
    return fold


def _parts(books: Older | None, entries: list[AppliedEntry]) -> dict[str, list[Any]]:
    """The older part as each container takes it back (dicts as their items, in order)."""
    if books is None:
        raise IndexError("the snapshot has no older part")
    parts = {name: list(getattr(books, name).items()) if name in DICTS else getattr(books, name) for name in PARTS[2:]}
    return parts | {
        "entries": [(entry.id, entry) for entry in entries],
        "transcript": [entry.message for entry in entries if entry.message is not None],
    }


# -- bytes --------------------------------------------------------------------------------
#
# MessagePack, not JSON: strings are stored as UTF-8 without escapes, which
# decodes a fifth faster, and a float (an infinity in tool arguments) keeps
# its exact value.  A snapshot is a sequence of frames: its head (all but the
# entries), then the entries a few thousand at a time, so a reader holds one
# frame's bytes at a time besides what it restores, never the whole snapshot.

ENTRIES_PER_FRAME: Final = 4096


def snapshot_frames(snapshot: FoldSnapshot) -> Iterator[bytes]:
    """The snapshot's frames: its head, the older books, the older entries, then the newer ones.

    Entries come :data:`ENTRIES_PER_FRAME` at a time, so a lean reader skips exactly
    :meth:`SnapshotReader.older_frames` frames after the head.
    """
    yield msgspec.msgpack.encode(msgspec.structs.replace(snapshot, entries=[], older_books=None, older_entries=[]))
    yield msgspec.msgpack.encode(snapshot.older_books)
    for part in (snapshot.older_entries, snapshot.entries):
        for start in range(0, len(part), ENTRIES_PER_FRAME):
            yield msgspec.msgpack.encode(part[start : start + ENTRIES_PER_FRAME])


def decode_older(frames: Iterable[bytes]) -> tuple[Older, list[AppliedEntry]]:
    """The older part from its frames (:meth:`SnapshotReader.older_frames` of them); raises :class:`SnapshotInvalid`."""
    reader = SnapshotReader()
    reader.frames = 1
    for frame in frames:
        reader.feed(frame)
    if reader.older_books is None:
        raise SnapshotInvalid("no older part")
    return reader.older_books, reader.older_entries


def older_entries(frames: Iterable[bytes]) -> Iterator[AppliedEntry]:
    """The older entries from their frames (those of :func:`decode_older` after the first, the older books), one
    frame decoded at a time; raises :class:`SnapshotInvalid`."""
    for frame in frames:
        try:
            entries = _decoder(list[AppliedEntry]).decode(frame)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise SnapshotInvalid(f"not a snapshot ({error})") from None
        yield from entries


class SnapshotReader:
    """Takes a snapshot's frames one by one (see :func:`snapshot_frames`); then :meth:`snapshot` is the whole of it."""

    def __init__(self) -> None:
        self._head: FoldSnapshot | None = None
        self.frames = 0
        """Frames fed or skipped so far."""
        self.older_books: Older | None = None
        self.older_entries: list[AppliedEntry] = []
        self._entries: list[AppliedEntry] = []

    def feed(self, frame: bytes | memoryview) -> None:
        """Raises :class:`SnapshotInvalid` for a frame that does not decode."""
        try:
            if self.frames == 0:
                self._head = _decoder(FoldSnapshot).decode(frame)
            elif self.frames == 1:
                self.older_books = _decoder(Older).decode(frame)
            else:
                entries = _decoder(list[AppliedEntry]).decode(frame)
                older = self._head is None or self.frames <= self.older_frames()
                (self.older_entries if older else self._entries).extend(entries)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise SnapshotInvalid(f"not a snapshot ({error})") from None
        self.frames += 1

    def older_frames(self) -> int:
        """After the head: how many frames hold the older part (a lean reader skips them)."""
        older = self._head.older.get("entries", 0) if self._head is not None else 0
        return 1 - (-older // ENTRIES_PER_FRAME)

    def snapshot(self) -> FoldSnapshot:
        if self._head is None:
            raise SnapshotInvalid("no frame at all")
        self._head.entries = self._entries
        self._head.older_books = self.older_books
        self._head.older_entries = self.older_entries
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
def _decoder(kind: Any) -> msgspec.msgpack.Decoder[Any]:
    """Built on first use: it costs milliseconds that a command which never restores should not pay."""
    return msgspec.msgpack.Decoder(kind)
