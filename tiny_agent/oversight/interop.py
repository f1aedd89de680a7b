"""Journals made from other journals (upgrade, fork, import, export: docs/cli.md) and checking the links they keep: the
I/O around the pure copies of :mod:`tiny_agent.oversight.lineage`.  Each reduces its source in full, then reads exactly
the lines it reduced (a writer appending meanwhile changes nothing); the source is never written."""

from __future__ import annotations

import hashlib
import itertools
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Final

import msgspec
from msgspec import UNSET

from tiny_agent.errors import Busy, Locked, UsageError
from tiny_agent.fold.core import kind_of
from tiny_agent.fold.fold import Fold
from tiny_agent.journal.facts import HeaderLine
from tiny_agent.journal.ids import now_ms, uuid7
from tiny_agent.journal.links import Origin, Parent, lineage_words
from tiny_agent.journal.state import CompactionOperation, Header, RunOperation, SessionState
from tiny_agent.oversight.lineage import (
    ForkPoint,
    Omitted,
    V2Export,
    chain_through,
    copied,
    find_fork_point,
    inside_operation,
    retried_steps,
    scan_prefix,
)
from tiny_agent.stores.base import AmbiguousSession, Session, SessionNotFound, Store
from tiny_agent.stores.files import disk as filestore
from tiny_agent.stores.journal import WRITER_VERSION, Durability, LineSpool, fold_chunks, fold_spilled, lines_of

PARENT_MISMATCH: Final = "PARENT_MISMATCH"
ORIGIN_MISMATCH: Final = "ORIGIN_MISMATCH"


class Made(msgspec.Struct):
    """A session ``upgrade`` or ``fork`` made (or, for an upgrade, found made already)."""

    session: Session
    origin: Origin | None = None
    parent: Parent | None = None
    point: ForkPoint | None = None
    """For a fork: where in the parent it branched."""
    already: bool = False
    """An earlier upgrade copied these very bytes: that session is the answer, and nothing new was made."""


class Source:
    """A journal as its fold accepted it: its state, and its committed lines exactly as many as were folded."""

    def __init__(self, chunks: Callable[[], Iterable[bytes]], path: Path | None = None) -> None:
        """``path``: the journal's file, when it is one: its fold leaves the messages in it (a reader of its lines needs
        the fold's state, not its transcript; :func:`~tiny_agent.stores.journal.fold_spilled`)."""
        self._chunks = chunks
        self.fold: Fold = fold_chunks(chunks()) if path is None else fold_spilled(path)
        self._count = self.fold.lines

    @property
    def state(self) -> SessionState:
        return self.fold.state

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """The committed lines the fold accepted (not those a live writer appended since)."""
        return itertools.islice(lines_of(self._chunks()), self._count)


# -- upgrade ----------------------------------------------------------------------------


def upgrade(store: Store, source: Session, durability: Durability = "fsync") -> Made:
    """Copy a v2 journal into a new v3 session whose header names it (``origin``); refused while a writer holds it."""
    path = source.path
    if path is not None:
        filestore.check_journal_file(path)
    holder = store.holder(source)
    if holder is not None:
        held = path.name if path is not None else f"session {source.id}"
        raise Locked(f"{held} is being written by {holder or 'another process'}; only one writer may hold a session")
    name = Path(source.name).name
    source_journal = Source(lambda: store.chunks(source), path)
    if source_journal.fold.profile.sealed:
        raise UsageError(f"{name} is already a v{source_journal.fold.version} journal: nothing to upgrade (resume it as it is)")
    length = source_journal.fold.committed_length
    where = os.path.realpath(path) if path is not None else f"{store.label}#{source.id}"
    origin = Origin(path=where, length=length, sha256=_digest_of(store.chunks(source), length))
    sessions = (store.resolve(row.path) for row in store.listing() if row.lineage == lineage_words(origin, None))
    earlier = next((session for session in sessions if _origin_of(store, session) == origin), None)
    if earlier is not None:
        return Made(session=earlier, origin=origin, already=True)
    created = now_ms()
    header = _header_like(source_journal.state.header, created, origin=origin)
    lines = copied(source_journal.lines(), header, created, spool=LineSpool())
    session = store.create_from(header.id, created, lines, durability, "upgrade")
    return Made(session=session, origin=origin)


