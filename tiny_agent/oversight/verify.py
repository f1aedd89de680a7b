"""``verify``: is every byte of a journal accounted for?  The seal chain and the reducer, per session."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal.state import SessionState
from tiny_agent.stores.journal import fold_spilled, reduce_source

if TYPE_CHECKING:
    from tiny_agent.stores.base import Session, Store

Status = Literal["ok", "corrupt", "open-tail", "unsealed", "unreadable"]


class Verdict(msgspec.Struct):
    path: str
    status: Status
    detail: str
    """One line for people: what was found and what it means."""
    session: str | None = None
    version: int | None = None
    facts: int = 0
    bytes: int = 0
    error: dict[str, object] | None = None
    writer_pid: int | None = None
    """The pid of the process writing the session right now, if one is."""
    writer: str | None = None
    """Who writes the session right now, in words (``pid 123``, or ``pid 123 on HOST (database backend 456)``)."""


def verify(path: Path, known_length: int | None = None) -> Verdict:
    """Check one journal file (see :func:`verify_in`); ``known_length`` is the length the sessions index last saw."""
    return verify_in(*file_session(path), known_length)


def file_session(path: Path) -> tuple[Store, Session]:
    """A journal file as a session of the file store of its directory."""
    from tiny_agent.stores.base import Session
    from tiny_agent.stores.files.disk import session_id_of
    from tiny_agent.stores.files.store import FileStore

    return FileStore(path.parent), Session(id=session_id_of(path) or path.stem, name=str(path), path=path)


def verify_in(store: Store, session: Session, known_length: int | None = None) -> Verdict:
    """Check one session: every line through the reducer, every seal against the bytes before it.

    ``known_length``, when given, is a length this journal had before (from
    the store's index): a journal that is now shorter was cut at a line
    boundary, which no seal can show on its own.
    """
    name = session.name
    read = _Counted(store.chunks(session))
    try:
        if session.path is not None:
            # A file: its messages stay in it while the fold goes on (read back when a rule reaches back), so a long
            # journal is verified in the memory of the fold's books, not of its transcript.
            state = fold_spilled(session.path, read.count).state
        else:
            state = reduce_source(read)
    except CorruptionError as error:
        return Verdict(path=name, status="corrupt", detail=str(error), error={**error.to_json(), "reason": error.reason})
    except OSError as error:
        return Verdict(path=name, status="unreadable", detail=f"{error.strerror or error}")
    size = read.total
    verdict = Verdict(
        path=name, status="ok", detail="", session=state.header.id, version=state.version, facts=state.factCount, bytes=size
    )
    torn = size - state.repairedLength
    notes = [f"{torn} bytes of torn tail after the last newline"] if torn else []
    if known_length is not None and state.repairedLength < known_length:
        notes.append(f"shorter than the {known_length} bytes it had when last listed: lines were cut off")
        verdict.status = "corrupt"
        verdict.error = {"code": "TRUNCATED", "line": None, "reason": notes[-1]}
    if state.version < 3:
        verdict.status = "unsealed" if verdict.status == "ok" else verdict.status
        notes.insert(0, "v2 journal: valid, but it has no seal chain to prove its bytes unchanged")
    elif state.sealed:
        notes.insert(0, f"sealed: all {state.factCount} facts valid, every line covered by the seal chain")
    else:
        if verdict.status == "ok":
            verdict.status = "open-tail"
        verdict.writer = store.holder(session)
        verdict.writer_pid = _pid_in(verdict.writer)
        if verdict.writer is not None:
            who = f"written by {verdict.writer}" if verdict.writer else "being written"
            notes.insert(0, f"open tail: valid so far, live ({who}); its last line is not sealed yet")
        else:
            notes.insert(0, "open tail: valid, but not closed cleanly (crashed?); the last line is not covered by a seal")
    notes.extend(_link_notes(store, session, state, verdict))
    verdict.detail = "; ".join(notes)
    return verdict


class _Counted:
    """A journal's chunks, counting the bytes that went by (the length actually read and folded)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks
        self.total = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.total += len(chunk)
            yield chunk

    def count(self, length: int) -> None:
        self.total += length


def _pid_in(holder: str | None) -> int | None:
    """The pid a holder's words name (``pid 123 ...``), if they do."""
    words = (holder or "").split()
    return int(words[1]) if len(words) > 1 and words[0] == "pid" and words[1].isdigit() else None


def _link_notes(store: Store, session: Session, state: SessionState, verdict: Verdict) -> list[str]:
    """A fork's parent and an upgrade's v2 file, checked when present (a mismatch fails the verdict); a misnamed file."""
    from tiny_agent.oversight.interop import check_links
    from tiny_agent.stores.files.disk import session_id_of

    notes = []
    named = session_id_of(session.path) if session.path is not None else session.id
    if named is not None and named != state.header.id:
        notes.append(f"misnamed: the file name says session {named}, the header {state.header.id} (writers refuse it)")
    for check in check_links(store, state):
        notes.append(check.note)
        if check.mismatch is not None and verdict.status != "corrupt":
            verdict.status = "corrupt"
            verdict.error = {"code": check.mismatch, "line": 1, "reason": check.note}
    return notes


def verify_sessions(
    store: Store, sessions: list[Session], progress: Callable[[int, int], None] | None = None
) -> list[Verdict]:
    """Verify sessions of a store, each against the length its index last saw (a journal file as a file, against its
    directory's index)."""
    from tiny_agent.stores.files.catalog import known_lengths

    lengths: dict[Path, dict[str, int]] = {}
    verdicts = []
    for position, session in enumerate(sessions, start=1):
        path = session.path
        if path is None:
            verdicts.append(verify_in(store, session, store.known_length(session)))
        else:
            if path.parent not in lengths:
                lengths[path.parent] = known_lengths(path.parent)
            verdicts.append(verify(path, lengths[path.parent].get(path.name)))
        if progress is not None:
            progress(position, len(sessions))
    return verdicts


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    """One line a verdict, its status in capitals (``OPEN TAIL``)."""
    return [f"{verdict.status.upper().replace('-', ' '):<10}  {verdict.path}  {verdict.detail}" for verdict in verdicts]
