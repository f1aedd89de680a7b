"""A fold that leaves its messages in the journal, for a reader of the whole transcript with no checkpoint to read it
from (``replay``; docs/performance.md, "Replay streams the older transcript").  Pure: the journal's lines come from a
:data:`LineAt` the caller gives.

:func:`spill` puts three containers in a fold's state once its header is applied; the fold's rules are unchanged and
go on over them.  ``entries`` keeps every entry's ID, but the whole :class:`~tiny_agent.journal.state.AppliedEntry`
only while its message is among the newest :data:`RECENT`: an older message entry is its position in place, with
where its line starts and the two values its line does not hold (its transcript index and operation) in columns, and
a lookup (``[]``, ``get``) hands out the entry rebuilt from its line (each rule sees exactly what a whole fold holds).
``transcript`` and ``activeContext`` count what is appended without holding it (the context holds what a compaction
put in it).  Printing reads them in order, one line at a time (:meth:`SpilledEntries.in_order`,
:func:`~tiny_agent.journal.partial.entries_in_order`), never putting them back; any other reader (an encoding of the
whole state, an index into the transcript) first puts every entry back in place (:meth:`SpilledEntries.load`), so it
sees what a whole fold gives.  The books' started calls of finished runs are left in the journal the same way
(:class:`SpilledCalls`); such a fold is never stored as a snapshot.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any, Final

import msgspec

from tiny_agent.errors import StorageError
from tiny_agent.fold.contract import Fault
from tiny_agent.fold.core import FoldCore
from tiny_agent.fold.transcript_rules import parse_message
from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation
from tiny_agent.journal.state import AppliedEntry, ToolCallState
from tiny_agent.journal.transcript import Message, UserMessage

LineAt = Callable[[int], bytes]
"""The committed line that starts at a byte offset of the journal, without its LF."""

_decode = msgspec.json.Decoder().decode

RECENT: Final = 1024
"""How many of the newest messages stay in memory (what the rules of the next lines look up)."""


def spill(fold: FoldCore, line_at: LineAt, recent: int | None = None) -> SpilledEntries:
    """Make a fold whose header is applied (and nothing more) hold its messages only while they are recent."""
    state = fold.state
    if state.entries or state.transcript or state.activeContext:
        raise RuntimeError("only a fold with no entry yet can spill its messages")
    if fold.books.tool_calls:
        raise RuntimeError("only a fold with no started call yet can spill its messages")
    lines = _Lines(line_at)
    entries = SpilledEntries(fold, lines, RECENT if recent is None else recent)
    fold.books.tool_calls = SpilledCalls(fold, lines)
    if fold.books.fact_ids:
        raise RuntimeError("only a fold with no fact yet can spill its IDs")
    fold.books.fact_ids = SpilledIds(fold, lines)
    state.entries = entries
    state.transcript = entries.transcript
    state.activeContext = SpilledContext(entries, [], 0)
    return entries


# The containers here hold an int in place of what they leave in the journal: their own methods read and write it
# through the plain dict's, untyped.
_put: Callable[[dict[str, Any], str, object], None] = dict.__setitem__
_at: Callable[[dict[str, Any], str], Any] = dict.__getitem__
_get: Callable[[dict[str, Any], str], Any] = dict.get
_items: Callable[[dict[str, Any]], Iterable[tuple[str, Any]]] = dict.items


class _Lines:
    """The facts of the journal's committed lines, by the byte their line starts at (the newest line read is kept:
    the entries and calls read back are mostly read in order, several from one line)."""

    def __init__(self, line_at: LineAt) -> None:
        self._line_at = line_at
        self._decoded: tuple[int, dict[str, dict[str, Any]]] = (-1, {})

    def fact(self, start: int, fact_id: str) -> dict[str, Any]:
        """The fact ``fact_id`` of the line at ``start``, as the fold's reference path reads it."""
        fact = self.facts(start).get(fact_id)
        if fact is None:
            changed = f"the line at byte {start} no longer holds fact {fact_id}"
            raise StorageError(f"the journal changed while it was read: {changed}")
        return fact

    def facts(self, start: int) -> dict[str, dict[str, Any]]:
        """The facts of the line at ``start`` by ID (none if it no longer reads as a line of facts)."""
        decoded_at, facts = self._decoded
        if decoded_at != start:
            try:
                facts = facts_of_line(self._line_at(start))
            except (ProfileViolation, Fault):
                facts = {}
            self._decoded = (start, facts)
        return facts


FLUSH: Final = 1 << 13
"""How many of the newest fact IDs :class:`SpilledIds` holds as strings."""
_BLOOM_BITS: Final = 1 << 24