def _origin_of(store: Store, session: Session) -> Origin | None:
    return Source(lambda: store.chunks(session)).state.origin


def _digest_of(chunks: Iterable[bytes], length: int) -> str:
    digest = hashlib.sha256()
    left = length
    for chunk in chunks:
        piece = chunk[:left]
        digest.update(piece)
        left -= len(piece)
        if left <= 0:
            break
    return "sha256:" + digest.hexdigest()


def _header_like(
    source: Header, created: int, *, origin: Origin | None = None, parent: Parent | None = None, version: int = WRITER_VERSION
) -> HeaderLine:
    """A header for a journal made from ``source``: its place, provider, model and environment; a new id unless v2."""
    return HeaderLine(
        version=version,
        id=source.id if version == 2 else uuid7(created),
        createdAt=source.createdAt if version == 2 else created,
        cwd=source.cwd,
        provider=source.provider,
        model=source.model,
        environmentIdentity=source.environmentIdentity,
        origin=UNSET if origin is None else origin,
        parent=UNSET if parent is None else parent,
    )


# -- fork -----------------------------------------------------------------------------------


def fork(store: Store, parent: Session, at: str, durability: Durability = "fsync") -> Made:
    """A new v3 session starting with the parent's facts through the line ``at`` names; its header names the parent."""
    source = Source(lambda: store.chunks(parent), parent.path)
    point = find_fork_point(source.lines(), at)
    scan = scan_prefix(source.lines(), point.line)
    if scan.open_operation is not None:
        raise UsageError(inside_operation(point, scan))
    created = now_ms()
    link = Parent(session=source.state.header.id, line=point.line, chain=scan.chain)
    header = _header_like(source.state.header, created, parent=link)
    lines = copied(source.lines(), header, created, point.line, LineSpool())
    session = store.create_from(header.id, created, lines, durability, "fork")
    return Made(session=session, parent=link, point=point)


# -- import -----------------------------------------------------------------------------------


class Imported(msgspec.Struct):
    session: Session
    already: bool = False
    """The store held this very journal already (same id, same bytes): nothing new was stored."""
    dropped: int = 0
    """Bytes of a torn tail after the file's last newline, which are not part of the journal and were not stored."""


def import_journal(store: Store, path: Path, durability: Durability = "fsync") -> Imported:
    """Store a journal file as it is under its own id, once the fold accepts it whole; never over another session."""
    filestore.check_journal_file(path)
    source = Source(lambda: filestore.file_chunks(path), path)
    session_id = source.state.header.id
    dropped = os.stat(path).st_size - source.fold.committed_length
    lines = (line for _, line in source.lines())
    try:
        session = store.create_from(session_id, source.state.header.createdAt, lines, durability, "import")
    except FileExistsError:
        held = store.resolve(session_id)
        if not _same_lines(store.chunks(held), source.lines()):
            raise UsageError(
                f"{store.label} already holds session {session_id} with other bytes; import never overwrites a session "
                f"(`tiny-agent export {session_id}` shows the stored one)"
            ) from None
        return Imported(session=held, already=True, dropped=dropped)
    return Imported(session=session, dropped=dropped)


def _same_lines(chunks: Iterable[bytes], lines: Iterable[tuple[int, bytes]]) -> bool:
    return all(a == b for a, b in itertools.zip_longest((line for _, line in lines_of(chunks)), (line for _, line in lines)))


# -- export -----------------------------------------------------------------------------------


class Exported(msgspec.Struct):
    omitted: Omitted
    lineage: str | None
    """The header link a v2 header cannot carry (``fork of …``), if the session has one."""


def export_v2(
    chunks: Callable[[], Iterable[bytes]], name: str, write: Callable[[Iterable[bytes]], None], path: Path | None = None
) -> Exported:
    """Hand ``write`` the bytes of the session as a v2 journal (same id; no raw or seal facts; retries folded); ``path``:
    its file, if it is one (:class:`Source`)."""
    source = Source(chunks, path)
    state = source.state
    refuse_unexportable(state, name)
    header = _header_like(state.header, state.header.createdAt, version=2)
    export = V2Export(header, retried_steps(source.lines()), LineSpool())
    write(line + b"\n" for line in export.lines(source.lines()))
    return Exported(omitted=export.omitted, lineage=lineage_words(state.origin, state.parent))


