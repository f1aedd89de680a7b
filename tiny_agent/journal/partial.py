"""A lean restore's containers: the newer part of a fold's state and books in memory, the older part on disk.

Pure.  A lean restore (:func:`tiny_agent.fold.snapshot.restore`) fills the
state's ``entries`` and ``transcript`` and the books' ID sets and indexes with
what came after the active context began (and the current operation); the
older part stays in the checkpoint.  Each container still answers exactly:
its length counts the older part, a key that may be older (:meth:`Elder.maybe`,
a sorted index of 64 bits of every older ID, never a false "no") and every
iteration, encoding or comparison first calls :meth:`Elder.load`, which puts
the older part back in place (dicts keep their order).  So every rule and
reader sees what a full restore gives; what writing the next turn does never
needs the older part, and does not read it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any, Protocol, cast

from tiny_agent.errors import StorageError


def id_key(value: str) -> int | None:
    """64 bits of an ID (a UUID's random tail) for the index; None for a string that is no UUID."""
    try:
        return int(value[19:23] + value[24:36], 16) if len(value) == 36 else None
    except ValueError:
        return None


def id_index(ids: Iterable[str]) -> bytes:
    """The sorted keys of ``ids`` (:func:`id_key`), as :class:`Elder` takes them; an ID that is no UUID is keyed -1."""
    keys = {id_key(value) for value in ids}
    return array("q", sorted(-1 if key is None else key >> 1 for key in keys)).tobytes()


def in_memory(entries: dict[str, Any]) -> Iterable[Any]:
    """A dict's values without reading back an older part: all of a plain dict's; of a lean state's ``entries``,
    the newer part, which holds the entry of every transcript message in the active context."""
    return dict.values(entries)


def entries_in_order(entries: dict[str, Any]) -> Iterator[Any]:
    """Every entry in order, without putting a lean state's older part in place: those are read from the checkpoint a
    frame at a time (:meth:`Elder.stream`) and let go once the caller drops them, so a reader of the whole transcript
    holds one frame of it, not all of it (``replay``; docs/performance.md, "Replay streams").  Entries that hand out
    their own order (a fold whose messages stay in the journal, :mod:`tiny_agent.fold.spilled`) are read so."""
    in_order = getattr(entries, "in_order", None)
    if in_order is not None:
        return iter(in_order())
    elder = getattr(entries, "elder", None)
    if not isinstance(elder, Elder) or elder.loaded or elder.streamed is None:
        return iter(entries.values())
    return chain(elder.stream(), list(dict.values(entries)))


class Part(Protocol):
    def prepend(self, older: list[Any]) -> None: ...


class Elder:
    """The older part of a lean-restored fold: its count in each container, an index of its IDs, and how to read it back."""

    def __init__(
        self,
        load: Callable[[], dict[str, list[Any]]],
        index: bytes,
        counts: dict[str, int],
        streamed: Callable[[], Iterator[Any]] | None = None,
    ) -> None:
        self._load: Callable[[], dict[str, list[Any]]] | None = load
        self._index = array("q")
        self._index.frombytes(index)
        self.counts = counts
        self._parts: dict[str, Part] = {}
        self.streamed = streamed
        """The older entries in order, read one frame at a time (None: only :meth:`load` can read them)."""

    @property
    def loaded(self) -> bool:
        return self._load is None

    def count(self, name: str) -> int:
        return 0 if self._load is None else self.counts.get(name, 0)

    def maybe(self, key: object) -> bool:
        """Whether ``key`` may be in the older part (a UUID, or a pair led by one); False only when it is not."""
        if self._load is None:
            return False
        if type(key) is tuple and key:
            key = key[0]
        found = id_key(key) if type(key) is str else None
        value = -1 if found is None else found >> 1
        at = bisect_left(self._index, value)
        return at < len(self._index) and self._index[at] == value

    def stream(self) -> Iterator[Any]:
        """The older entries in order, none put in place; raises StorageError if they are not those counted."""
        if self.streamed is None:
            raise StorageError("the checkpoint's older part cannot be streamed")
        count = 0
        for entry in self.streamed():
            count += 1
            yield entry
        if count != self.counts.get("entries", 0):
            raise StorageError("the checkpoint's older part, read back, is not the one it counted")

    def adopt(self, name: str, part: Part) -> None:
        self._parts[name] = part

    def load(self) -> None:
        """Put the older part back into every container, in place; raises StorageError if what is read back is not it."""
        if self._load is None:
            return
        older = self._load()
        if any(len(older.get(name, ())) != self.counts.get(name, 0) for name in self._parts):
            raise StorageError("the checkpoint's older part, read back, is not the one it counted")
        self._load = None
        for name, part in self._parts.items():
            part.prepend(older[name])


class _Part:
    """What a partial dict and a partial set share: the older part counted, and loaded for a key that may be in it."""

    _base: Any

    def __init__(self, elder: Elder, name: str, newer: Iterable[Any]) -> None:
        self._base.__init__(self, newer)
        self.elder = elder
        self._name = name
        elder.adopt(name, cast(Part, self))

    def __len__(self) -> int:
        return int(self._base.__len__(self)) + self.elder.count(self._name)

    def __contains__(self, key: object) -> bool:
        if self._base.__contains__(self, key):
            return True
        if self.elder.maybe(key):
            self.elder.load()
            return bool(self._base.__contains__(self, key))
        return False


class PartialDict(_Part, dict[Any, Any]):
    """A dict whose older items are on disk until the first lookup that may need them."""

    _base = dict

    def prepend(self, older: list[Any]) -> None:
        newer = list(dict.items(self))
        dict.clear(self)
        dict.update(self, older)
        dict.update(self, newer)

    def __getitem__(self, key: Any) -> Any:
        if not dict.__contains__(self, key) and self.elder.maybe(key):
            self.elder.load()
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if not dict.__contains__(self, key) and self.elder.maybe(key):
            self.elder.load()
        return dict.get(self, key, default)


class PartialSet(_Part, set[Any]):
    """A set whose older members are on disk until the first test that may need them."""

    _base = set

    def prepend(self, older: list[Any]) -> None:
        set.update(self, older)


class PartialTranscript(list[Any]):
    """The transcript with its older messages on disk: the newer ones at their own indexes, the rest on demand."""

    def __init__(self, elder: Elder, newer: Iterable[Any]) -> None:
        super().__init__(newer)
        self.elder = elder
        elder.adopt("transcript", self)

    def prepend(self, older: list[Any]) -> None:
        list.__setitem__(self, slice(0, 0), older)

    def __len__(self) -> int:
        return list.__len__(self) + self.elder.count("transcript")

    def __getitem__(self, key: Any) -> Any:
        older = self.elder.count("transcript")
        if older:
            if type(key) is int:
                at = key + len(self) if key < 0 else key
                if at >= older:
                    return list.__getitem__(self, at - older)
            elif type(key) is slice:
                start, stop, step = key.indices(len(self))
                if step == 1 and start >= older:
                    return list.__getitem__(self, slice(start - older, max(stop - older, 0)))
            self.elder.load()
        return list.__getitem__(self, key)

    def __reversed__(self) -> Iterator[Any]:
        newer = list(list.__iter__(self))
        yield from reversed(newer)
        if not self.elder.loaded:
            self.elder.load()
            yield from reversed(list.__getitem__(self, slice(0, list.__len__(self) - len(newer))))


def _loading(base: type, name: str) -> Any:
    method = getattr(base, name)

    def loading(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.elder.load()
        return method(self, *args, **kwargs)

    return loading


_READERS = ("__iter__", "__eq__", "__ne__", "__repr__", "copy", "pop")
for _name in (*_READERS, "__reversed__", "__delitem__", "keys", "values", "items", "popitem", "setdefault"):
    setattr(PartialDict, _name, _loading(dict, _name))
for _name in (*_READERS, "__le__", "__lt__", "__ge__", "__gt__", "__and__", "__or__", "__sub__", "__xor__", "remove"):
    setattr(PartialSet, _name, _loading(set, _name))
for _name in ("discard", "difference", "union", "intersection", "issubset", "issuperset", "isdisjoint"):
    setattr(PartialSet, _name, _loading(set, _name))
for _name in (*_READERS, "__contains__", "__setitem__", "__delitem__", "__add__", "index", "count", "insert", "remove"):
    setattr(PartialTranscript, _name, _loading(list, _name))
for _name in ("sort", "reverse"):
    setattr(PartialTranscript, _name, _loading(list, _name))
