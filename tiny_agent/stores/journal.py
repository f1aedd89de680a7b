"""Journals, whatever store holds them: reading them chunk by chunk, and :class:`JournalWriter`, a session's one writer
(docs/agent.md, *The writer*).  ``JournalWriter.create`` / ``.open`` and the path-based readers are the file store's."""

from __future__ import annotations

import gc
import os
import signal
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, Protocol

import msgspec

from tiny_agent.errors import BlockedError, CorruptionError, Misnamed, StorageError, TinyAgentError
from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import LineSplitter, reduce_chunks
from tiny_agent.journal.facts import (
    Fact,
    HeaderLine,
    RawFact,
    RecordFact,
    SealFact,
    StepAttempt,
    decode_fact,
    encode_header,
    encode_seal_only,
    encode_transaction,
)
from tiny_agent.journal.ids import now_ms, uuid7
from tiny_agent.journal.secrets import redact_facts
from tiny_agent.journal.state import Header, SessionState
from tiny_agent.stores import failpoints
from tiny_agent.stores.files import disk

WRITER_VERSION = 3

Durability = Literal["fsync", "process"]
"""What a committed transaction survives: power loss, or a crash of this process (docs/agent.md, *The writer*)."""


def new_header(*, cwd: str, provider: str, model: str, environment_identity: str) -> HeaderLine:
    """The header line of a session made now, in this writer's version, under a new time-ordered id."""
    created = now_ms()
    return HeaderLine(
        version=WRITER_VERSION,
        id=uuid7(created),
        createdAt=created,
        cwd=cwd,
        provider=provider,
        model=model,
        environmentIdentity=environment_identity,
    )


class CommitRejected(TinyAgentError):
    """The fold refused a candidate transaction; nothing was written (a bug in the writer's caller)."""

    def __init__(self, error: CorruptionError) -> None:
        super().__init__(f"refused to append an invalid transaction: {error}")
        self.error = error


class WriterPoisoned(StorageError):
    """An append failed: the journal's tail is unknown, so this writer appends nothing more."""


class ModelCallRefused(BlockedError):
    """A model attempt in a journal that cannot record the model's response (v2): refused before it is written."""


class SessionMisnamed(Misnamed):
    """The file is named for one session and its header is another's: a writer would append to the wrong session."""

    def __init__(self, path: Path, header_id: str, named_id: str) -> None:
        super().__init__(
            f"{path.name} is named for session {named_id} but its header is session {header_id}; no writer opens it "
            f"(appends meant for one session would land in another): give it a name ending in _{header_id}.jsonl"
        )


def cannot_record_responses(path: Path, *, operation_open: bool = True) -> str:
    """Why a v2 journal is not continued with a model call, and the remedies (one line)."""
    abort = f" (or `tiny-agent resume {path} --abort` closes its open run without the model)" if operation_open else ""
    return (
        f"{path.name} is a v2 journal, which cannot record the model's response (v2 has no raw facts), so no model "
        f"call was made: `tiny-agent upgrade {path}` continues it in a new v3 session and leaves the v2 file as it is{abort}"
    )


class Appender(Protocol):
    """A store's end of one session's writer: appends whole committed lines (with their LF), durably, in order."""

    name: str
    """How messages name the session's journal (a file name, a store reference)."""

    def append(self, data: bytes, label: str) -> None: ...

    def close(self) -> None:
        """Release the session (its lock, its connection)."""


# -- reading ------------------------------------------------------------------------


def reduce_source(chunks: Iterable[bytes]) -> SessionState:
    """Reduce a journal given as consecutive byte chunks, from any store."""
    with collector_paused():
        return reduce_chunks(chunks)


def fold_chunks(chunks: Iterable[bytes]) -> Fold:
    """A live fold of a journal's committed lines, for a writer to continue."""
    with collector_paused():
        fold = Fold()
        reduce_chunks(chunks, fold=fold)
    return fold


def fold_file(path: Path) -> Fold:
    """A live fold of every committed line of the journal file at ``path``."""
    return fold_chunks(disk.file_chunks(path))


def fold_spilled(path: Path, counted: Callable[[int], None] | None = None) -> Fold:
    """The fold of the journal file at ``path`` for a reader of its whole transcript: its older messages stay in the
    file and are read back from their lines when asked for (:mod:`tiny_agent.fold.spilled`), so a long journal is folded
    and then printed, in two reads, holding the fold's books and not its transcript.  ``counted`` is told the length of
    each chunk read."""
    fd = disk.open_regular(path)
    try:
        fold = Fold()
        splitter = LineSplitter(fold)
        feed = _spilling(splitter, fold, _LinesAt(fd))
        with collector_paused():
            while chunk := os.read(fd, disk.CHUNK_SIZE):
                if counted is not None:
                    counted(len(chunk))
                feed(chunk)
            splitter.finish()
    finally:
        os.close(fd)
    return fold


