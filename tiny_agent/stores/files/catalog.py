"""The file store's index, ``.tiny-agent-index.json``: each journal's summary (with its usage buckets), trusted while
the journal's length and last bytes match (a cache; docs/oversight.md, *sessions*).  Writers are always checked live."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal.state import SessionState
from tiny_agent.stores.base import ProgressCallback, shortest_handles
from tiny_agent.stores.files.disk import NotAJournal, file_chunks, file_holder, list_journals, open_regular, session_id_of
from tiny_agent.stores.listing import Listed, ReportEntry, Summary, failed_summary, listed_row, summary_of, usage_buckets

INDEX_NAME: Final = ".tiny-agent-index.json"
INDEX_VERSION: Final = 8
"""3: usage and runs per day and model (``buckets``); 4: how the last run ended; 5: ``origin``, ``parent``;
6: ``usage`` as one object, and a corrupt journal's intact header; 7: the costs responses reported;
8: the attempts that reported usage."""
TAIL_BYTES: Final = 4096


class IndexEntry(msgspec.Struct):
    size: int
    tail: str
    summary: Summary


class Index(msgspec.Struct):
    version: int = INDEX_VERSION
    journals: dict[str, IndexEntry] = msgspec.field(default_factory=dict)


def list_sessions(
    directory: Path, limit: int | None = None, progress: ProgressCallback | None = None, cwd: str | None = None
) -> list[Listed]:
    """Newest first (only those made in ``cwd`` when given); reduces only what the index cannot vouch for."""
    rows: list[Listed] = []
    for path, summary, handles in _summaries(directory, progress):
        if cwd is None or summary.cwd == cwd:
            rows.append(_row(path, summary, handles))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def report_entries(directory: Path, cwd: str | None = None, progress: ProgressCallback | None = None) -> list[ReportEntry]:
    """Every session's summary with its buckets, newest first (only those made in ``cwd`` when given)."""
    return [
        ReportEntry(handle=handles.get(session_id_of(path) or "", ""), path=str(path), summary=summary)
        for path, summary, handles in _summaries(directory, progress)
        if cwd is None or summary.cwd == cwd
    ]


def known_lengths(directory: Path) -> dict[str, int]:
    """The length the index last saw for each journal (for ``verify``'s truncation check)."""
    return {name: entry.size for name, entry in _load_index(directory).journals.items()}


def _summaries(directory: Path, progress: ProgressCallback | None) -> Iterator[tuple[Path, Summary, dict[str, str]]]:
    """Each journal's summary and the store's handles, newest first, from the index where it still vouches (saved if it
    changed, also when the caller stops early: ``finally`` runs when a generator is closed)."""
    journals = list_journals(directory)
    handles = shortest_handles([session_id_of(path) or "" for path in journals])
    index = _load_index(directory)
    changed = False
    try:
        for position, path in enumerate(journals, start=1):
            entry, fresh = _indexed(index, path)
            changed = changed or fresh
            if progress is not None:
                progress(position, len(journals))
            yield path, entry.summary, handles
    finally:
        if changed:
            _save_index(directory, index)


def _indexed(index: Index, path: Path) -> tuple[IndexEntry, bool]:
    """The index entry for a journal, summarizing it again if the journal changed; and whether it did."""
    try:
        size, tail = _fingerprint(path)
    except OSError as error:
        return IndexEntry(size=-1, tail="", summary=_unreadable(path, error)), False
    entry = index.journals.get(path.name)
    if entry is not None and entry.size == size and entry.tail == tail:
        return entry, False
    entry = IndexEntry(size=size, tail=tail, summary=summarize(path))
    if entry.summary.status != "unreadable":
        index.journals[path.name] = entry
    return entry, True


def read_journal(path: Path) -> SessionState:
    """Every line of the journal folded; the fold is imported on first use (a listing from a warm index needs none)."""
    from tiny_agent.stores.journal import read_journal as fold_every_line

    return fold_every_line(path)


def summarize(path: Path) -> Summary:
    from tiny_agent.stores.journal import committed_lines, intact_header

    try:
        state = read_journal(path)
    except CorruptionError as error:
        try:
            header = intact_header(file_chunks(path))
        except OSError:
            header = None
        return failed_summary(session_id_of(path) or path.stem, "corrupt", error, header)
    except OSError as error:
        return _unreadable(path, error)
    summary = summary_of(state)
    try:
        summary.buckets = usage_buckets(committed_lines(path), state.header.model)
    except (msgspec.DecodeError, msgspec.ValidationError, OSError) as error:
        # The fold has just accepted these bytes; failing now means the file changed under us.
        summary.error = f"usage by day and model unavailable: {error}"
    return summary


def _unreadable(path: Path, error: OSError) -> Summary:
    return failed_summary(session_id_of(path) or path.stem, "unreadable", f"unreadable: {error.strerror or error}")


def _row(path: Path, summary: Summary, handles: dict[str, str]) -> Listed:
    holder = None if summary.status in ("corrupt", "unreadable") else file_holder(path)
    return listed_row(summary, handles.get(session_id_of(path) or "", ""), str(path), holder, handles)


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
    """The index if it is a regular file we can read and decode; otherwise an empty one."""
    try:
        with os.fdopen(open_regular(directory / INDEX_NAME, os.O_NOFOLLOW), "rb") as file:
            index = msgspec.json.decode(file.read(), type=Index)
    except (OSError, NotAJournal, msgspec.DecodeError):
        return Index()
    return index if index.version == INDEX_VERSION else Index()


def _save_index(directory: Path, index: Index) -> None:
    """Write the index atomically (a reader never sees half of it); a read-only or full directory only costs speed."""
    staging = directory / f".{INDEX_NAME}.{os.getpid()}.new"
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(msgspec.json.encode(index))
        os.replace(staging, directory / INDEX_NAME)
    except OSError:
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)
