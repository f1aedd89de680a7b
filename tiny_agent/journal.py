"""Journal files on disk: the streaming reader, the durable writer, the writer lock.

The reader folds a file chunk by chunk (memory stays at the size of the reduced
state, not the file).  The writer appends one transaction per line, each
checked by the same fold before its bytes are written, sealed (v3), written
with one ``write`` and, by default, fsynced before ``commit`` returns.

One writer per session, across processes: an exclusive ``flock`` on a lock
file beside the journal, held for the writer's lifetime.  The lock file holds
the holder's pid so that a second writer can say who has it.  Readers never
lock.
"""

from __future__ import annotations

import fcntl
import gc
import os
import signal
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import msgspec

from tiny_agent import failpoints
from tiny_agent.errors import CorruptionError, Locked, StorageError, TinyAgentError, UsageError
from tiny_agent.facts import (
    Fact,
    HeaderLine,
    RawFact,
    SealFact,
    decode_fact,
    encode_header,
    encode_seal_only,
    encode_transaction,
)
from tiny_agent.ids import now_ms, uuid7
from tiny_agent.reducer import Fold, reduce_chunks
from tiny_agent.state import SessionState

CHUNK_SIZE = 1 << 20
WRITER_VERSION = 3

Durability = Literal["fsync", "process"]
"""``fsync``: a committed transaction survives power loss.  ``process``: it survives
a crash of this process (the bytes are in the kernel), which is faster."""


class JournalError(UsageError):
    """A file that cannot be used as a journal for the reason given (one line, names the file)."""


class SessionLocked(Locked):
    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(f"{path.name} is being written by {holder}; only one writer may hold a session")
        self.path = path
        self.pid = pid


class CommitRejected(TinyAgentError):
    """The fold refused a candidate transaction; nothing was written (a bug in the writer's caller)."""

    def __init__(self, error: CorruptionError) -> None:
        super().__init__(f"refused to append an invalid transaction: {error}")
        self.error = error


class WriterPoisoned(StorageError):
    """A write or fsync failed: the file's tail is unknown, so this writer appends nothing more."""


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def read_journal(path: Path) -> SessionState:
    """Reduce the journal at ``path``; raises CorruptionError, or OSError if it cannot be read."""
    with open(path, "rb") as file, _collector_paused():
        return reduce_chunks(_chunks(file))


def _chunks(file) -> Iterator[bytes]:  # type: ignore[no-untyped-def]
    while True:
        chunk = file.read(CHUNK_SIZE)
        if not chunk:
            return
        yield chunk


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a fold builds state.

    The reduced state holds no reference cycles, but it does hold a growing
    number of containers, which generational collections would rescan again and
    again; pausing keeps the cost per fact flat as journals grow.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def fold_file(path: Path) -> tuple[Fold, int]:
    """A live fold of the committed lines of ``path`` and the file's size (torn tail included)."""
    with open(path, "rb") as file, _collector_paused():
        data_size = os.fstat(file.fileno()).st_size
        fold = Fold()
        state = reduce_chunks(_chunks(file), fold=fold)
    del state
    return fold, data_size


