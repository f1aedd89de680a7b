"""``sessions``: the sessions directory at a glance, without reducing every journal every time.

A small index (``.tiny-agent-index.json`` in the sessions directory) keeps a
summary per journal together with the journal's length and a digest of its
last bytes.  A listing trusts a summary only while both still match the file;
anything else (a new journal, an append, a changed tail) is reduced again and
the index rewritten.  The index is a cache: delete it and it is rebuilt.
Whether a writer holds a session is always checked live.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal import holder_pid, is_locked, read_journal
from tiny_agent.state import IdleOperation
from tiny_agent.store import list_journals, session_id_of
from tiny_agent.transcript import UserMessage

INDEX_NAME: Final = ".tiny-agent-index.json"
TAIL_BYTES: Final = 4096

Status = Literal["idle", "open", "corrupt"]


class Summary(msgspec.Struct):
    session: str
    created: int | None
    model: str | None
    status: Status
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
    version: int = 1
    journals: dict[str, IndexEntry] = msgspec.field(default_factory=dict)


class Listed(msgspec.Struct):
    """One row of ``tiny-agent sessions``."""

    session: str
    path: str
    created: int | None
    model: str | None
    status: str
    """``idle``, ``open run``, ``crashed``, ``corrupt`` or ``locked by pid N``."""
    runs: int
    prompt: str | None
    tokens: int
    input: int
    output: int
    error: str | None = None


def list_sessions(directory: Path, limit: int | None = None, progress: Callable[[int, int], None] | None = None) -> list[Listed]:
    """Newest first; reduces only the journals the index cannot vouch for."""
    journals = list_journals(directory)
    if limit is not None:
        journals = journals[:limit]
    index = _load_index(directory)
    changed = False
    rows = []
    for position, path in enumerate(journals, start=1):
        size, tail = _fingerprint(path)
        entry = index.journals.get(path.name)
        if entry is None or entry.size != size or entry.tail != tail:
            entry = IndexEntry(size=size, tail=tail, summary=summarize(path))
            index.journals[path.name] = entry
            changed = True
        rows.append(_row(path, entry.summary))
        if progress is not None:
            progress(position, len(journals))
    if changed:
        _save_index(directory, index)
    return rows


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
        return Summary(session=session, created=None, model=None, status="corrupt", error=f"unreadable: {error.strerror}")
    first = next((message.content for message in state.transcript if type(message) is UserMessage), None)
    usage = state.usage
    return Summary(
        session=state.header.id,
        created=state.header.createdAt,
        model=state.header.model,
        status="idle" if type(state.operation) is IdleOperation else "open",
        runs=state.runCount,
        prompt=first,
        input=usage.input,
        output=usage.output,
        cacheRead=usage.cacheRead,
        cacheWrite=usage.cacheWrite,
    )


def _row(path: Path, summary: Summary) -> Listed:
    status = summary.status
    if is_locked(path):
        pid = holder_pid(path)
        status_text = f"locked by pid {pid}" if pid else "locked"
    elif status == "open":
        status_text = "crashed"
    else:
        status_text = status
    return Listed(
        session=summary.session,
        path=str(path),
        created=summary.created,
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
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        file.seek(max(0, size - TAIL_BYTES))
        tail = file.read(TAIL_BYTES)
    return size, hashlib.sha256(tail).hexdigest()


def _load_index(directory: Path) -> Index:
    try:
        return msgspec.json.decode((directory / INDEX_NAME).read_bytes(), type=Index)
    except (OSError, msgspec.DecodeError):
        return Index()


def _save_index(directory: Path, index: Index) -> None:
    """Write the index atomically (a reader never sees half of it); failing to write only costs speed."""
    target = directory / INDEX_NAME
    staging = directory / f"{INDEX_NAME}.{os.getpid()}.new"
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(msgspec.json.encode(index))
        os.replace(staging, target)
    except OSError:
        staging.unlink(missing_ok=True)
