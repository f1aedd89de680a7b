"""Where sessions live: the store seam, and the file store (the embedded default).

A :class:`Store` creates sessions, finds them by the names people type, opens
one for appending with the single-writer guarantee, streams a journal's
bytes, and lists sessions from an index.  The journal format, the fold and
the planner do not know which store holds a session.

The file store keeps each session as ``<UTC time>_<session id>.jsonl`` in a
private (0700) directory, journals 0600.  The directory is, in order: the
``--sessions-dir`` flag, ``$TINY_AGENT_SESSIONS_DIR``, or the per-user data
directory (``$XDG_DATA_HOME/tiny-agent/sessions``, by default
``~/.local/share/tiny-agent/sessions``).

A session is named on the command line by a path, by its id, by a unique
prefix of its id, or by its **handle**: the shortest unique prefix (4 to 8
hex digits) of the id's last group, which is random where the id's first
groups are time-ordered and shared by sessions created close together.
Names never leave the directory (no separators, no ``..``) and symbolic links
are never followed into it.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import msgspec

from tiny_agent.errors import ConfigError, NotFound, UsageError
from tiny_agent.journal.ids import now_ms, uuid7
from tiny_agent.stores import files as filestore
from tiny_agent.stores.files import Durability

if TYPE_CHECKING:
    # The journal (and with it the whole fold) is imported where a writer is made: listing
    # sessions from a warm index, the commonest command, needs neither.
    from tiny_agent.fold.fold import Fold
    from tiny_agent.journal.facts import HeaderLine
    from tiny_agent.stores.catalog import Listed, ReportEntry
    from tiny_agent.stores.journal import JournalWriter

SESSIONS_DIR_ENV: Final = "TINY_AGENT_SESSIONS_DIR"
STORE_ENV: Final = "TINY_AGENT_STORE"
JOURNAL_SUFFIX: Final = ".jsonl"
HANDLE_MIN: Final = 4
HANDLE_MAX: Final = 8

ProgressCallback = Callable[[int, int], None]

_JOURNAL_NAME = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)_(?P<id>[0-9a-f-]{36})\.jsonl")
_SESSION_REF = re.compile(r"[0-9a-f][0-9a-f-]*")
_HEX = re.compile(r"[0-9a-f]+")


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
    """The journal file, for the file store."""


class Store(Protocol):
    """What every command needs from where sessions live (:class:`FileStore`, :class:`tiny_agent.stores.postgres.store.PgStore`).

    A session named by a journal path is that file whatever the store: every
    store reads and writes it as the file store would.
    """

    label: str
    """Where, for messages: a directory, or a database URL without its credentials."""

    def create(
        self, *, cwd: str, provider: str, model: str, environment_identity: str, durability: Durability
    ) -> JournalWriter: ...

    def resolve(self, reference: str) -> Session: ...

    def open_writer(
        self, session: Session, durability: Durability, folder: Callable[[Path], Fold] | None = None
    ) -> JournalWriter:
        """The session's one writer; refuses a journal whose header is another session's (session-v2 §16).

        ``folder`` folds a journal file (from its checkpoint); other stores fold their own way.
        """
        ...

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        """A new session whose journal is exactly ``lines`` (each without its LF, the header first): all of it, or nothing.

        For ``upgrade``, ``fork`` and ``import``, which build a whole journal
        before it may be seen (``label`` names the failpoint ``before-link:<label>``).
        Raises FileExistsError if the session is there already.
        """
        ...

    def chunks(self, session: Session) -> Iterator[bytes]: ...

    def size(self, session: Session) -> int:
        """The journal's length in bytes."""
        ...

    def known_length(self, session: Session) -> int | None:
        """The length the store's index last saw (``verify`` notices lines cut off since); None if unknown."""
        ...

    def holder(self, session: Session) -> str | None:
        """Who writes the session now, in words (``pid 123``); None when nobody does."""
        ...

    def handle(self, session_id: str) -> str:
        """The session's shortest unique handle in this store."""
        ...

    def sessions(self) -> list[Session]:
        """Every session, newest first."""
        ...

    def listing(
        self, *, cwd: str | None = None, limit: int | None = None, progress: ProgressCallback | None = None
    ) -> list[Listed]:
        """``tiny-agent sessions``: newest first, only those made in ``cwd`` when given."""
        ...

    def report_entries(self, cwd: str | None = None, progress: ProgressCallback | None = None) -> list[ReportEntry]:
        """``tiny-agent report``: every session's summary with its usage buckets, newest first."""
        ...

    def close(self) -> None: ...


# -- the file store ----------------------------------------------------------------------


def default_sessions_dir() -> Path:
    """The per-user data directory's ``tiny-agent/sessions``."""
    data_home = os.environ.get("XDG_DATA_HOME") or ""
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "tiny-agent" / "sessions"


def sessions_dir(flag: str | None) -> Path:
    """The sessions directory: the flag, else $TINY_AGENT_SESSIONS_DIR, else the per-user default."""
    if flag:
        return Path(flag)
    configured = os.environ.get(SESSIONS_DIR_ENV)
    return Path(configured) if configured else default_sessions_dir()