def refuse_unexportable(state: SessionState, name: str) -> None:
    """An open operation whose v2 copy would differ (a response on record, or past attempt 2) is not exported
    (docs/journal.md, *Export*)."""
    operation = state.operation
    if type(operation) is not RunOperation and type(operation) is not CompactionOperation:
        return
    step = operation.step
    if step is UNSET:
        return
    if step.rawId is not UNSET:
        why = "has a response on record (a raw fact, which v2 cannot hold)"
    elif step.attempt > 2:
        why = f"is attempt {step.attempt} (v2 stops at attempt 2)"
    else:
        return
    raise Busy(
        f"{name} has an open {kind_of(operation)} whose latest attempt {why}: "
        f"in v2 another port would ask the model again; finish it first (`tiny-agent resume`, or `--abort`), then export"
    )


def write_file(path: Path, chunks: Iterable[bytes]) -> None:
    """A new file holding ``chunks``, whole or not at all; an existing file is never overwritten."""
    try:
        filestore.publish_file(path, chunks, True, "export")
    except FileExistsError:
        raise UsageError(f"{path} already exists; export never overwrites a file (remove it, or name another)") from None


def write_stream(out: IO[bytes], chunks: Iterable[bytes]) -> None:
    """``chunks`` to ``out`` once all of them are made (a copy that fails half way writes nothing)."""
    with tempfile.TemporaryFile() as staging:
        for chunk in chunks:
            staging.write(chunk)
        staging.seek(0)
        while piece := staging.read(filestore.CHUNK_SIZE):
            out.write(piece)
    out.flush()


# -- checking links (verify) -------------------------------------------------------------------


class LinkCheck(msgspec.Struct):
    note: str
    """One line for people."""
    mismatch: str | None = None
    """``PARENT_MISMATCH`` or ``ORIGIN_MISMATCH`` when the other journal is there and differs."""


def check_links(store: Store, state: SessionState) -> list[LinkCheck]:
    """Does the parent (fork) or the v2 file (upgrade) still hold what the header says?  Absent ones are only noted."""
    checks = []
    if state.parent is not None:
        checks.append(_check_parent(store, state.parent))
    if state.origin is not None:
        checks.append(_check_origin(state.origin))
    return checks


def _check_parent(store: Store, parent: Parent) -> LinkCheck:
    found = _parent_in(store, parent.session)
    if found is None:
        note = f"fork of session {parent.session} at line {parent.line}; the parent is not here, so the link is not checked"
        return LinkCheck(note=note)
    name = Path(found.name).name
    try:
        chain, lines = chain_through(lines_of(store.chunks(found)), parent.line)
    except (OSError, msgspec.DecodeError) as error:
        return LinkCheck(note=f"fork of {name} at line {parent.line}; the parent cannot be read ({error})")
    if chain is None:
        why = f"the parent {name} has only {lines} line(s), and the fork was made after its line {parent.line}"
        return LinkCheck(note=why, mismatch=PARENT_MISMATCH)
    if chain != parent.chain:
        why = f"the parent {name} no longer matches the fork at line {parent.line}: its lines 1-{parent.line} changed since"
        return LinkCheck(note=why, mismatch=PARENT_MISMATCH)
    return LinkCheck(note=f"fork of {name} at line {parent.line}: the parent still matches there")


def _parent_in(store: Store, session_id: str) -> Session | None:
    try:
        session = store.resolve(session_id)
    except (SessionNotFound, AmbiguousSession):
        return None
    return session if session.id == session_id else None


def _check_origin(origin: Origin) -> LinkCheck:
    path = Path(origin.path)
    try:
        size = os.stat(path).st_size
    except OSError:
        return LinkCheck(note=f"upgrade of {origin.path}, which is not there, so the link is not checked")
    if size < origin.length or _digest_of(filestore.file_chunks(path), origin.length) != origin.sha256:
        why = f"the v2 journal {origin.path} no longer matches its first {origin.length} bytes as copied"
        return LinkCheck(note=why, mismatch=ORIGIN_MISMATCH)
    return LinkCheck(note=f"upgrade of {origin.path}: its first {origin.length} bytes are as copied")
