"""The sessions directory: where journals live, how they are named and found.

A session file is ``<UTC time>_<session id>.jsonl`` (basic ISO 8601 time, so
names sort by creation).  The directory is private (0700) and journals are
0600.  A session is named on the command line by a path, by its id, or by a
unique prefix of its id; names never leave the directory (no separators, no
``..``) and symbolic links are never followed into it.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from tiny_agent.errors import NotFound, UsageError
from tiny_agent.facts import HeaderLine
from tiny_agent.ids import now_ms, uuid7
from tiny_agent.journal import WRITER_VERSION, Durability, JournalWriter

DEFAULT_SESSIONS_DIR = "sessions"
SESSIONS_DIR_ENV = "TINY_AGENT_SESSIONS_DIR"
JOURNAL_SUFFIX = ".jsonl"

_JOURNAL_NAME = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)_(?P<id>[0-9a-f-]{36})\.jsonl")
_SESSION_REF = re.compile(r"[0-9a-f][0-9a-f-]*")


class SessionNotFound(NotFound):
    """Nothing in the sessions directory (or on disk) answers to the name given."""


class AmbiguousSession(UsageError):
    """A prefix that names more than one session."""


def sessions_dir(flag: str | None) -> Path:
    """The sessions directory: the flag, else $TINY_AGENT_SESSIONS_DIR, else ./sessions."""
    if flag:
        return Path(flag)
    return Path(os.environ.get(SESSIONS_DIR_ENV) or DEFAULT_SESSIONS_DIR)


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
    """Journals directly in ``directory``, newest first; symbolic links are skipped."""
    if not directory.is_dir():
        return []
    found = []
    for entry in os.scandir(directory):
        if entry.is_file(follow_symlinks=False) and _JOURNAL_NAME.fullmatch(entry.name):
            found.append(Path(entry.path))
    found.sort(key=lambda path: path.name, reverse=True)
    return found


def resolve_session(reference: str, directory: Path) -> Path:
    """A journal path for a path, a session id or a unique id prefix."""
    candidate = Path(reference)
    if reference.endswith(JOURNAL_SUFFIX) or os.sep in reference:
        if candidate.is_file():
            return candidate
        raise SessionNotFound(f"{reference}: no such journal file")
    if not _SESSION_REF.fullmatch(reference):
        raise SessionNotFound(f"{reference!r} is neither a journal path nor a session id")
    matches = [path for path in list_journals(directory) if (session_id_of(path) or "").startswith(reference)]
    if not matches:
        raise SessionNotFound(f"no session {reference!r} in {directory}")
    if len(matches) > 1:
        names = ", ".join(session_id_of(path) or path.name for path in matches[:4])
        more = "" if len(matches) <= 4 else f" and {len(matches) - 4} more"
        raise AmbiguousSession(f"{reference!r} matches {len(matches)} sessions ({names}{more}); give more of the id")
    return matches[0]


def create_session(
    directory: Path,
    *,
    cwd: str,
    provider: str,
    model: str,
    environment_identity: str,
    durability: Durability = "fsync",
) -> JournalWriter:
    """A new journal in ``directory`` (made private), named by its creation time and id, its lock held."""
    ensure_private_directory(directory)
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
    return JournalWriter.create(directory / journal_name(session_id, created), header, durability=durability)