def _spilling(splitter: LineSplitter, fold: Fold, line_at: Callable[[int], bytes]) -> Callable[[bytes], None]:
    """A feed for ``splitter`` (folding into ``fold`` from the journal's start) whose fold leaves its older messages in
    the journal (:func:`~tiny_agent.fold.spilled.spill`) from the line after the header on."""
    from tiny_agent.fold.spilled import spill

    waiting = True

    def feed(chunk: bytes) -> None:
        nonlocal waiting
        first = chunk.find(b"\n") if waiting else -1
        if first != -1:
            splitter.feed(chunk[: first + 1])  # the header, then the state spills
            waiting = False
            if not splitter.failed:
                spill(fold, line_at)
            chunk = chunk[first + 1 :]
        splitter.feed(chunk)

    return feed


def lines_at(path: Path) -> Callable[[int], bytes]:
    """The committed lines of the journal file at ``path`` by the offset they start at (its own descriptor, closed
    when the reader is let go)."""
    fd = disk.open_regular(path)
    try:
        return _LinesAt(fd)
    finally:
        os.close(fd)


class _LinesAt:
    """A journal's committed lines by the offset they start at, read a block at a time (reading on is the usual case)."""

    BLOCK = 1 << 20

    def __init__(self, fd: int) -> None:
        self._fd = os.dup(fd)
        weakref.finalize(self, os.close, self._fd)
        self._block = b""
        self._start = 0

    def __call__(self, offset: int) -> bytes:
        at = offset - self._start
        end = self._block.find(b"\n", at) if 0 <= at < len(self._block) else -1
        if end == -1:
            self._block, self._start, at = self._read(offset), offset, 0
            end = self._block.find(b"\n")
        return self._block[at:end]

    def _read(self, offset: int) -> bytes:
        """The bytes from ``offset`` through at least one LF."""
        pieces: list[bytes] = []
        try:
            while True:
                piece = os.pread(self._fd, self.BLOCK, offset)
                if not piece:
                    raise StorageError(f"the journal changed while it was read: no line ends after byte {offset}")
                pieces.append(piece)
                if b"\n" in piece:
                    return b"".join(pieces)
                offset += len(piece)
        except OSError as error:
            raise StorageError(f"the journal cannot be read again ({error.strerror or error})") from None