def committed_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of every committed line (the torn tail excluded), streaming."""
    with open(path, "rb") as file:
        number = 0
        carry = b""
        for chunk in _chunks(file):
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            for line in lines:
                number += 1
                yield number, line


def facts(path: Path) -> Iterator[tuple[int, list[Fact]]]:
    """Every transaction of a journal the reducer accepted, as typed facts with its line number."""
    for number, line in committed_lines(path):
        if number == 1:
            continue
        value = msgspec.json.decode(line)
        yield number, [decode_fact(fact) for fact in (value if isinstance(value, list) else [value])]


def raw_facts(path: Path) -> Iterator[tuple[int, RawFact]]:
    """Every ``raw`` fact of a (valid, v3) journal with its line number, in order."""
    for number, line in committed_lines(path):
        if number == 1 or b'"raw"' not in line:
            continue
        value = msgspec.json.decode(line)
        for fact in value if isinstance(value, list) else [value]:
            if isinstance(fact, dict) and fact.get("kind") == "raw":
                yield number, msgspec.convert(fact, RawFact)


def find_raw(path: Path, raw_id: str) -> RawFact | None:
    """The stored provider response with fact id ``raw_id``, read back from the journal."""
    needle = raw_id.encode()
    for _, line in committed_lines(path):
        if needle not in line:
            continue
        value = msgspec.json.decode(line)
        for fact in value if isinstance(value, list) else [value]:
            if isinstance(fact, dict) and fact.get("kind") == "raw" and fact.get("id") == raw_id:
                return msgspec.convert(fact, RawFact)
    return None


# --------------------------------------------------------------------------
# The writer lock
# --------------------------------------------------------------------------


def lock_path(journal: Path) -> Path:
    return journal.with_name(journal.name + ".lock")


class WriterLock:
    """An exclusive, non-blocking ``flock`` on ``<journal>.lock``, recording the holder's pid."""

    def __init__(self, journal: Path) -> None:
        self.path = lock_path(journal)
        self._journal = journal
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionLocked(self._journal, holder_pid(self._journal)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder_pid(journal: Path) -> int | None:
    """The pid written by the current lock holder, if the lock file says one."""
    try:
        text = lock_path(journal).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def is_locked(journal: Path) -> bool:
    """True while some writer holds the session (checked without taking it)."""
    try:
        fd = os.open(lock_path(journal), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


class JournalWriter:
    """The one writer of a session: commits checked, sealed, durable transactions."""

    def __init__(
        self,
        path: Path,
        fd: int,
        lock: WriterLock,
        fold: Fold,
        durability: Durability,
        clock: Callable[[], int],
    ) -> None:
        self.path = path
        self._fd = fd
        self._lock = lock
        self._fold = fold
        self._durability = durability
        self._clock = clock
        self._poisoned: str | None = None
        self._committed = False
        self.repaired_tail: Path | None = None

    # -- opening ----------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: Path,
        header: HeaderLine,
        *,
        durability: Durability = "fsync",
        clock: Callable[[], int] = now_ms,
    ) -> JournalWriter:
        """Create a new journal (0600, parent directory fsynced) and hold its lock.

        The header is written to a temporary file and linked into place, so a
        crash leaves either no journal or one with a complete header, never a
        file that no reader can open.
        """
        line = encode_header(header)
        fold = Fold()
        fold.apply_header(line)
        lock = WriterLock(path)
        lock.acquire()
        try:
            _link_new_file(path, line + b"\n")
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        except BaseException:
            lock.release()
            raise
        return cls(path, fd, lock, fold, durability, clock)

    @classmethod
    def open(
        cls, path: Path, *, durability: Durability = "fsync", clock: Callable[[], int] = now_ms
    ) -> JournalWriter:
        """Open an existing journal for appending: lock, reduce, and cut a torn tail into a sidecar."""
        _refuse_symlink(path)
        lock = WriterLock(path)
        lock.acquire()
        try:
            fold, size = fold_file(path)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        except BaseException:
            lock.release()
            raise
        writer = cls(path, fd, lock, fold, durability, clock)
        if size > fold.committed_length:
            try:
                writer.repaired_tail = _cut_torn_tail(path, fd, fold.committed_length)
            except BaseException:
                writer.close(seal=False)
                raise
        return writer

    # -- state --------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """The reduced state through the last commit (advances in place)."""
        return self._fold.state

    @property
    def fold(self) -> Fold:
        return self._fold

    # -- committing -----------------------------------------------------------

    def commit(self, facts: list[Fact], label: str = "transaction") -> list[Fact]:
        """Append one transaction; returns the facts as written (seq, timestamp, seal stamped).

        The candidate line goes through the fold before a byte is written: a
        refused transaction raises :class:`CommitRejected` and changes nothing.
        Ctrl-C is held off until the commit is complete, so the fold and the
        file never disagree.  ``label`` names the transaction for failpoints.
        """
        if self._poisoned is not None:
            raise WriterPoisoned(f"{self.path.name}: writer is unusable after an earlier failure: {self._poisoned}")
        if not facts:
            raise ValueError("a transaction needs at least one fact")
        with _signals_deferred():
            stamped = self._stamp(facts)
            line = encode_transaction(stamped)
            try:
                self._fold.apply_line(line)
            except CorruptionError as error:
                self._fold = fold_file(self.path)[0]
                raise CommitRejected(error) from None
            self._append(line + b"\n", label)
            self._committed = True
        failpoints.maybe_crash(f"after-commit:{label}")
        return stamped

    def _stamp(self, facts: list[Fact]) -> list[Fact]:
        timestamp = self._clock()
        seq = self._fold.next_seq
        stamped: list[Fact] = []
        for fact in facts:
            stamped.append(msgspec.structs.replace(fact, seq=seq, timestamp=timestamp, id=fact.id or uuid7(timestamp)))
            seq += 1
        if self._fold.version >= 3:
            stamped.append(SealFact(seq=seq, id=uuid7(timestamp), timestamp=timestamp, chain=self._fold.chain))
        return stamped

    def _append(self, data: bytes, label: str) -> None:
        try:
            if failpoints.hit(f"mid-write:{label}"):
                _write_all(self._fd, data[: len(data) // 2])
                failpoints.crash()
            _write_all(self._fd, data)
            if self._durability == "fsync":
                os.fsync(self._fd)
        except OSError as error:
            self._poisoned = f"{error.strerror or error} while appending"
            raise WriterPoisoned(f"{self.path.name}: {self._poisoned}; no further appends") from error

    # -- closing --------------------------------------------------------------

    def close(self, *, seal: bool = True) -> None:
        """Release the session; a clean close first appends a seal-only line covering the last line.

        Only a writer that appended something seals: opening a session and
        finding nothing to do (or a blocked recovery) writes nothing at all.
        """
        if self._fd < 0:
            return
        try:
            if seal and self._committed and self._poisoned is None and self._fold.version >= 3 and not self._fold.state.sealed:
                self.commit_seal()
        finally:
            os.close(self._fd)
            self._fd = -1
            self._lock.release()

    def commit_seal(self) -> None:
        timestamp = self._clock()
        seal = SealFact(seq=self._fold.next_seq, id=uuid7(timestamp), timestamp=timestamp, chain=self._fold.chain)
        line = encode_seal_only(seal)
        with _signals_deferred():
            self._fold.apply_line(line)
            self._append(line + b"\n", "seal")
        failpoints.maybe_crash("after-commit:seal")

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (then they are delivered)."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _link_new_file(path: Path, content: bytes) -> None:
    """Make ``path`` appear with ``content`` complete, or not at all (fails if it exists)."""
    staging = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(staging, path)
    finally:
        os.unlink(staging)
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _refuse_symlink(path: Path) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise JournalError(f"{path}: is a symbolic link; journals are only opened directly")
    if not stat.S_ISREG(info.st_mode):
        raise JournalError(f"{path}: is not a regular file")


def torn_tail_path(journal: Path, stamp: int) -> Path:
    return journal.with_name(f"{journal.name}.torn-{stamp}")


def _cut_torn_tail(path: Path, fd: int, committed_length: int) -> Path:
    """Move the bytes after the last LF into a sidecar file, then truncate the journal to them."""
    with open(path, "rb") as file:
        file.seek(committed_length)
        tail = file.read()
    sidecar = torn_tail_path(path, now_ms())
    side_fd = os.open(sidecar, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _write_all(side_fd, tail)
        os.fsync(side_fd)
    finally:
        os.close(side_fd)
    os.ftruncate(fd, committed_length)
    os.fsync(fd)
    _fsync_directory(path.parent)
    return sidecar
