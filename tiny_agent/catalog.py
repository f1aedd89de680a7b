"""``sessions``: a store at a glance, without reducing every journal every time.

A summary per session (when and where it was made, its model, its status,
runs, first prompt, tokens) is kept in an index together with what the
journal looked like when it was summarized.  For the file store the index is
``.tiny-agent-index.json`` in the sessions directory, and a summary is trusted
only while the journal's length and a digest of its last bytes still match;
anything else (a new journal, an append, a changed tail) is reduced again
and the index rewritten.  The index is a cache: delete it and it is rebuilt.
Whether a writer holds a session is always checked live.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal import holder_pid, is_locked, read_journal
from tiny_agent.state import IdleOperation, SessionState
from tiny_agent.store import list_journals, session_id_of, shortest_handles
from tiny_agent.transcript import UserMessage

INDEX_NAME: Final = ".tiny-agent-index.json"
INDEX_VERSION: Final = 2
TAIL_BYTES: Final = 4096

Status = Literal["idle", "open", "corrupt", "unreadable"]


class Summary(msgspec.Struct):
    session: str
    created: int | None
    model: str | None
    status: Status
    cwd: str | None = None
    provider: str | None = None
    runs: int = 0
    prompt: str | None = None
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    error: str | None = None


class IndexEntry(msgspec.Struct):
    size: int
    tail: str
    summary: Summary


class Index(msgspec.Struct):
    version: int = INDEX_VERSION
    journals: dict[str, IndexEntry] = msgspec.field(default_factory=dict)


class Listed(msgspec.Struct):
    """One row of ``tiny-agent sessions``."""

    session: str
    handle: str
    path: str
    created: int | None
    cwd: str | None
    model: str | None
    status: str
    """``idle``, ``crashed``, ``corrupt``, ``unreadable`` or ``locked by pid N``."""
    runs: int
    prompt: str | None
    tokens: int
    input: int
    output: int
    error: str | None = None


def list_sessions(
    directory: Path,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cwd: str | None = None,
) -> list[Listed]:
    """Newest first (only those made in ``cwd`` when given); reduces only what the index cannot vouch for."""
    journals = list_journals(directory)
    handles = shortest_handles([session_id_of(path) or "" for path in journals])
    index = _load_index(directory)
    changed = False
    rows: list[Listed] = []
    for position, path in enumerate(journals, start=1):
        entry, fresh = _indexed(index, path)
        changed = changed or fresh
        if cwd is None or entry.summary.cwd == cwd:
            rows.append(_row(path, entry.summary, handles.get(session_id_of(path) or "", "")))
        if progress is not None:
            progress(position, len(journals))
        if limit is not None and len(rows) >= limit:
            break
    if changed:
        _save_index(directory, index)
    return rows


def _indexed(index: Index, path: Path) -> tuple[IndexEntry, bool]:
    """The index entry for a journal, summarizing it again if the journal changed; and whether it did."""
    try:
        size, tail = _fingerprint(path)
    except OSError as error:
        unreadable = Summary(session=session_id_of(path) or path.stem, created=None, model=None, status="unreadable")
        unreadable.error = f"unreadable: {error.strerror or error}"
        return IndexEntry(size=-1, tail="", summary=unreadable), False
    entry = index.journals.get(path.name)
    if entry is not None and entry.size == size and entry.tail == tail:
        return entry, False
    entry = IndexEntry(size=size, tail=tail, summary=summarize(path))
    if entry.summary.status != "unreadable":
        index.journals[path.name] = entry
    return entry, True


def known_lengths(directory: Path) -> dict[str, int]:
    """The length the index last saw for each journal (for ``verify``'s truncation check)."""
    return {name: entry.size for name, entry in _load_index(directory).journals.items()}


def summarize(path: Path) -> Summary:
    session = session_id_of(path) or path.stem
    try:
        state = read_journal(path)
    except CorruptionError as error:
        return Summary(session=session, created=None, model=None, status="corrupt", error=str(error))
    except OSError as error:
        reason = f"unreadable: {error.strerror or error}"
        return Summary(session=session, created=None, model=None, status="unreadable", error=reason)
    return summary_of(state)


def summary_of(state: SessionState) -> Summary:
    first = next((message.content for message in state.transcript if type(message) is UserMessage), None)
    usage = state.usage
    header = state.header
    return Summary(
        session=header.id,
        created=header.createdAt,
        model=header.model,
        status="idle" if type(state.operation) is IdleOperation else "open",
        cwd=header.cwd,
        provider=header.provider,
        runs=state.runCount,
        prompt=first,
        input=usage.input,
        output=usage.output,
        cacheRead=usage.cacheRead,
        cacheWrite=usage.cacheWrite,
    )


def _row(path: Path, summary: Summary, handle: str) -> Listed:
    status = summary.status
    if status in ("idle", "open") and is_locked(path):
        pid = holder_pid(path)
        status_text = f"locked by pid {pid}" if pid else "locked"
    elif status == "open":
        status_text = "crashed"
    else:
        status_text = status
    return Listed(
        session=summary.session,
        handle=handle,
        path=str(path),
        created=summary.created,
        cwd=summary.cwd,
        model=summary.model,
        status=status_text,
        runs=summary.runs,
        prompt=summary.prompt,
        tokens=summary.input + summary.output + summary.cacheRead + summary.cacheWrite,
        input=summary.input,
        output=summary.output,
        error=summary.error,
    )


def _fingerprint(path: Path) -> tuple[int, str]:
    """The journal's size and a digest of its last bytes: cheap, and enough to notice an append."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file")
        size = info.st_size
        tail = os.pread(fd, TAIL_BYTES, max(0, size - TAIL_BYTES))
    finally:
        os.close(fd)
    return size, hashlib.sha256(tail).hexdigest()


def _load_index(directory: Path) -> Index:
    """The index if it is a regular file we can read and decode; otherwise an empty one (it is only a cache)."""
    try:
        fd = os.open(directory / INDEX_NAME, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return Index()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Index()
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read()
        index = msgspec.json.decode(data, type=Index)
    except (OSError, msgspec.DecodeError):
        return Index()
    finally:
        os.close(fd)
    return index if index.version == INDEX_VERSION else Index()


def _save_index(directory: Path, index: Index) -> None:
    """Write the index atomically (a reader never sees half of it); failing to write only costs speed."""
    target = directory / INDEX_NAME
    staging = directory / f".{INDEX_NAME}.{os.getpid()}.new"
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(msgspec.json.encode(index))
        os.replace(staging, target)
    except OSError:
        # The index is a cache: a read-only or full directory only costs the next listing some speed.
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)
