"""Sessions in PostgreSQL: the same journal, one row per line, behind the :class:`~tiny_agent.stores.base.Store` seam
(docs/service.md).  Statements in ``schema``, connections in ``database``."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from tiny_agent.errors import CorruptionError, Locked, Misnamed
from tiny_agent.fold.fold import Fold
from tiny_agent.journal.facts import encode_header
from tiny_agent.journal.ids import now_ms
from tiny_agent.journal.links import Origin, Parent
from tiny_agent.journal.transcript import Usage
from tiny_agent.stores import failpoints
from tiny_agent.stores.base import Note, ProgressCallback, Session, handle_length, is_journal_path, named, tail_of
from tiny_agent.stores.files.store import FileStore, file_session, sessions_dir
from tiny_agent.stores.journal import (
    Durability,
    JournalWriter,
    fold_chunks,
    lines_of,
    new_header,
    reduce_source,
)
from tiny_agent.stores.listing import (
    Bucket,
    Listed,
    ReportEntry,
    Summary,
    kept_buckets,
    listed_row,
    read_kept,
    summary_of,
    usage_buckets,
)
from tiny_agent.stores.postgres import schema as pgschema
from tiny_agent.stores.postgres.database import Connection, Database, StoreUnavailable, read_chunks

if TYPE_CHECKING:
    from tiny_agent.stores.postgres.checkpoints import PgCheckpoints

__all__ = ["LostRace", "PgStore", "SessionHeld", "StoreUnavailable"]

class SessionHeld(Locked):
    """Another connection holds the session's writer lock."""


class LostRace(OSError):
    """A line the writer meant to append is already in the database: another writer got there first."""