class LineSpool(_LinesAt):
    """Lines kept in an unnamed temporary file (0600, gone when closed) as they are made, read back by the offset they
    start at: what a journal's copy checks its new lines against (:class:`~tiny_agent.oversight.lineage.Spool`)."""

    def __init__(self) -> None:
        with tempfile.TemporaryFile() as file:
            super().__init__(file.fileno())

    def keep(self, line: bytes) -> None:
        try:
            disk.write_all(self._fd, line + b"\n")
        except OSError as error:
            raise StorageError(f"the copy's lines cannot be kept in a temporary file ({error.strerror or error})") from None


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a fold builds state: the state has no cycles, but a growing number of
    containers that generational collections would rescan again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def lines_of(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of every committed line (the torn tail excluded), streaming; a line spanning many chunks
    is joined once, not copied per chunk."""
    number = 0
    pieces: list[bytes] = []
    for chunk in chunks:
        start = 0
        end = chunk.find(b"\n")
        while end != -1:
            if pieces:
                pieces.append(chunk[start:end])
                line = b"".join(pieces)
                pieces = []
            else:
                line = chunk[start:end]
            number += 1
            yield number, line
            start = end + 1
            end = chunk.find(b"\n", start)
        if start < len(chunk):
            pieces.append(chunk[start:])


def intact_header(chunks: Iterable[bytes]) -> Header | None:
    """The journal's header when its first line is a valid one (a corrupt journal's listing shows it), else None."""
    for _, line in lines_of(chunks):
        fold = Fold()
        try:
            fold.apply_header(line)
        except CorruptionError:
            return None
        return fold.state.header
    return None


def facts_of(chunks: Iterable[bytes], holding: bytes | None = None) -> Iterator[tuple[int, list[Fact]]]:
    """Every transaction of a journal the reducer accepted, as typed facts with its line number; given ``holding``
    (a member's name, ASCII letters), only those of lines that may hold it: spelt out, or in ``\\u`` escapes, the
    only other way JSON can spell a letter (the rest are not decoded: a fraction of the time)."""
    for number, line in lines_of(chunks):
        if number == 1 or (holding is not None and holding not in line and b"\\u" not in line):
            continue
        value = msgspec.json.decode(line)
        yield number, [decode_fact(fact) for fact in (value if isinstance(value, list) else [value])]


class CheckedFacts:
    """One read of a journal for the reducer and a reader of its facts: ``(line number, typed facts)`` of a transaction
    only once the fold accepted its line, then :meth:`finish`; lines ``fold`` already holds (a checkpoint's) are not
    folded again."""

    def __init__(self, chunks: Iterable[bytes], fold: Fold | None = None, line_at: Callable[[int], bytes] | None = None) -> None:
        """``line_at``: the journal's line at an offset, for a fold from its start that leaves its older messages there
        (:func:`fold_spilled`; a reader of the facts needs the fold's verdict and books, not its transcript)."""
        self._chunks = chunks
        folding = Fold() if fold is None else fold
        self._splitter = LineSplitter(folding)
        self._folded = 0 if fold is None else fold.committed_length
        self._spilling = None if fold is not None or line_at is None else _spilling(self._splitter, folding, line_at)

    def __iter__(self) -> Iterator[tuple[int, list[Fact]]]:
        return facts_of(self._folded_first())

    def finish(self) -> SessionState:
        return self._splitter.finish()

    def _folded_first(self) -> Iterator[bytes]:
        chunks = iter(self._chunks)
        splitter = self._splitter
        offset = 0
        for chunk in chunks:
            offset += len(chunk)
            if self._spilling is not None:
                self._spilling(chunk)
            elif offset > self._folded:
                splitter.feed(chunk[max(0, len(chunk) - (offset - self._folded)) :])
            if splitter.failed:
                for rest in chunks:
                    splitter.feed(rest)
                splitter.finish()
            yield chunk


def raw_facts(path: Path) -> Iterator[tuple[int, RawFact]]:
    """Every ``raw`` fact of a (valid, v3) journal file with its line number, in order."""
    return ((number, fact) for number, facts in facts_of(disk.file_chunks(path)) for fact in facts if type(fact) is RawFact)


def find_raw_in(chunks: Iterable[bytes], raw_id: str) -> RawFact | None:
    """The stored provider response with fact id ``raw_id`` (only lines holding the id are decoded)."""
    needle = raw_id.encode()
    for _, line in lines_of(chunks):
        if needle in line:
            value = msgspec.json.decode(line)
            for fact in value if isinstance(value, list) else [value]:
                if fact.get("kind") == "raw" and fact.get("id") == raw_id:
                    return msgspec.convert(fact, RawFact)
    return None


def read_journal(path: Path) -> SessionState:
    """Reduce the journal file at ``path``; raises CorruptionError, or OSError if it cannot be read."""
    return reduce_source(disk.file_chunks(path))


def committed_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    return lines_of(disk.file_chunks(path))


# -- writing ------------------------------------------------------------------------


class JournalWriter:
    """The one writer of a session: commits checked, sealed, durable transactions, one at a time across threads."""

    def __init__(
        self,
        appender: Appender,
        fold: Fold,
        clock: Callable[[], int] = now_ms,
        path: Path | None = None,
        *,
        reader: Callable[[], Iterable[bytes]] | None = None,
        continued: bool = False,
    ) -> None:
        """``reader`` gives the journal's committed bytes (by default, the file at ``path``); ``continued``: a journal opened
        to be continued, whose writer refuses to start a model attempt if it is v2 (it cannot record the response)."""
        self._appender = appender
        self.fold = fold
        """The live fold through the last commit (folded again after a refused candidate)."""
        self._clock = clock
        self._reader = reader
        self._poisoned: str | None = None
        self._committed = False
        self._closed = False
        self._mutex = threading.RLock()
        self.path = path if path is not None else Path(appender.name)
        """The journal's file (file store) or a path-like name for messages (other stores)."""
        refused = continued and "raw" not in fold.profile.fact_kinds
        self._attempts_refused = cannot_record_responses(self.path) if refused else None
        """Why a transaction starting a model attempt is refused (a v2 journal opened to be continued)."""
        self.repaired_tail: Path | None = None
        self.tightened_mode: int | None = None
        """The permission bits a reopened journal had before it was reset to 0600."""

    @property
    def name(self) -> str:
        return self._appender.name

    @property
    def state(self) -> SessionState:
        """The reduced state through the last commit (advances in place)."""
        return self.fold.state

    def chunks(self) -> Iterable[bytes]:
        """The journal's committed bytes as its store holds them (what a writer reads back, e.g. a stored response)."""
        return self._reader() if self._reader is not None else disk.file_chunks(self.path)

    @classmethod
    def create(
        cls, path: Path, header: HeaderLine, *, durability: Durability = "fsync", clock: Callable[[], int] = now_ms
    ) -> JournalWriter:
        """Create a new journal file (0600, directory fsynced, linked into place whole) and hold its lock."""
        line = encode_header(header)
        fold = Fold()
        fold.apply_header(line)
        fd, lock = disk.create_file(path, line + b"\n")
        return cls(disk.FileAppender(path, fd, lock, durability == "fsync"), fold, clock, path)

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        durability: Durability = "fsync",
        clock: Callable[[], int] = now_ms,
        folder: Callable[[Path], Fold] | None = None,
        session_id: str | None = None,
    ) -> JournalWriter:
        """Open a journal file for appending: check it, lock it, fold it (by ``folder``: from its checkpoint), refuse a
        header of another session than ``session_id``, then cut a torn tail into a sidecar; a v2 journal's writer refuses
        to start a model attempt (the response would be paid for and lost)."""
        disk.check_journal_file(path)
        fd, lock = disk.open_for_append(path)
        appender = disk.FileAppender(path, fd, lock, durability == "fsync")
        try:
            fold = (folder or fold_file)(path)
            header_id = fold.state.header.id
            if session_id is not None and header_id != session_id:
                raise SessionMisnamed(path, header_id, session_id)
            writer = cls(appender, fold, clock, path, continued=True)
            writer.repaired_tail = disk.cut_torn_tail(path, fd, fold.committed_length, now_ms())
            writer.tightened_mode = disk.make_private(fd)
        except BaseException:
            appender.close()
            raise
        return writer

    def commit(self, facts: list[Fact], label: str = "transaction") -> list[Fact]:
        """Append one transaction, redacted and folded before a byte is written (docs/agent.md, *The writer*); returns the
        facts as written.  ``label`` names it for failpoints."""
        if not facts:
            raise ValueError("a transaction needs at least one fact")
        with self._mutex:
            self._check_usable()
            if self._attempts_refused is not None and _starts_attempt(facts):
                raise ModelCallRefused(self._attempts_refused)
            with _signals_deferred():
                timestamp = self._clock()
                stamped: list[Fact] = [
                    msgspec.structs.replace(fact, seq=seq, timestamp=timestamp, id=fact.id or uuid7(timestamp))
                    for seq, fact in enumerate(redact_facts(facts), start=self.fold.next_seq)
                ]
                if self.fold.version >= 3:
                    stamped.append(self._seal(timestamp, self.fold.next_seq + len(stamped)))
                self._write(encode_transaction(stamped), label)
        failpoints.maybe_crash(f"after-commit:{label}")
        return stamped

    def commit_seal(self) -> None:
        """Append a seal-only line covering the last line (a clean close, or ``resume`` sealing an idle tail)."""
        with self._mutex:
            self._check_usable()
            with _signals_deferred():
                self._write(encode_seal_only(self._seal(self._clock(), self.fold.next_seq)), "seal")
        failpoints.maybe_crash("after-commit:seal")

    def _seal(self, timestamp: int, seq: int) -> SealFact:
        return SealFact(seq=seq, id=uuid7(timestamp), timestamp=timestamp, chain=self.fold.chain)

    def _check_usable(self) -> None:
        if self._closed:
            raise ValueError(f"{self.name}: the writer is closed")
        if self._poisoned is not None:
            raise WriterPoisoned(f"{self.name}: writer is unusable after an earlier failure: {self._poisoned}")

    def _write(self, line: bytes, label: str) -> None:
        """Fold the line, then append it; a refused line spent the fold (it may be half applied): fold the journal again."""
        try:
            self.fold.apply_line(line)
        except CorruptionError as error:
            self.fold = fold_chunks(self.chunks())
            raise CommitRejected(error) from None
        try:
            self._appender.append(line + b"\n", label)
        except OSError as error:
            self._poisoned = f"{error.strerror or error} while appending"
            raise WriterPoisoned(f"{self.name}: {self._poisoned}; nothing more is appended") from error
        self._committed = True

    def close(self, *, seal: bool = True) -> None:
        """Release the session; a clean close of a v3 journal this writer changed first seals its last line (a seal that
        cannot be written raises :class:`WriterPoisoned` once the session is released)."""
        with self._mutex:
            if self._closed:
                return
            try:
                if seal and self._poisoned is None and self.fold.version >= 3 and self._committed and not self.state.sealed:
                    self.commit_seal()
            finally:
                self._closed = True
                self._appender.close()

    def seal_missing_on_idle(self) -> bool:
        """Seal an idle v3 journal whose last line is not covered (a crash, or a full disk, at the closing seal); whether a
        seal was appended."""
        with self._mutex:
            fold = self.fold
            if fold.version < 3 or fold.state.sealed or fold.lines < 2:
                return False
            self.commit_seal()
            return True

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _starts_attempt(facts: list[Fact]) -> bool:
    return any(type(fact) is RecordFact and type(fact.record) is StepAttempt for fact in facts)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (then they are delivered); per thread, harmless off the main one."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
