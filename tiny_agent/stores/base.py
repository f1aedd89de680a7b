"""The store seam: the :class:`Store` protocol every command uses, how a session is named, and how a store is chosen
(by URL scheme in :data:`STORES`: no store is imported until chosen; docs/service.md, *Choosing the store*)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from tiny_agent.errors import ConfigError, NotFound, UsageError

if TYPE_CHECKING:
    from tiny_agent.fold.fold import Fold
    from tiny_agent.stores.journal import Durability, JournalWriter
    from tiny_agent.stores.listing import Listed, ReportEntry

STORE_ENV: Final = "TINY_AGENT_STORE"
HANDLE_MIN: Final = 4
HANDLE_MAX: Final = 8

STORES: Final[dict[str, tuple[str, str]]] = {
    "file": ("tiny_agent.stores.files.store:FileStore", ""),
    "postgresql": ("tiny_agent.stores.postgres.store:PgStore", "postgres"),
    "postgres": ("tiny_agent.stores.postgres.store:PgStore", "postgres"),
}
"""URL scheme -> (the store's class, the extra that installs what it needs): a location without ``://`` is ``file``.
A table rather than stores registering themselves on import: nothing has to be imported to be found."""

ProgressCallback = Callable[[int, int], None]
Note = Callable[[str], None]
"""Says in one line why a checkpoint was not used (a checkpoint is a cache, never an error)."""


class SessionNotFound(NotFound):
    """Nothing in the store (or on disk) answers to the name given."""


class AmbiguousSession(UsageError):
    """A name that fits more than one session."""


class Session(msgspec.Struct, frozen=True):
    """A session as a store knows it."""

    id: str
    name: str
    """How messages name it: the journal's path (file store), or the store's reference."""
    path: Path | None = None
    """The journal file, for the file store (and a journal named by its path in any store)."""


class Store(Protocol):
    """Where sessions live.  A session named by a journal path is that file whatever the store."""

    label: str
    """Where, for messages: a directory, or a database URL without its credentials."""

    def create(
        self, *, cwd: str, provider: str, model: str, environment_identity: str, durability: Durability
    ) -> JournalWriter: ...

    def resolve(self, reference: str) -> Session: ...

    def open_writer(self, session: Session, durability: Durability, note: Note | None = None) -> JournalWriter:
        """The session's one writer, folded under its lock (from its checkpoint when given a ``note``); refuses another
        session's header."""
        ...

    def fold(self, session: Session, note: Note, *, lean: bool = False) -> Fold:
        """The session folded, from its checkpoint when one checks out (``lean``, for a reader that streams the
        transcript: its older part left there, :meth:`~tiny_agent.stores.checkpoints.Checkpoints.fold`; a journal file
        with no checkpoint to read or write, or a long one with none usable, keeps its messages,
        :func:`~tiny_agent.stores.journal.fold_spilled`)."""
        ...

    def resumed(self, session: Session, note: Note) -> Fold | None:
        """The checked fold of the session's checkpoint, for a reader of every line (audit); None without one."""
        ...

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        """A new session holding exactly ``lines`` (header first, no LFs), all or nothing; FileExistsError if it is there
        (``label`` names the failpoint ``before-link:<label>``)."""
        ...

    def chunks(self, session: Session) -> Iterator[bytes]: ...

    def size(self, session: Session) -> int: ...

    def known_length(self, session: Session) -> int | None:
        """The length the store's index last saw (``verify`` notices lines cut off since); None if unknown."""
        ...

    def holder(self, session: Session) -> str | None:
        """Who writes the session now, in words (``pid 123``); None when nobody does."""
        ...

    def handle(self, session_id: str) -> str: ...

    def sessions(self) -> list[Session]:
        """Every session, newest first."""
        ...

    def listing(
        self, *, cwd: str | None = None, limit: int | None = None, progress: ProgressCallback | None = None
    ) -> list[Listed]:
        """``tiny-agent sessions``: newest first, only those made in ``cwd`` when given."""
        ...

    def report_entries(self, cwd: str | None = None, progress: ProgressCallback | None = None) -> list[ReportEntry]: ...

    def close(self) -> None: ...


class StoreClass(Protocol):
    def from_location(self, location: str, sessions_dir_flag: str | None) -> Store: ...


def choose_store(sessions_dir_flag: str | None, store_flag: str | None = None) -> Store:
    """The store the command line names: ``--store``, else ``$TINY_AGENT_STORE``, else the sessions directory."""
    if store_flag and sessions_dir_flag:
        raise UsageError("--store and --sessions-dir both say where sessions live; give one")
    chosen = store_flag or ("" if sessions_dir_flag else os.environ.get(STORE_ENV, ""))
    scheme = chosen.split("://", 1)[0] if "://" in chosen else "file"
    if scheme not in STORES:
        raise ConfigError(f"{scheme}://…: not a store; give a postgresql:// URL or a directory")
    target, extra = STORES[scheme]
    module, _, name = target.partition(":")
    try:
        found: StoreClass = getattr(importlib.import_module(module), name)
    except ImportError as error:
        if not extra or (error.name or "").startswith("tiny_agent"):
            raise
        raise ConfigError(
            f"a {scheme}:// store needs {error.name}, which is not installed: pip install 'tiny-agent[{extra}]'"
        ) from None
    return found.from_location(chosen, sessions_dir_flag)


def is_journal_path(reference: str) -> bool:
    """Does the command line name a file (``….jsonl``, or anything with a separator) rather than a session?"""
    return reference.endswith(".jsonl") or os.sep in reference


def named(reference: str, label: str, candidates: Callable[[], Iterable[str]], cap: int | None = None) -> str:
    """The one id of ``candidates()`` that ``reference`` names: the id itself, else the one whose handle (lower-case hex
    only) or id it begins; SessionNotFound or AmbiguousSession otherwise (``cap``: the most ``candidates`` gives)."""
    if not reference or reference.strip("0123456789abcdef-") or reference.startswith("-"):
        raise SessionNotFound(f"{reference!r} is neither a journal path, a session id nor a handle")
    ids = list(candidates())
    if reference in ids:
        return reference
    matches = [session_id for session_id in ids if "-" not in reference and tail_of(session_id).startswith(reference)]
    matches += [session_id for session_id in ids if session_id.startswith(reference) and session_id not in matches]
    if not matches:
        raise SessionNotFound(f"no session {reference!r} in {label}")
    if len(matches) == 1:
        return matches[0]
    more = cap is not None and len(matches) >= cap
    handles = shortest_handles(matches, minimum=len(reference) + 1)
    shown = ", ".join(handles[session_id] for session_id in matches[:4])
    count, rest = len(matches), len(matches) - 4
    fits = f"{count} and more" if more else f"{count}"
    shown += f" and {rest} more" if rest > 0 and not more else ""
    raise AmbiguousSession(f"{reference!r} fits {fits} sessions ({shown}); give more of it")


def tail_of(session_id: str) -> str:
    """The random last group of a UUIDv7 (the part handles are made of)."""
    return session_id.rsplit("-", 1)[-1]


def shortest_handles(session_ids: list[str], minimum: int = HANDLE_MIN) -> dict[str, str]:
    """Git-style shortest unique prefixes of the ids' tails, at least ``minimum`` and at most 8 digits (sorted, each tail
    is next to those it shares the longest prefix with)."""
    tails = sorted((tail_of(session_id), session_id) for session_id in session_ids)
    handles: dict[str, str] = {}
    for position, (tail, session_id) in enumerate(tails):
        before = tails[position - 1][0] if position > 0 else None
        after = tails[position + 1][0] if position + 1 < len(tails) else None
        handles[session_id] = tail[: handle_length(tail, before, after, minimum)]
    return handles


def handle_length(tail: str, before: str | None, after: str | None, minimum: int = HANDLE_MIN) -> int:
    """How much of ``tail`` tells it from its neighbours in tail order."""
    shared = max(len(os.path.commonprefix([tail, neighbour or ""])) for neighbour in (before, after))
    return min(max(minimum, shared + 1), HANDLE_MAX)