class PgStore(Database):
    """Sessions as rows of a PostgreSQL database; a journal named by its path is a file of the sessions directory's store."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.files = FileStore(sessions_dir(None))
        self._reading = 0

    @classmethod
    def from_location(cls, location: str, sessions_dir_flag: str | None) -> PgStore:
        del sessions_dir_flag
        return cls(location)

    def resolve(self, reference: str) -> Session:
        """A path is that journal file; otherwise a session id, a handle, or a unique prefix of an id, in the database."""
        if is_journal_path(reference):
            return file_session(reference)
        return self.session(named(reference, self.label, lambda: self._fitting(reference), cap=5))

    def _fitting(self, reference: str) -> list[str]:
        """At most five ids that ``reference`` begins, or whose handle it begins (lower-case hex only)."""
        pattern = reference + "%"
        by_handle = "SELECT id FROM tiny_agent_sessions WHERE tail LIKE %s UNION " if "-" not in reference else ""
        params = (pattern, pattern) if by_handle else (pattern,)
        return [row[0] for row in self.query(f"{by_handle}SELECT id FROM tiny_agent_sessions WHERE id LIKE %s LIMIT 5", params)]

    def session(self, session_id: str) -> Session:
        return Session(id=session_id, name=session_id)

    def handle(self, session_id: str) -> str:
        """The session's shortest unique handle in this store: from its neighbours in tail order (two index probes)."""
        tail = tail_of(session_id)
        rows = self.query(f"SELECT {pgschema.NEIGHBOURS} FROM (SELECT %s AS tail) s", (tail,))
        return tail[: handle_length(tail, *rows[0])]

    def sessions(self) -> list[Session]:
        rows = self.query("SELECT id FROM tiny_agent_sessions ORDER BY created_at DESC, id DESC")
        return [self.session(row[0]) for row in rows]

    def chunks(self, session: Session) -> Iterator[bytes]:
        """The journal's bytes, about a megabyte at a time, streamed from a server-side cursor (memory stays bounded)."""
        if session.path is not None:
            yield from self.files.chunks(session)
            return
        busy = self._reading > 0
        conn = self.connect() if busy else self.reader()
        self._reading += 1
        try:
            yield from read_chunks(conn, session.id)
        except psycopg.Error as error:
            raise self.unavailable(f"reading session {session.id} failed", error) from None
        finally:
            self._reading -= 1
            if busy:
                conn.close()

    def size(self, session: Session) -> int:
        """The journal's length in bytes (every line and its LF), as its index row keeps it."""
        if session.path is not None:
            return self.files.size(session)
        rows = self.query("SELECT bytes FROM tiny_agent_sessions WHERE id = %s", (session.id,))
        return int(rows[0][0]) if rows else 0

    def known_length(self, session: Session) -> int | None:
        """What the index says the journal holds (verify's check that no line was deleted behind the writer's back)."""
        return None if session.path is not None else self.size(session)

    def holder(self, session: Session) -> str | None:
        """Who writes the session now, in words (``pid N on HOST (database backend M)``); None when nobody does."""
        if session.path is not None:
            return self.files.holder(session)
        return self.held_locks().get(self._lock_parts(session.id))

    def held_locks(self) -> dict[tuple[int, int], str]:
        return {(row[0], row[1]): pgschema.holder_words(row[3], row[2]) for row in self.query(pgschema.HELD_LOCKS)}

    def listing(
        self, *, cwd: str | None = None, limit: int | None = None, progress: ProgressCallback | None = None
    ) -> list[Listed]:
        """``sessions``: newest first from the index (only those made in ``cwd`` when given), handles and writers live."""
        held = self.held_locks()
        rows = self._indexed("", cwd, limit)
        handles = {summary.session: handle for summary, handle, _ in rows}
        return [
            listed_row(summary, handle, summary.session, held.get(self._lock_parts(summary.session)) if held else None, handles)
            for summary, handle, _ in rows
        ]

    def report_entries(self, cwd: str | None = None, progress: ProgressCallback | None = None) -> list[ReportEntry]:
        """Every session's summary with its usage buckets, newest first; buckets older than the session are made again."""
        entries = []
        for summary, handle, row in self._indexed(", s.buckets, s.buckets_lines", cwd, None):
            buckets, buckets_lines, lines = row[-2], row[-1], row[pgschema.LINES]
            if summary.status != "corrupt":  # else report names it among the sessions it skipped
                kept = read_kept(buckets) if buckets is not None and buckets_lines == lines and row[pgschema.VOUCHED_AT] else None
                summary.buckets = self._buckets(summary, lines) if kept is None else kept
            entries.append(ReportEntry(handle=handle, path=summary.session, summary=summary))
        return entries

    def _indexed(self, extra: str, cwd: str | None, limit: int | None) -> list[tuple[Summary, str, tuple[Any, ...]]]:
        """Index rows newest first (made in ``cwd``, at most ``limit``): each one's summary, handle and columns; a session
        the index row no longer vouches for (``schema.VOUCHED``) is folded from its rows, as a changed file is."""
        columns = f"{pgschema.LISTED_COLUMNS}, {pgschema.NEIGHBOURS}, {pgschema.VOUCHED}{extra}"
        statement = f"SELECT {columns} FROM tiny_agent_sessions s"
        statement += (" WHERE s.cwd = %s" if cwd is not None else "") + " ORDER BY s.created_at DESC, s.id DESC"
        statement += " LIMIT %s" if limit is not None else ""
        found = []
        for row in self.query(statement, [value for value in (cwd, limit) if value is not None]):
            tail = tail_of(row[0])
            before, after = row[pgschema.NEIGHBOURS_AT : pgschema.NEIGHBOURS_AT + 2]
            summary = summary_from_row(row)
            if not row[pgschema.VOUCHED_AT]:
                summary = self._folded_summary(summary, row[pgschema.BYTES])
            found.append((summary, tail[: handle_length(tail, before, after)], row))
        return found

    def _folded_summary(self, indexed: Summary, length: int) -> Summary:
        """The summary of a session folded from its rows (the index row no longer vouches for them)."""
        try:
            state = reduce_source(self.chunks(self.session(indexed.session)))
        except CorruptionError as error:
            problem = str(error)
        else:
            if state.repairedLength >= length:
                return summary_of(state)
            problem = f"TRUNCATED: its rows hold {state.repairedLength} bytes but its index row says {length}: lines were cut off"
        return Summary(
            session=indexed.session, created=indexed.created, model=indexed.model, status="corrupt", cwd=indexed.cwd,
            provider=indexed.provider, error=problem,
        )

    def _lock_parts(self, session_id: str) -> tuple[int, int]:
        return pgschema.lock_parts(pgschema.lock_key(self.schema, session_id))

    def _buckets(self, summary: Summary, lines: int) -> list[Bucket]:
        counted = itertools.islice(lines_of(self.chunks(self.session(summary.session))), lines)
        buckets = usage_buckets(counted, summary.model or "")
        self.query(
            "UPDATE tiny_agent_sessions SET buckets = %s, buckets_lines = %s WHERE id = %s RETURNING 1",
            (kept_buckets(buckets), lines, summary.session),
        )
        return buckets

    def create(
        self, *, cwd: str, provider: str, model: str, environment_identity: str, durability: Durability = "fsync"
    ) -> JournalWriter:
        """A new session: its index row and header line committed together, its writer lock held."""
        header = new_header(cwd=cwd, provider=provider, model=model, environment_identity=environment_identity)
        line = encode_header(header)
        fold = Fold()
        fold.apply_header(line)

        def insert(conn: Connection) -> Fold:
            with conn.transaction():
                conn.execute(pgschema.INSERT_SESSION, index_row(header.id, fold, now_ms()))
                conn.execute(pgschema.INSERT_LINE, (header.id, 1, line))
            return fold

        return self._locked(header.id, durability, "cannot create a session", insert)

    def open_writer(self, session: Session, durability: Durability, note: Note | None = None) -> JournalWriter:
        """The session's one writer: its lock taken on a connection of its own, then its rows folded there."""
        if session.path is not None:
            return self.files.open_writer(session, durability, note)
        folded = self._checkpoints(note).fold if note is not None else fold_rows

        def fold(conn: Connection) -> Fold:
            fold = folded(session.id, conn)
            if fold.state.header.id != session.id:
                raise Misnamed(
                    f"the rows of session {session.id} start with the header of session {fold.state.header.id}; no "
                    f"writer opens it (appends meant for one session would land in another)"
                )
            return fold

        return self._locked(session.id, durability, f"cannot open session {session.id}", fold)

    def fold(self, session: Session, note: Note, *, lean: bool = False) -> Fold:
        """From the session's checkpoint row when one checks out (:mod:`tiny_agent.stores.postgres.checkpoints`; always
        whole: ``lean`` only for a journal file)."""
        if session.path is not None:
            return self.files.fold(session, note, lean=lean)
        return self._checkpoints(note).fold(session.id)

    def resumed(self, session: Session, note: Note) -> Fold | None:
        return self.files.resumed(session, note) if session.path is not None else self._checkpoints(note).resumed(session.id)

    def _checkpoints(self, note: Note) -> PgCheckpoints:
        from tiny_agent.stores.checkpoints import threshold_from
        from tiny_agent.stores.postgres.checkpoints import PgCheckpoints

        return PgCheckpoints(self, threshold=threshold_from(os.environ), note=note)

    def _locked(self, session_id: str, durability: Durability, what: str, prepare: Callable[[Connection], Fold]) -> JournalWriter:
        """A writer on a connection of its own, once the session's lock is taken there and ``prepare`` gave its fold."""
        conn = self.connect(writer=True, durability=durability)
        try:
            key = pgschema.lock_key(self.schema, session_id)
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row is None or not row[0]:
                holder = self.held_locks().get(pgschema.lock_parts(key)) or "another connection"
                raise SessionHeld(f"session {session_id} is being written by {holder}; only one writer may hold a session")
            fold = prepare(conn)
        except BaseException as error:
            conn.close()
            if isinstance(error, psycopg.Error):
                raise self.unavailable(what, error) from None
            raise
        appender = RowAppender(self, conn, session_id, fold.lines, key, lambda: writer.fold)
        writer = JournalWriter(appender, fold, reader=lambda: read_chunks(conn, session_id), continued=True)
        return writer

    def create_from(
        self, session_id: str, created: int, lines: Iterable[bytes], durability: Durability, label: str
    ) -> Session:
        """A new session holding exactly ``lines``, each folded on its way in (a refused one rolls everything back), in one
        transaction; the failpoint ``before-link:<label>`` kills the process with every row sent, nothing committed."""
        del created
        conn = self.connect(writer=True, durability=durability)
        fold = Fold()
        try:
            with conn.transaction():
                copied = iter(lines)
                header = next(copied, None)
                if header is None:
                    raise ValueError("a journal needs its header line")
                fold.apply_header(header)
                conn.execute(pgschema.INSERT_SESSION, index_row(session_id, fold, now_ms()))
                with conn.cursor() as cursor, cursor.copy(pgschema.COPY_LINES) as copy:
                    copy.set_types(["text", "int4", "bytea"])
                    copy.write_row((session_id, 1, header))
                    for number, line in enumerate(copied, start=2):
                        fold.apply_line(line)
                        copy.write_row((session_id, number, line))
                conn.execute(pgschema.UPDATE_SESSION, index_row(session_id, fold, now_ms()))
                failpoints.maybe_crash(f"before-link:{label}")
        except pg_errors.UniqueViolation:
            raise FileExistsError(errno.EEXIST, f"session {session_id} is already in {self.label}") from None
        except psycopg.Error as error:
            raise self.unavailable(f"cannot store session {session_id}", error) from None
        finally:
            conn.close()
        return self.session(session_id)


