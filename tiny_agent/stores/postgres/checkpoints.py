"""Checkpoints of sessions kept in PostgreSQL: the file store's checkpoints (:mod:`tiny_agent.stores.checkpoints`) as one
row of ``tiny_agent_checkpoints`` per session, keyed by the digest of the lines it folded (docs/service.md, *Reading at
scale*): used only when every check passes, else a note says why and the session is folded from line 1."""

from __future__ import annotations

import hashlib
import os

import msgspec
import psycopg

from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import reduce_chunks
from tiny_agent.journal.ids import now_ms
from tiny_agent.stores import checkpoints
from tiny_agent.stores.base import Note
from tiny_agent.stores.checkpoints import DEFAULT_THRESHOLD, Unusable, silent
from tiny_agent.stores.digests import PrefixDigest, hashed
from tiny_agent.stores.journal import collector_paused
from tiny_agent.stores.postgres import schema as pgschema
from tiny_agent.stores.postgres.database import BATCH_ROWS, Connection, Database, read_chunks

# tiny_agent.fold.snapshot is imported where a checkpoint is read or written: a small session should not pay to load it.


Resumed = tuple[Fold, "hashlib._Hash"]


class StoredCheckpoint(msgspec.Struct, frozen=True):
    """A session's checkpoint row."""

    format: int
    fold: str
    lines: int
    length: int
    prefix: str
    """``sha256:<hex>`` of the session's first ``lines`` lines, each with its LF."""
    body: str
    """``sha256:<hex>`` of ``snapshot``."""
    snapshot: bytes


class PgCheckpoints:
    """The checkpoints of one PostgreSQL store's sessions."""

    def __init__(self, store: Database, *, threshold: int = DEFAULT_THRESHOLD, note: Note = silent) -> None:
        self.store = store
        self.threshold = threshold
        self._note = note

    def fold(self, session_id: str, conn: Connection | None = None) -> Fold:
        """A live fold of the session's rows, from its checkpoint when one checks out; ``conn`` is a writer's own (its lock
        held), by default the store's reading one.  Raises CorruptionError as a full fold does, or StoreUnavailable."""
        reading = conn if conn is not None else self.store.reader()
        try:
            with collector_paused():
                return self._fold(reading, session_id)
        except psycopg.Error as error:
            raise self.store.unavailable(f"reading session {session_id} failed", error) from None

    def resumed(self, session_id: str) -> Fold | None:
        """The fold the session's checkpoint holds, once every check passed; None otherwise (with a note if it failed one).
        For a reader of every line anyway (``audit``): it writes no checkpoint of its own."""
        conn = self.store.reader()
        with collector_paused():
            start = self._start(conn, session_id)[1]
        return None if start is None else start[0]

    def _fold(self, conn: Connection, session_id: str) -> Fold:
        size, start = self._start(conn, session_id)
        if start is None:
            fold = Fold()
            # Hashing costs a tenth of a fold: only a session big enough to leave a checkpoint pays for it
            # (and none whose checkpoint could not even be read: writing it would fail the same way).
            prefix = PrefixDigest(hashlib.sha256()) if size is not None and size >= self.threshold else None
        else:
            fold, prefix = start[0], PrefixDigest(start[1], start[0].committed_length)
        offset = fold.committed_length
        reduce_chunks(hashed(read_chunks(conn, session_id, fold.lines), prefix), fold)
        if prefix is not None and fold.committed_length - offset >= self.threshold:
            self._save(conn, session_id, fold, prefix)
        return fold

    def _start(self, conn: Connection, session_id: str) -> tuple[int | None, Resumed | None]:
        """The session's length as its index row says (None if unreadable), and its checkpoint's fold once every check
        passed (None without one, or with a note saying why it is not used)."""
        size = None
        try:
            row = conn.execute(pgschema.CHECKPOINT_OF, (session_id,)).fetchone()
            if row is None:
                return 0, None
            size, stored = int(row[0]), row[1:]
            if any(value is None for value in stored):
                return size, None
            format_, fold, lines, length, prefix, body, snapshot = stored
            return size, _resumed(conn, session_id, StoredCheckpoint(format_, fold, lines, length, prefix, body, bytes(snapshot)))
        except Unusable as unusable:
            reason = str(unusable)
        except psycopg.Error as error:
            reason = f"cannot be read ({self.store.detail(error, error.diag.message_primary)})"
        self._note(f"checkpoint of session {session_id} {reason}; folding the whole session")
        return size, None

    def _save(self, conn: Connection, session_id: str, fold: Fold, prefix: PrefixDigest) -> None:
        """Write or replace the session's checkpoint; a fold that cannot be stored, or a refused write, only costs speed."""
        from tiny_agent.fold.snapshot import SNAPSHOT_FORMAT, SnapshotRefused, capture, encode_snapshot

        identity = checkpoints.fold_identity()
        # Rows that hold another session's header would never pass the check on the way back.
        if identity is None or prefix.length != fold.committed_length or fold.state.header.id != session_id:
            return
        try:
            snapshot = encode_snapshot(capture(fold))
        except SnapshotRefused:
            return  # tool arguments JSON cannot carry back exactly: this session is folded in full, as before
        row = {
            "session_id": session_id,
            "format": SNAPSHOT_FORMAT,
            "fold": identity,
            "lines": fold.lines,
            "bytes": fold.committed_length,
            "prefix": prefix.value(),
            "body": "sha256:" + hashlib.sha256(snapshot).hexdigest(),
            "snapshot": snapshot,
            "made_at": now_ms(),
        }
        try:
            with conn.transaction():
                conn.execute(pgschema.SAVE_CHECKPOINT, row)
        except psycopg.Error as error:
            detail = self.store.detail(error, error.diag.message_primary)
            self._note(f"checkpoint of session {session_id} was not written ({detail})")


