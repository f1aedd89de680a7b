"""Journal files on one machine: their names, the writer's lock, appending, and files that appear whole or not at all.

Every file made here is 0600, and none is left behind by a failure (docs/agent.md, *The writer*; docs/journal.md).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from tiny_agent.errors import Locked, NotFound, UsageError, os_error
from tiny_agent.stores import failpoints

CHUNK_SIZE: Final = 1 << 20
HEADER_PROBE: Final = 64 * 1024
"""How much of a file is read to tell whether it starts like a journal."""

_JOURNAL_NAME = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)_(?P<id>[0-9a-f-]{36})\.jsonl")
_READ_ONLY: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


class NotAJournal(UsageError):
    """A path that is not a journal file (a directory, a symbolic link, a FIFO, something else)."""


class SessionLocked(Locked):
    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(f"{path.name} is being written by {holder}; only one writer may hold a session")
        self.pid = pid


def journal_name(session_id: str, created_ms: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(created_ms / 1000))
    return f"{stamp}_{session_id}.jsonl"


def session_id_of(path: Path) -> str | None:
    match = _JOURNAL_NAME.fullmatch(path.name)
    return match.group("id") if match else None


def list_journals(directory: Path) -> list[Path]:
    """Journals directly in ``directory``, newest first (symbolic links and non-files skipped; none if it is not there)."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise os_error(error, f"sessions directory {directory}") from None
    found = [Path(entry.path) for entry in entries if _JOURNAL_NAME.fullmatch(entry.name) and _is_plain_file(entry)]
    return sorted(found, key=lambda path: path.name, reverse=True)


def _is_plain_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def open_regular(path: Path, flags: int = 0) -> int:
    """A blocking read descriptor on a regular file (never a FIFO or a device, which could hang or be endless)."""
    fd = os.open(path, _READ_ONLY | flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAJournal(f"{path}: not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def file_chunks(path: Path) -> Iterator[bytes]:
    """The file's bytes in large chunks."""
    fd = open_regular(path)
    try:
        while chunk := os.read(fd, CHUNK_SIZE):
            yield chunk
    finally:
        os.close(fd)


def check_journal_file(path: Path) -> None:
    """Refuse a path that is not a regular file (no link) starting like a journal before a lock file is made beside it
    (say, beside ``/etc/passwd``); the reducer checks the header in full later."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise NotFound(f"{path}: no such journal file") from None
    if stat.S_ISLNK(info.st_mode):
        raise NotAJournal(f"{path}: is a symbolic link; journals are only opened directly")
    if stat.S_ISDIR(info.st_mode):
        raise NotAJournal(f"{path}: is a directory, not a journal")
    if not stat.S_ISREG(info.st_mode):
        raise NotAJournal(f"{path}: is not a regular file")
    with open(path, "rb") as file:
        head = file.read(HEADER_PROBE)
    first = head.split(b"\n", 1)[0].lstrip(b" \t")
    if not first.startswith(b"{") or b'"header"' not in first:
        raise NotAJournal(f"{path}: does not start with a journal header line")


def lock_path(journal: Path) -> Path:
    return journal.with_name(journal.name + ".lock")


class WriterLock:
    """An exclusive, non-blocking ``flock`` on ``<journal>.lock``, recording the holder's pid; removed on release, which
    is safe because a process that locked a file someone just removed (the path names another) tries again."""

    def __init__(self, journal: Path) -> None:
        self.path = lock_path(journal)
        self._journal = journal
        self._fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SessionLocked(self._journal, holder_pid(self._journal)) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            # A full or read-only disk: the lock is useless to a session that cannot be written; leave nothing behind.
            self.release()
            raise

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def holder_pid(journal: Path) -> int | None:
    """The pid written by the current lock holder, if the lock file says one."""
    try:
        text = lock_path(journal).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def is_locked(journal: Path) -> bool:
    """True while some writer holds the session (checked without taking it)."""
    try:
        fd = os.open(lock_path(journal), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        if error.errno == errno.ELOOP:
            return False
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def file_holder(path: Path) -> str | None:
    """``pid N`` while a writer holds the journal (empty if its lock file names none); None when nobody does."""
    if not is_locked(path):
        return None
    pid = holder_pid(path)
    return f"pid {pid}" if pid else ""


class FileAppender:
    """The file store's end of a writer: whole lines appended with one ``write``, fsynced when asked."""

    def __init__(self, path: Path, fd: int, lock: WriterLock, fsync: bool) -> None:
        self.path = path
        self.name = path.name
        self._fd = fd
        self._lock = lock
        self._fsync = fsync

    def append(self, data: bytes, label: str) -> None:
        failpoints.disk_full(label)
        if failpoints.hit(f"mid-write:{label}"):
            write_all(self._fd, data[: len(data) // 2])
            failpoints.crash()
        write_all(self._fd, data)
        if self._fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            os.close(self._fd)
        finally:
            self._fd = -1
            self._lock.release()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def create_file(path: Path, content: bytes) -> tuple[int, WriterLock]:
    """Make ``path`` appear with ``content`` complete, or not at all (nor its lock); an append descriptor and the held lock."""
    return _locked(path, os.O_WRONLY, lambda: publish_file(path, (content,), True, "create"))


def open_for_append(path: Path) -> tuple[int, WriterLock]:
    """Lock an existing journal and open it for appending (after :func:`check_journal_file`)."""
    return _locked(path, os.O_RDWR, lambda: None)


def _locked(path: Path, mode: int, before: Callable[[], None]) -> tuple[int, WriterLock]:
    lock = WriterLock(path)
    lock.acquire()
    try:
        before()
        fd = os.open(path, mode | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except BaseException:
        lock.release()
        raise
    return fd, lock


def publish_file(path: Path, chunks: Iterable[bytes], fsync: bool, label: str) -> None:
    """Make ``path`` (0600) appear holding ``chunks`` complete, or not at all (nothing if ``chunks`` raises); never over
    a file (FileExistsError).  A crash (failpoint ``before-link:<label>``) leaves only the hidden staging file."""
    staging = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            pending = bytearray()  # about a megabyte per write: one write per journal line would cost a call per line
            for chunk in chunks:
                pending += chunk
                if len(pending) >= CHUNK_SIZE:
                    write_all(fd, bytes(pending))
                    pending.clear()
            write_all(fd, bytes(pending))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        failpoints.maybe_crash(f"before-link:{label}")
        os.link(staging, path)
    finally:
        staging.unlink(missing_ok=True)
    if fsync:
        fsync_directory(path.parent)


def make_private(fd: int) -> int | None:
    """Reset a journal to 0600 (as the reference store does on reopen); the mode it had, if it changed."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode == 0o600:
        return None
    os.fchmod(fd, 0o600)
    return mode


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cut_torn_tail(path: Path, fd: int, committed_length: int, stamp: int) -> Path | None:
    """Move the bytes after the last LF into a sidecar ``<journal>.torn-<stamp>`` (complete and on disk first, so they
    are never in neither place), then cut the journal to its lines."""
    size = os.fstat(fd).st_size
    if size <= committed_length:
        return None
    sidecar = path.with_name(f"{path.name}.torn-{stamp}")
    publish_file(sidecar, (os.pread(fd, size - committed_length, committed_length),), True, "torn-tail")
    os.ftruncate(fd, committed_length)
    os.fsync(fd)
    return sidecar