def ensure_private_directory(directory: Path) -> None:
    """Create the directory 0700 if needed; tighten an existing one we own to 0700."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise NotADirectoryError(f"{directory}: sessions directory is a symbolic link")
    if info.st_mode & 0o077 and info.st_uid == os.getuid():
        os.chmod(directory, 0o700)


def journal_name(session_id: str, created_ms: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(created_ms / 1000))
    return f"{stamp}_{session_id}{JOURNAL_SUFFIX}"


def session_id_of(path: Path) -> str | None:
    match = _JOURNAL_NAME.fullmatch(path.name)
    return match.group("id") if match else None


def list_journals(directory: Path) -> list[Path]:
    """Journals directly in ``directory``, newest first; symbolic links and non-files are skipped."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [Path(entry.path) for entry in entries if _JOURNAL_NAME.fullmatch(entry.name) and _is_plain_file(entry)]
    found.sort(key=lambda path: path.name, reverse=True)
    return found


def _is_plain_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def new_header(*, cwd: str, provider: str, model: str, environment_identity: str) -> HeaderLine:
    """The header line of a session made now, in this writer's version, under a new time-ordered id."""
    from tiny_agent.journal.facts import HeaderLine
    from tiny_agent.stores.journal import WRITER_VERSION

    created = now_ms()
    return HeaderLine(
        version=WRITER_VERSION,
        id=uuid7(created),
        createdAt=created,
        cwd=cwd,
        provider=provider,
        model=model,
        environmentIdentity=environment_identity,
    )


class FileStore:
    """Sessions as journal files in one private directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.label = str(directory)

    def create(
        self,
        *,
        cwd: str,
        provider: str,
        model: str,
        environment_identity: str,
        durability: Durability = "fsync",
    ) -> JournalWriter:
        """A new journal (its directory made private), named by its creation time and id, its lock held."""
        from tiny_agent.stores.journal import JournalWriter

        ensure_private_directory(self.directory)
        header = new_header(cwd=cwd, provider=provider, model=model, environment_identity=environment_identity)
        path = self.directory / journal_name(header.id, header.createdAt)
        return JournalWriter.create(path, header, durability=durability)

    def resolve(self, reference: str) -> Session:
        return _file_session(resolve_session(reference, self.directory))

    def open_writer(
        self, session: Session, durability: Durability, folder: Callable[[Path], Fold] | None = None
    ) -> JournalWriter:
        return file_writer(_path_of(session), durability, folder)

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        ensure_private_directory(self.directory)
        path = self.directory / journal_name(session_id, created)
        filestore.publish_file(path, (line + b"\n" for line in lines), durability, label)
        return _file_session(path)

    def chunks(self, session: Session) -> Iterator[bytes]:
        return filestore.file_chunks(_path_of(session))

    def size(self, session: Session) -> int:
        return _path_of(session).stat().st_size

    def known_length(self, session: Session) -> int | None:
        from tiny_agent.stores.catalog import known_lengths

        path = _path_of(session)
        return known_lengths(path.parent).get(path.name)

    def holder(self, session: Session) -> str | None:
        return file_holder(_path_of(session))

    def handle(self, session_id: str) -> str:
        return self.handles().get(session_id, tail_of(session_id)[:HANDLE_MAX])

    def sessions(self) -> list[Session]:
        return [_file_session(path) for path in list_journals(self.directory)]

    def handles(self) -> dict[str, str]:
        """Each session id's handle in this store."""
        ids = [session_id_of(path) for path in list_journals(self.directory)]
        return shortest_handles([session_id for session_id in ids if session_id])

    def listing(
        self, *, cwd: str | None = None, limit: int | None = None, progress: ProgressCallback | None = None
    ) -> list[Listed]:
        from tiny_agent.stores.catalog import list_sessions

        return list_sessions(self.directory, limit, progress=progress, cwd=cwd)

    def report_entries(self, cwd: str | None = None, progress: ProgressCallback | None = None) -> list[ReportEntry]:
        from tiny_agent.stores.catalog import report_entries

        return report_entries(self.directory, cwd=cwd, progress=progress)

    def close(self) -> None:
        """Nothing is held between calls."""


def file_session(reference: str | Path) -> Session:
    """The journal file a path names (it must be a file)."""
    path = Path(reference)
    if not path.is_file():
        raise SessionNotFound(f"{reference}: no such journal file")
    return _file_session(path)


def is_journal_path(reference: str) -> bool:
    """Does the command line name a file (``….jsonl``, or anything with a separator) rather than a session?"""
    return reference.endswith(JOURNAL_SUFFIX) or os.sep in reference


def file_writer(path: Path, durability: Durability, folder: Callable[[Path], Fold] | None = None) -> JournalWriter:
    """A journal file's writer (the file named after its session must hold that session's header)."""
    from tiny_agent.stores.journal import JournalWriter

    return JournalWriter.open(path, durability=durability, session_id=session_id_of(path), folder=folder)


