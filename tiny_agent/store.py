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
from typing import Final, Protocol

import msgspec

from tiny_agent import filestore
from tiny_agent.errors import NotFound, UsageError
from tiny_agent.facts import HeaderLine
from tiny_agent.filestore import Durability
from tiny_agent.ids import now_ms, uuid7
from tiny_agent.journal import WRITER_VERSION, JournalWriter

SESSIONS_DIR_ENV: Final = "TINY_AGENT_SESSIONS_DIR"
JOURNAL_SUFFIX: Final = ".jsonl"
HANDLE_MIN: Final = 4
HANDLE_MAX: Final = 8

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
    """What every command needs from where sessions live."""

    label: str
    """Where, for messages: a directory, or a database without its credentials."""

    def create(
        self, *, cwd: str, provider: str, model: str, environment_identity: str, durability: Durability
    ) -> JournalWriter: ...

    def resolve(self, reference: str) -> Session: ...

    def open_writer(self, session: Session, durability: Durability) -> JournalWriter:
        """The session's one writer; refuses a journal whose header is another session's (session-v2 §16)."""
        ...

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        """A new session whose journal is exactly ``lines`` (each without its LF, the header first): all of it, or nothing.

        For ``upgrade`` and ``fork``, which build a whole journal before it
        may be seen (``label`` names the failpoint ``before-link:<label>``).
        """
        ...

    def chunks(self, session: Session) -> Iterator[bytes]: ...

    def sessions(self) -> list[Session]:
        """Every session, newest first."""
        ...


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
        ensure_private_directory(self.directory)
        created = now_ms()
        session_id = uuid7(created)
        header = HeaderLine(
            version=WRITER_VERSION,
            id=session_id,
            createdAt=created,
            cwd=cwd,
            provider=provider,
            model=model,
            environmentIdentity=environment_identity,
        )
        return JournalWriter.create(self.directory / journal_name(session_id, created), header, durability=durability)

    def resolve(self, reference: str) -> Session:
        return _file_session(resolve_session(reference, self.directory))

    def open_writer(self, session: Session, durability: Durability) -> JournalWriter:
        path = _path_of(session)
        return JournalWriter.open(path, durability=durability, session_id=session_id_of(path))

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        ensure_private_directory(self.directory)
        path = self.directory / journal_name(session_id, created)
        filestore.publish_file(path, (line + b"\n" for line in lines), durability, label)
        return _file_session(path)

    def chunks(self, session: Session) -> Iterator[bytes]:
        return filestore.file_chunks(_path_of(session))

    def sessions(self) -> list[Session]:
        return [_file_session(path) for path in list_journals(self.directory)]

    def handles(self) -> dict[str, str]:
        """Each session id's handle in this store."""
        ids = [session_id_of(path) for path in list_journals(self.directory)]
        return shortest_handles([session_id for session_id in ids if session_id])


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
    if reference.endswith(JOURNAL_SUFFIX) or os.sep in reference:
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
    """The store the command line names (today: the file store in the sessions directory)."""
    return FileStore(sessions_dir(sessions_dir_flag))


ProgressCallback = Callable[[int, int], None]