class RowAppender:
    """A PostgreSQL writer's end: each line one row, its index row updated in the same statement."""

    def __init__(self, store: PgStore, conn: Connection, session_id: str, lines: int, key: int, fold_of: Callable[[], Fold]):
        self.name = self._session_id = session_id
        self._store, self._conn, self._key, self._lines, self.fold_of = store, conn, key, lines, fold_of

    def append(self, data: bytes, label: str) -> None:
        failpoints.disk_full(label)
        number = self._lines + 1
        params = index_row(self._session_id, self.fold_of(), now_ms())
        params.update(number=number, data=data[:-1] if data.endswith(b"\n") else data)
        try:
            if failpoints.hit(f"mid-write:{label}"):
                # Killed with the row sent inside an open transaction: the server rolls it back when the connection drops.
                with self._conn.transaction():
                    self._conn.execute(pgschema.APPEND, params)
                    failpoints.crash()
            self._conn.execute(pgschema.APPEND, params)
        except pg_errors.UniqueViolation:
            raise LostRace(
                errno.EEXIST,
                f"line {number} of session {self._session_id} is already in the database (another writer appended it; "
                f"nothing was overwritten)",
            ) from None
        except psycopg.Error as error:
            raise OSError(errno.EIO, f"the database did not take line {number}: {self._store.detail(error)}") from None
        self._lines = number

    def close(self) -> None:
        """Release the session's lock first: the server ends a closed connection's backend (and its lock) a moment later,
        when a writer opened right after this one could still find the session held."""
        with contextlib.suppress(psycopg.Error):
            self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        self._conn.close()


