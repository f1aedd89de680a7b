"""The file store (the default): each session a journal file ``<UTC time>_<session id>.jsonl`` in a private directory
(docs/cli.md, *Naming a session*); the files themselves are :mod:`~tiny_agent.stores.files.disk`'s."""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tiny_agent.errors import ConfigError
from tiny_agent.stores.base import (
    HANDLE_MAX,
    Note,
    ProgressCallback,
    Session,
    SessionNotFound,
    is_journal_path,
    named,
    shortest_handles,
    tail_of,
)
from tiny_agent.stores.files import catalog
from tiny_agent.stores.files.disk import file_chunks, file_holder, journal_name, list_journals, publish_file, session_id_of

if TYPE_CHECKING:
    # The journal (and with it the whole fold) is imported where a writer is made: listing
    # sessions from a warm index, the commonest command, needs neither.
    from tiny_agent.fold.fold import Fold
    from tiny_agent.stores.checkpoints import Checkpoints
    from tiny_agent.stores.journal import Durability, JournalWriter
    from tiny_agent.stores.listing import Listed, ReportEntry

SESSIONS_DIR_ENV: Final = "TINY_AGENT_SESSIONS_DIR"


def default_sessions_dir() -> Path:
    """``$XDG_DATA_HOME/tiny-agent/sessions``, by default ``~/.local/share/tiny-agent/sessions``."""
    data_home = os.environ.get("XDG_DATA_HOME") or ""
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "tiny-agent" / "sessions"


def sessions_dir(flag: str | None) -> Path:
    """The sessions directory: the flag, else $TINY_AGENT_SESSIONS_DIR, else the per-user default."""
    configured = flag or os.environ.get(SESSIONS_DIR_ENV)
    return Path(configured) if configured else default_sessions_dir()


def ensure_private_directory(directory: Path) -> None:
    """Create the directory 0700 if needed; tighten an existing one we own to 0700."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise NotADirectoryError(f"{directory}: sessions directory is a symbolic link")
    if info.st_mode & 0o077 and info.st_uid == os.getuid():
        os.chmod(directory, 0o700)


class FileStore:
    """Sessions as journal files in one private directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.label = str(directory)

    @classmethod
    def from_location(cls, location: str, sessions_dir_flag: str | None) -> FileStore:
        """``file:`` and a directory, a directory, or (nothing) the sessions directory."""
        if not location:
            return cls(sessions_dir(sessions_dir_flag))
        directory = location.removeprefix("file:")
        if not directory:
            raise ConfigError("file: names no directory")
        return cls(Path(directory).expanduser())

    def create(
        self, *, cwd: str, provider: str, model: str, environment_identity: str, durability: Durability = "fsync"
    ) -> JournalWriter:
        """A new journal (its directory made private), named by its creation time and id, its lock held."""
        from tiny_agent.stores.journal import JournalWriter, new_header

        ensure_private_directory(self.directory)
        header = new_header(cwd=cwd, provider=provider, model=model, environment_identity=environment_identity)
        return JournalWriter.create(self.directory / journal_name(header.id, header.createdAt), header, durability=durability)

    def resolve(self, reference: str) -> Session:
        """A path, a session id, a handle, or a unique prefix of an id."""
        if is_journal_path(reference):
            return file_session(reference)
        by_id = {session_id_of(path) or "": path for path in list_journals(self.directory)}
        return file_session(by_id[named(reference, self.label, lambda: by_id)])

    def open_writer(self, session: Session, durability: Durability, note: Note | None = None) -> JournalWriter:
        """The journal file's writer (a file named after its session must hold that session's header)."""
        from tiny_agent.stores.journal import JournalWriter

        path = _path_of(session)
        folder = functools.partial(self.checkpoints(note).fold, lean=True, edges=True) if note is not None else None
        return JournalWriter.open(path, durability=durability, session_id=session_id_of(path), folder=folder)

    def fold(self, session: Session, note: Note, *, lean: bool = False) -> Fold:
        path = _path_of(session)
        checkpoints = self.checkpoints(note)
        if lean and checkpoints.path_for(path) is None:
            # No checkpoint to read or to write (a journal outside the sessions directory): its messages stay in it.
            from tiny_agent.stores.journal import fold_spilled

            return fold_spilled(path)
        return checkpoints.fold(path, lean=lean, reader=lean)  # only replay asks for a lean fold

    def resumed(self, session: Session, note: Note) -> Fold | None:
        return self.checkpoints(note).resumed(_path_of(session))

    def checkpoints(self, note: Note) -> Checkpoints:
        """The checkpoints of this directory's journals (:mod:`tiny_agent.stores.checkpoints`)."""
        from tiny_agent.stores.checkpoints import Checkpoints, threshold_from

        return Checkpoints(self.directory, threshold=threshold_from(os.environ), note=note)

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        ensure_private_directory(self.directory)
        path = self.directory / journal_name(session_id, created)
        publish_file(path, (line + b"\n" for line in lines), durability == "fsync", label)
        return file_session(path)

    def chunks(self, session: Session) -> Iterator[bytes]:
        return file_chunks(_path_of(session))

    def size(self, session: Session) -> int:
        return _path_of(session).stat().st_size

    def known_length(self, session: Session) -> int | None:
        path = _path_of(session)
        return catalog.known_lengths(path.parent).get(path.name)

    def holder(self, session: Session) -> str | None:
        return file_holder(_path_of(session))

    def handle(self, session_id: str) -> str:
        handles = shortest_handles([found for path in list_journals(self.directory) if (found := session_id_of(path))])
        return handles.get(session_id, tail_of(session_id)[:HANDLE_MAX])

    def sessions(self) -> list[Session]:
        return [file_session(path) for path in list_journals(self.directory)]

    def listing(
        self, *, cwd: str | None = None, limit: int | None = None, progress: ProgressCallback | None = None
    ) -> list[Listed]:
        return catalog.list_sessions(self.directory, limit, progress=progress, cwd=cwd)

    def report_entries(self, cwd: str | None = None, progress: ProgressCallback | None = None) -> list[ReportEntry]:
        return catalog.report_entries(self.directory, cwd=cwd, progress=progress)

    def close(self) -> None:
        """Nothing is held between calls."""


def file_session(reference: str | Path) -> Session:
    """The journal file a path names (it must be a file)."""
    path = Path(reference)
    if not path.is_file():
        raise SessionNotFound(f"{reference}: no such journal file")
    return Session(id=session_id_of(path) or path.stem, name=str(path), path=path)


def _path_of(session: Session) -> Path:
    if session.path is None:
        raise ValueError(f"{session.name} is not a journal file")
    return session.path