def file_holder(path: Path) -> str | None:
    """``pid N`` while a writer holds the journal (empty if its lock file names none); None when nobody does."""
    if not filestore.is_locked(path):
        return None
    pid = filestore.holder_pid(path)
    return f"pid {pid}" if pid else ""


def _file_session(path: Path) -> Session:
    return Session(id=session_id_of(path) or path.stem, name=str(path), path=path)


def _path_of(session: Session) -> Path:
    if session.path is None:
        raise ValueError(f"{session.name} is not a journal file")
    return session.path


# -- handles --------------------------------------------------------------------------------


def tail_of(session_id: str) -> str:
    """The random last group of a UUIDv7 (the part handles are made of)."""
    return session_id.rsplit("-", 1)[-1]


def shortest_handles(session_ids: list[str], minimum: int = HANDLE_MIN) -> dict[str, str]:
    """Git-style shortest unique prefixes of the ids' tails, at least ``minimum`` and at most 8 digits.

    Sorting the tails puts each one next to the tails it shares the longest
    prefix with, so one pass over neighbours finds every handle.  Two tails
    alike in all 8 digits (one pair in ~65,000 sessions) both get 8; naming
    either then asks for more of the id.
    """
    tails = sorted((tail_of(session_id), session_id) for session_id in session_ids)
    handles: dict[str, str] = {}
    for position, (tail, session_id) in enumerate(tails):
        shared = 0
        for neighbour in (position - 1, position + 1):
            if 0 <= neighbour < len(tails):
                shared = max(shared, _common_prefix(tail, tails[neighbour][0]))
        length = min(max(minimum, shared + 1), HANDLE_MAX)
        handles[session_id] = tail[:length]
    return handles


def _common_prefix(left: str, right: str) -> int:
    size = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        size += 1
    return size


def resolve_session(reference: str, directory: Path) -> Path:
    """A journal path for a path, a session id, a handle, or a unique prefix of an id."""
    if is_journal_path(reference):
        candidate = Path(reference)
        if candidate.is_file():
            return candidate
        raise SessionNotFound(f"{reference}: no such journal file")
    if not _SESSION_REF.fullmatch(reference):
        raise SessionNotFound(f"{reference!r} is neither a journal path, a session id nor a handle")
    journals = list_journals(directory)
    by_id = {session_id_of(path) or "": path for path in journals}
    exact = by_id.get(reference)
    if exact is not None:
        return exact
    is_hex = _HEX.fullmatch(reference) is not None
    by_handle = [path for session_id, path in by_id.items() if is_hex and tail_of(session_id).startswith(reference)]
    by_prefix = [path for session_id, path in by_id.items() if session_id.startswith(reference)]
    matches = list(dict.fromkeys([*by_handle, *by_prefix]))
    if not matches:
        raise SessionNotFound(f"no session {reference!r} in {directory}")
    if len(matches) > 1:
        raise AmbiguousSession(_ambiguity(reference, matches))
    return matches[0]


def _ambiguity(reference: str, matches: list[Path]) -> str:
    handles = shortest_handles([session_id_of(path) or "" for path in matches], minimum=len(reference) + 1)
    shown = ", ".join(handles.get(session_id_of(path) or "", path.name) for path in matches[:4])
    more = "" if len(matches) <= 4 else f" and {len(matches) - 4} more"
    return f"{reference!r} fits {len(matches)} sessions ({shown}{more}); give more of it"


def open_store(sessions_dir_flag: str | None) -> FileStore:
    """The file store in the sessions directory the command line names."""
    return FileStore(sessions_dir(sessions_dir_flag))


def choose_store(sessions_dir_flag: str | None, store_flag: str | None = None) -> Store:
    """The store the command line names: ``--store``, else ``$TINY_AGENT_STORE``, else the sessions directory.

    A store is a ``postgresql://`` (or ``postgres://``) URL, or a directory
    (a path, or ``file:`` and a path).  ``--sessions-dir`` names a directory
    and cannot be given with ``--store``.
    """
    if store_flag and sessions_dir_flag:
        raise UsageError("--store and --sessions-dir both say where sessions live; give one")
    chosen = store_flag or ("" if sessions_dir_flag else os.environ.get(STORE_ENV, ""))
    if not chosen:
        return FileStore(sessions_dir(sessions_dir_flag))
    if chosen.startswith(("postgresql://", "postgres://")):
        return _postgres(chosen)
    if "://" in chosen:
        raise ConfigError(f"{_scheme(chosen)}: not a store; give a postgresql:// URL or a directory")
    directory = chosen.removeprefix("file:")
    if not directory:
        raise ConfigError("file: names no directory")
    return FileStore(Path(directory).expanduser())


def _scheme(url: str) -> str:
    return url.split("://", 1)[0] + "://…"


def _postgres(url: str) -> Store:
    """The PostgreSQL store, importing psycopg only now (no other command pays for it)."""
    try:
        from tiny_agent.stores.postgres.store import PgStore
    except ImportError as error:
        if error.name is not None and not error.name.startswith("psycopg"):
            raise
        raise ConfigError(
            "a postgresql:// store needs the PostgreSQL driver, which is not installed: pip install 'tiny-agent[postgres]'"
        ) from None
    return PgStore(url)