def fold_rows(session_id: str, conn: Connection) -> Fold:
    return fold_chunks(read_chunks(conn, session_id))


def index_row(session_id: str, fold: Fold, updated: int) -> dict[str, object]:
    """The session's index row as the fold leaves it (every column the writer keeps)."""
    state = fold.state
    summary, header, origin, parent = summary_of(state), state.header, state.origin, state.parent
    usage = summary.usage
    return {
        "id": session_id, "tail": tail_of(session_id), "version": state.version, "created_at": header.createdAt,
        "updated_at": updated, "cwd": header.cwd, "provider": header.provider, "model": header.model,
        "status": summary.status, "reason": summary.reason, "runs": summary.runs, "prompt": summary.prompt,
        "input": usage.input, "output": usage.output, "cache_read": usage.cacheRead, "cache_write": usage.cacheWrite,
        "lines": fold.lines, "bytes": fold.committed_length, "chain": fold.chain if fold.version >= 3 else None,
        "origin_path": origin.path if origin is not None else None,
        "origin_length": origin.length if origin is not None else None,
        "origin_sha256": origin.sha256 if origin is not None else None,
        "parent_id": parent.session if parent is not None else None,
        "parent_line": parent.line if parent is not None else None,
        "parent_chain": parent.chain if parent is not None else None,
    }


def summary_from_row(row: tuple[Any, ...]) -> Summary:
    """An index row (:data:`tiny_agent.stores.postgres.schema.LISTED_COLUMNS`) as a listing's summary."""
    session, created, cwd, provider, model, status, reason, runs, prompt = row[:9]
    origin_path, origin_length, origin_sha256, parent_id, parent_line, parent_chain = row[13:19]
    summary = Summary(session, created, model, status, cwd, provider, runs, prompt, Usage(*row[9:13]), reason=reason)
    if origin_path is not None:
        summary.origin = Origin(path=origin_path, length=origin_length, sha256=origin_sha256)
    if parent_id is not None:
        summary.parent = Parent(session=parent_id, line=parent_line, chain=parent_chain)
    return summary