def _resumed(conn: Connection, session_id: str, stored: StoredCheckpoint) -> Resumed:
    """The fold a checkpoint holds and the digest of its lines (to extend over the rows after them), once every check
    passed; raises :class:`Unusable` or psycopg.Error."""
    from tiny_agent.fold.snapshot import SNAPSHOT_FORMAT, SnapshotInvalid, decode_snapshot, restore

    identity = checkpoints.fold_identity()
    if identity is None:
        raise Unusable("cannot be checked (the fold's source is unreadable)")
    if stored.format != SNAPSHOT_FORMAT or stored.fold != identity:
        raise Unusable("was made by another version of tiny-agent")
    if "sha256:" + hashlib.sha256(stored.snapshot).hexdigest() != stored.body:
        raise Unusable("is corrupt (its snapshot's digest differs)")
    digest, lines, length = _prefix_digest(conn, session_id, stored.lines)
    if lines < stored.lines:
        raise Unusable(f"covers {stored.lines} lines but the session has {lines} (truncated or replaced?)")
    if length != stored.length or "sha256:" + digest.hexdigest() != stored.prefix:
        raise Unusable(f"does not match the session (its first {stored.lines} lines changed)")
    try:
        fold = restore(decode_snapshot(stored.snapshot))
    except SnapshotInvalid as invalid:
        raise Unusable(f"is corrupt ({invalid})") from None
    if fold.committed_length != stored.length or fold.lines != stored.lines or fold.state.header.id != session_id:
        raise Unusable("is corrupt (its key and its snapshot disagree)")
    return fold, digest


def _prefix_digest(conn: Connection, session_id: str, lines: int) -> tuple[hashlib._Hash, int, int]:
    """SHA-256 of the session's first ``lines`` lines, each with its LF (streamed), with how many there were and their length."""
    digest = hashlib.sha256()
    count = length = 0
    with conn.transaction(), conn.cursor(name=f"tiny_agent_prefix_{os.getpid()}", binary=True) as cursor:
        cursor.itersize = BATCH_ROWS
        cursor.execute(pgschema.READ_LINES_THROUGH, (session_id, lines))
        for (data,) in cursor:
            digest.update(data)
            digest.update(b"\n")
            count += 1
            length += len(data) + 1
    return digest, count, length
