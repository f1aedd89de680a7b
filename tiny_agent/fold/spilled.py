"""A fold that leaves its messages in the journal, for a reader of the whole transcript with no checkpoint to read it
from (``replay``; docs/performance.md, "Replay streams the older transcript").  Pure: the journal's lines come from a
:data:`LineAt` the caller gives.

:func:`spill` puts three containers in a fold's state once its header is applied; the fold's rules are unchanged and
go on over them.  ``entries`` keeps every :class:`~tiny_agent.journal.state.AppliedEntry` and where its line starts,
but a message only while it is among the newest :data:`RECENT`: an older entry's message is ``GONE`` in place, and
a lookup (``[]``, ``get``) hands out a copy with the message read back from its line (each rule sees exactly
what a whole fold holds).  ``transcript`` and ``activeContext`` count what is appended without holding it (the
context holds what a compaction put in it).  Printing reads them in order, one line at a time
(:meth:`SpilledEntries.in_order`, :func:`~tiny_agent.journal.partial.entries_in_order`), never putting them back;
any other reader (an encoding of the whole state, an index into the transcript) first puts every message back in
place (:meth:`SpilledEntries.load`), so it sees what a whole fold gives.  The books' started calls hold less too
(:class:`SpilledCalls`), which no rule notices; such a fold is never stored as a snapshot.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterator
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


class _Gone:
    """The message of an entry that is not held: it is in the journal, on its line."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "GONE"


GONE: Final = _Gone()


def spill(fold: FoldCore, line_at: LineAt, recent: int | None = None) -> SpilledEntries:
    """Make a fold whose header is applied (and nothing more) hold its messages only while they are recent."""
    state = fold.state
    if state.entries or state.transcript or state.activeContext:
        raise RuntimeError("only a fold with no entry yet can spill its messages")
    entries = SpilledEntries(fold, line_at, RECENT if recent is None else recent)
    if fold.books.tool_calls:
        raise RuntimeError("only a fold with no started call yet can spill its messages")
    fold.books.tool_calls = SpilledCalls()
    state.entries = entries
    state.transcript = entries.transcript
    state.activeContext = SpilledContext(entries, [], 0)
    return entries


class SpilledEntries(dict[str, AppliedEntry]):
    """``state.entries`` with the older messages in the journal (the module's docstring)."""

    def __init__(self, fold: FoldCore, line_at: LineAt, recent: int) -> None:
        super().__init__()
        self._fold = fold
        self._line_at = line_at
        self._recent: deque[AppliedEntry] = deque()
        self._limit = recent
        self._starts = array("q")
        """Where each entry's line starts, by its position."""
        self._decoded: tuple[int, dict[str, Message]] = (-1, {})
        """The last line read back: its start and its messages by entry ID."""
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
        if entry.message is not None and not self.loaded:
            recent = self._recent
            recent.append(entry)
            if len(recent) > self._limit:
                msgspec.structs.force_setattr(recent.popleft(), "message", GONE)

    def __getitem__(self, key: str) -> AppliedEntry:
        return self._whole(dict.__getitem__(self, key))

    def get(self, key: str, default: Any = None) -> Any:
        entry = dict.get(self, key)
        return default if entry is None else self._whole(entry)

    def in_order(self, start: int = 0) -> Iterator[AppliedEntry]:
        """The entries from position ``start`` on, each with its message (read back from the journal, not kept)."""
        for entry in islice(dict.values(self), start, None):
            yield self._whole(entry)

    def load(self) -> None:
        """Put every message back in place (for a reader that needs the whole state at once)."""
        if self.loaded:
            return
        for entry in dict.values(self):
            if _gone(entry.message):
                msgspec.structs.force_setattr(entry, "message", self._message(entry))
        self.loaded = True
        self._recent.clear()
        self.transcript.fill()
        context = self._fold.state.activeContext
        if isinstance(context, SpilledContext):
            context.fill()

    def _whole(self, entry: AppliedEntry) -> AppliedEntry:
        if not _gone(entry.message):
            return entry
        return msgspec.structs.replace(entry, message=self._message(entry))

    def _message(self, entry: AppliedEntry) -> Message:
        start = self._starts[entry.position]
        decoded_at, messages = self._decoded
        if decoded_at != start:
            try:
                messages = messages_of(self._line_at(start))
            except (ProfileViolation, Fault):
                messages = {}
            self._decoded = (start, messages)
        message = messages.get(entry.id)
        if message is None:
            changed = f"the line at byte {start} no longer holds entry {entry.id}"
            raise StorageError(f"the journal changed while it was read: {changed}")
        return message


NO_ARGUMENTS: Final[dict[str, Any]] = {}
"""What a finished run's started calls hold instead of their arguments (never changed: nothing writes to them)."""
SHARED_LIMIT: Final = 4096
"""How many distinct tool names, replay keys and environments a fold shares (more are kept as they come)."""


class SpilledCalls(dict[str, ToolCallState]):
    """``books.tool_calls`` holding less: the tool name, replay key and environment of each started call are the
    strings of the calls before it when equal, and a finished run's calls no longer hold their ``arguments``.

    No rule reads a started call's arguments once it is recorded (they are state only in the current run's
    ``operation.toolCalls``, and a call is started in the current run only, so a call of another operation means the
    run before finished).  A snapshot of such books would not be the fold's: ``capture`` refuses it (``spilled``).
    """

    spilled = True

    def __init__(self) -> None:
        super().__init__()
        self._strings: dict[str, str] = {}
        self._run: list[ToolCallState] = []
        """The started calls of the newest run that started one."""

    def __setitem__(self, key: str, call: ToolCallState) -> None:
        run = self._run
        if run and run[0].operationId != call.operationId:
            for finished in run:
                msgspec.structs.force_setattr(finished, "arguments", NO_ARGUMENTS)
            run.clear()
        run.append(call)
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


def _gone(message: object) -> bool:
    return message is GONE


def messages_of(line: bytes) -> dict[str, Message]:
    """The messages of a committed line's message entries, by entry ID, as the fold's reference path reads them.

    The line was folded, so it holds no repeated key: msgspec's values are the profile's, but for the numbers only the
    profile's own parse reads (beyond a double's range)."""
    try:
        value = _decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        value = LineDecoder().decode(line)
    found: dict[str, Message] = {}
    for fact in value if type(value) is list else [value]:
        entry = fact.get("entry") if type(fact) is dict and fact.get("kind") == "entry" else None
        if type(entry) is dict and entry.get("type") == "message":
            found[str(fact.get("id"))] = parse_message(entry.get("message"))
    return found


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