class SpilledIds(set[str]):
    """``books.fact_ids`` in 16 bytes an ID: the newest :data:`FLUSH` as strings, older ones as their hash and where
    their line starts, in a few sorted columns (merged as they grow, so there are about log2(n / FLUSH) of them).

    ``in`` is exact: a hash found in a column is checked against the facts of its line (a 64-bit hash of another ID
    is rare, but then the answer is still right).  A bitmap of the hashes seen spares most lookups the columns.
    Iterating it (or comparing it) reads the older IDs back from their lines."""

    def __init__(self, fold: FoldCore, lines: _Lines) -> None:
        super().__init__()
        self._fold = fold
        self._lines = lines
        self._newest: list[str] = []
        self._newest_starts = array("q")
        self._columns: list[tuple[array[int], array[int]]] = []
        """(hashes, line starts) pairs, each sorted by hash, the largest first."""
        self._seen = bytearray(_BLOOM_BITS >> 3)

    def add(self, fact_id: str) -> None:
        if set.__contains__(self, fact_id):
            return
        set.add(self, fact_id)
        self._newest.append(fact_id)
        self._newest_starts.append(self._fold.books.length)
        if len(self._newest) >= FLUSH:
            self._flush()

    def __contains__(self, fact_id: object) -> bool:
        if set.__contains__(self, fact_id):
            return True
        hashed = hash(fact_id)
        bit = hashed & (_BLOOM_BITS - 1)
        if not self._seen[bit >> 3] & (1 << (bit & 7)):
            return False
        for hashes, starts in self._columns:
            at = bisect_left(hashes, hashed)
            while at < len(hashes) and hashes[at] == hashed:
                if fact_id in self._lines.facts(starts[at]):
                    return True
                at += 1
        return False

    def __len__(self) -> int:
        return set.__len__(self) + sum(len(hashes) for hashes, _ in self._columns)

    def __iter__(self) -> Iterator[str]:
        for hashes, starts in self._columns:
            before, again = (0, -1), 0  # one line's IDs of equal hash come together, in the order of the line
            for hashed, start in zip(hashes, starts, strict=True):
                again = again + 1 if (hashed, start) == before else 0
                before = (hashed, start)
                found = [fact_id for fact_id in self._lines.facts(start) if hash(fact_id) == hashed]
                if len(found) <= again:
                    raise StorageError(f"the journal changed while it was read: the line at byte {start} lost a fact")
                yield found[again]
        yield from set.__iter__(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (set, frozenset)) and set(iter(self)) == set(iter(other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def _flush(self) -> None:
        seen = self._seen
        pairs = sorted(zip(map(hash, self._newest), self._newest_starts, strict=True))
        for hashed, _ in pairs:
            bit = hashed & (_BLOOM_BITS - 1)
            seen[bit >> 3] |= 1 << (bit & 7)
        column = (array("q", (hashed for hashed, _ in pairs)), array("q", (start for _, start in pairs)))
        del pairs
        set.clear(self)
        self._newest.clear()
        self._newest_starts = array("q")
        columns = self._columns
        columns.append(column)
        while len(columns) > 1 and len(columns[-2][0]) <= 2 * len(columns[-1][0]):
            newer = columns.pop()
            columns[-1] = _merged(columns[-1], newer)


def _merged(one: tuple[array[int], array[int]], two: tuple[array[int], array[int]]) -> tuple[array[int], array[int]]:
    """Two columns sorted by hash as one."""
    hashes, starts = array("q"), array("q")
    (a_hashes, a_starts), (b_hashes, b_starts) = one, two
    i = j = 0
    a_end, b_end = len(a_hashes), len(b_hashes)
    while i < a_end and j < b_end:
        if a_hashes[i] <= b_hashes[j]:
            hashes.append(a_hashes[i])
            starts.append(a_starts[i])
            i += 1
        else:
            hashes.append(b_hashes[j])
            starts.append(b_starts[j])
            j += 1
    hashes.extend(a_hashes[i:])
    starts.extend(a_starts[i:])
    hashes.extend(b_hashes[j:])
    starts.extend(b_starts[j:])
    return hashes, starts


class SpilledEntries(dict[str, AppliedEntry]):
    """``state.entries`` with the older messages in the journal (the module's docstring): an older message entry is
    its position in place of the entry, rebuilt from its line (and the two columns its line does not hold) when asked
    for."""

    def __init__(self, fold: FoldCore, lines: _Lines, recent: int) -> None:
        super().__init__()
        self._fold = fold
        self._lines = lines
        self._recent: deque[AppliedEntry] = deque()
        self._limit = recent
        self._starts = array("q")
        """Where each entry's line starts, by its position."""
        self._transcript_at = array("q")
        """Each entry's ``transcriptIndex``, by its position."""
        self._operations: list[str | None] = []
        """Each entry's ``operationId``, by its position (the strings of the fold's operations, not copies)."""
        self.loaded = False
        self.transcript = SpilledTranscript(self)

    @property
    def elder(self) -> SpilledEntries:
        """What :meth:`SessionState.load <tiny_agent.journal.state.SessionState.load>` calls :meth:`load` on."""
        return self

    def __setitem__(self, key: str, entry: AppliedEntry) -> None:
        state = self._fold.state
        if type(state.activeContext) is list:  # a compaction made it anew: the next messages are counted
            state.activeContext = SpilledContext(self, state.activeContext, len(self))
        if entry.position != len(self._starts):
            raise RuntimeError("entries are added in order, each once")
        dict.__setitem__(self, key, entry)
        self._starts.append(self._fold.books.length)
        self._transcript_at.append(entry.transcriptIndex)
        self._operations.append(entry.operationId)
        if entry.message is not None and not self.loaded:
            recent = self._recent
            recent.append(entry)
            if len(recent) > self._limit:
                older = recent.popleft()
                _put(self, older.id, older.position)

    def __getitem__(self, key: str) -> AppliedEntry:
        return self._whole(key, _at(self, key))

    def get(self, key: str, default: Any = None) -> Any:
        entry = _get(self, key)
        return default if entry is None else self._whole(key, entry)

    def in_journal(self) -> list[str]:
        """The IDs of the entries left in the journal, in order."""
        return [key for key, entry in _items(self) if type(entry) is int]

    def in_order(self, start: int = 0) -> Iterator[AppliedEntry]:
        """The entries from position ``start`` on, each with its message (read back from the journal, not kept)."""
        for key, entry in islice(_items(self), start, None):
            yield self._whole(key, entry)

    def message_keys(self, start: int) -> Iterator[str]:
        """The IDs of the message entries from position ``start`` on, without reading their lines."""
        return (key for key, entry in islice(_items(self), start, None) if type(entry) is int or entry.message is not None)

    def values(self) -> Any:
        return self.in_order()

    def items(self) -> Any:
        return ((entry.id, entry) for entry in self.in_order())

    def load(self) -> None:
        """Put every entry back in place (for a reader that needs the whole state at once)."""
        if self.loaded:
            return
        for key in self.in_journal():
            _put(self, key, self._whole(key, _at(self, key)))
        self.loaded = True
        self._recent.clear()
        self.transcript.fill()
        context = self._fold.state.activeContext
        if isinstance(context, SpilledContext):
            context.fill()

    def _whole(self, key: str, entry: AppliedEntry | int) -> AppliedEntry:
        if type(entry) is not int:
            return entry  # type: ignore[return-value]
        fact = self._lines.fact(self._starts[entry], key)
        body = fact["entry"]
        return AppliedEntry(
            key,
            entry,
            parse_message(body["message"]),
            self._transcript_at[entry],
            self._operations[entry],
            body.get("stepId"),
            body.get("attemptId"),
            body.get("stopReason"),
            fact["timestamp"],
        )


SHARED_LIMIT: Final = 4096
"""How many distinct tool names, replay keys and environments a fold shares (more are kept as they come)."""


class SpilledCalls(dict[str, ToolCallState]):
    """``books.tool_calls`` holding less: a finished run's started calls are left in the journal (each is where its
    ``toolStarted`` line starts, times two, plus one when it was answered), rebuilt from their line when asked for
    and then kept (a result may still answer one); the newest run's share the tool names, replay keys and
    environments of the calls before them when equal.

    A call can start only in the current run, so a call of another operation means the run before finished.  Such
    books hold the fold's calls, but not as its objects: ``capture`` refuses to store them (``spilled``).
    """

    spilled = True

    def __init__(self, fold: FoldCore, lines: _Lines) -> None:
        super().__init__()
        self._fold = fold
        self._lines = lines
        self._strings: dict[str, str] = {}
        self._run: list[tuple[ToolCallState, int]] = []
        """The started calls of the newest run that started one, with where their line starts."""

    def __setitem__(self, key: str, call: ToolCallState) -> None:
        run = self._run
        if run and run[0][0].operationId != call.operationId:
            for finished, start in run:
                _put(self, finished.toolStartedId, start * 2 + (finished.status == "completed"))
            run.clear()
        run.append((call, self._fold.books.length))
        strings = self._strings
        for name in ("toolName", "replayKey", "environmentIdentity"):
            value = getattr(call, name)
            shared = strings.get(value)
            if shared is None:
                if len(strings) < SHARED_LIMIT:
                    strings[value] = value
            elif shared is not value:
                msgspec.structs.force_setattr(call, name, shared)
        dict.__setitem__(self, key, call)

    def __getitem__(self, key: str) -> ToolCallState:
        return self._whole(key, _at(self, key))

    def get(self, key: str, default: Any = None) -> Any:
        call = _get(self, key)
        return default if call is None else self._whole(key, call)

    def in_journal(self) -> list[str]:
        """The IDs of the calls left in the journal, in order."""
        return [key for key, call in _items(self) if type(call) is int]

    def values(self) -> Any:
        return [self._whole(key, call) for key, call in _items(self)]

    def items(self) -> Any:
        return [(key, self._whole(key, call)) for key, call in _items(self)]

    def _whole(self, key: str, call: ToolCallState | int) -> ToolCallState:
        if type(call) is not int:
            return call  # type: ignore[return-value]
        record = self._lines.fact(call >> 1, key)["record"]
        whole = ToolCallState(
            record["operationId"],
            key,
            record["stepId"],
            record["assistantEntryId"],
            record["toolIndex"],
            record["toolCallId"],
            record["toolName"],
            record["arguments"],
            record["replay"],
            record["replayKey"],
            record["environmentIdentity"],
            record["resultEntryId"],
            "completed" if call & 1 else "pending",
        )
        _put(self, key, whole)  # kept: a rule may change it (a late result answers it)
        return whole


def facts_of_line(line: bytes) -> dict[str, dict[str, Any]]:
    """The facts of a committed line by ID, as the fold's reference path reads them.

    The line was folded, so it holds no repeated key: msgspec's values are the profile's, but for the numbers only the
    profile's own parse reads (beyond a double's range)."""
    try:
        value = _decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        value = LineDecoder().decode(line)
    return {str(fact.get("id")): fact for fact in (value if type(value) is list else [value]) if type(fact) is dict}


class SpilledTranscript(list[Message]):
    """``state.transcript``, counted: it holds only the messages since the last user message (what the replay's footer
    reads, newest first), until :meth:`SpilledEntries.load` puts them all in place."""

    def __init__(self, entries: SpilledEntries) -> None:
        super().__init__()
        self._entries = entries
        self._count = 0
        self._since_user: list[Message] = []

    def append(self, message: Message) -> None:
        if self._entries.loaded:
            list.append(self, message)
            return
        self._count += 1
        if type(message) is UserMessage:
            self._since_user = [message]
        else:
            self._since_user.append(message)

    def __len__(self) -> int:
        return list.__len__(self) if self._entries.loaded else self._count

    def __reversed__(self) -> Iterator[Message]:
        if self._entries.loaded:
            return list.__reversed__(self)
        newest = self._since_user
        if len(newest) == self._count or type(newest[0]) is UserMessage:
            return reversed(list(newest))  # a reader stops at the user message (an older one is never asked for)
        return self._reversed_all()

    def _reversed_all(self) -> Iterator[Message]:
        self._entries.load()
        yield from list.__reversed__(self)

    def fill(self) -> None:
        list.__init__(self, (entry.message for entry in dict.values(self._entries) if entry.message is not None))
        self._since_user = []


class SpilledContext(list[Message]):
    """``state.activeContext``, counted: what a compaction put in it held, the messages after that counted; iterated, they
    are read back from the journal in order (:meth:`SpilledEntries.in_order`)."""

    def __init__(self, entries: SpilledEntries, held: list[Message], since: int) -> None:
        super().__init__(held)
        self._entries = entries
        self._since = since
        """The position of the first entry whose message is counted, not held."""
        self._more = 0

    def append(self, message: Message) -> None:
        if self._entries.loaded:
            list.append(self, message)
        else:
            self._more += 1

    def __len__(self) -> int:
        return list.__len__(self) + (0 if self._entries.loaded else self._more)

    def __iter__(self) -> Iterator[Message]:
        if self._entries.loaded:
            return list.__iter__(self)
        later = (entry.message for entry in self._entries.in_order(self._since) if entry.message is not None)
        return chain(list(list.__iter__(self)), later)

    def fill(self) -> None:
        values = islice(dict.values(self._entries), self._since, None)
        list.extend(self, [entry.message for entry in values if entry.message is not None])
        self._more = 0


def _loading(base: type, name: str) -> Any:
    method = getattr(base, name)

    def loading(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._entries.load()
        return method(self, *args, **kwargs)

    return loading


_READERS = ("__getitem__", "__contains__", "__eq__", "__ne__", "__repr__", "copy", "index", "count", "pop", "insert")
for _name in (*_READERS, "__iter__", "__setitem__", "__delitem__", "__add__", "remove", "extend", "sort", "reverse"):
    setattr(SpilledTranscript, _name, _loading(list, _name))
for _name in (*_READERS, "__reversed__", "__setitem__", "__delitem__", "__add__", "remove", "extend", "sort", "reverse"):
    setattr(SpilledContext, _name, _loading(list, _name))
