"""Digests of a journal's bytes that prove a checkpoint still describes it: the whole committed prefix as it streams
past (:class:`PrefixDigest`), a prefix hashed in a thread while a snapshot decodes (:class:`Hashing`), or only its
edges (:func:`edges_digest`). Imports only the standard library and ``stores.files.disk``."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Iterator
from typing import Final

from tiny_agent.stores.files.disk import CHUNK_SIZE

EDGE: Final = 64 << 10
"""The prefix's edges the next turn hashes instead of the whole: its first and its last 64 KiB."""


def edges_digest(fd: int, length: int) -> str:
    """SHA-256 of the first and the last :data:`EDGE` bytes of the journal's first ``length`` (they may overlap)."""
    head = os.pread(fd, min(EDGE, length), 0)
    last = os.pread(fd, min(EDGE, length), max(0, length - EDGE))
    return "sha256:" + hashlib.sha256(head + last).hexdigest()


class Hashing:
    """SHA-256 of the journal's first ``length`` bytes, in a thread.

    hashlib and file reads release the GIL, so on a second core this runs
    while the main thread decodes the snapshot, and costs no time there.
    """

    def __init__(self, fd: int, length: int) -> None:
        self._fd = os.dup(fd)
        self._length = length
        self._prefix: hashlib._Hash | None = None
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="checkpoint-digest", daemon=True)
        self._thread.start()

    def result(self) -> hashlib._Hash:
        """The prefix's digest (to extend over the tail); raises the OSError that reading met."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._prefix is None:
            raise RuntimeError("the digest thread ended without a digest")
        return self._prefix

    def _run(self) -> None:
        try:
            self._prefix = digest_of_range(self._fd, self._length)
        except OSError as error:
            self._error = error
        finally:
            os.close(self._fd)


def digest_of_range(fd: int, length: int) -> hashlib._Hash:
    digest = hashlib.sha256()
    offset = 0
    while offset < length:
        chunk = os.pread(fd, min(CHUNK_SIZE, length - offset), offset)
        if not chunk:
            raise OSError(0, "the journal shrank while it was read")
        digest.update(chunk)
        offset += len(chunk)
    return digest


class PrefixDigest:
    """SHA-256 of a journal's committed bytes as they stream past: every byte up to the last LF seen.

    Bytes after the last LF (a torn tail, or a line still being read) are
    held back until their LF arrives, so the digest always covers exactly
    the committed prefix the fold has read.
    """

    def __init__(self, digest: hashlib._Hash, length: int = 0) -> None:
        self._digest = digest
        self._held: list[bytes] = []
        self.length = length

    def feed(self, chunk: bytes) -> None:
        last = chunk.rfind(b"\n")
        if last == -1:
            self._held.append(chunk)
            return
        for piece in self._held:
            self._digest.update(piece)
            self.length += len(piece)
        self._held = []
        self._digest.update(memoryview(chunk)[: last + 1])
        self.length += last + 1
        if last + 1 < len(chunk):
            self._held.append(chunk[last + 1 :])

    def value(self) -> str:
        return "sha256:" + self._digest.hexdigest()


def hashed(chunks: Iterable[bytes], prefix: PrefixDigest | None) -> Iterator[bytes]:
    """The chunks, each also fed to ``prefix`` (the digest a new checkpoint is keyed by)."""
    for chunk in chunks:
        if prefix is not None:
            prefix.feed(chunk)
        yield chunk
