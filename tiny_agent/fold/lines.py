"""Whole journals: bytes in chunks to committed lines to a fold (session-v2 §2).  Pure: it takes bytes.

Bytes after the last LF (the torn tail) are never decoded.  The whole-file checks that outrank every
per-line error run only once a line has failed: a line msgspec decodes has proven its bytes well-formed.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

from tiny_agent.errors import CorruptionError
from tiny_agent.fold.fold import Fold
from tiny_agent.journal.json_profile import find_encoded_surrogate
from tiny_agent.journal.state import SessionState


def reduce_bytes(data: bytes) -> SessionState:
    """Reduce a whole journal held in memory."""
    return reduce_chunks((data,))


def reduce_chunks(chunks: Iterable[bytes], fold: Fold | None = None) -> SessionState:
    """Reduce a journal given as consecutive byte chunks; a ``fold`` passed in (restored from a checkpoint,
    or a writer's) takes them as the bytes after its last line."""
    splitter = LineSplitter(Fold() if fold is None else fold)
    for chunk in chunks:
        splitter.feed(chunk)
    return splitter.finish()


class LineSplitter:
    """Cuts chunks into committed lines for a fold; after a failure, audits what is left."""

    def __init__(self, fold: Fold) -> None:
        self._fold = fold
        self._parts: list[bytes] = []
        self._lines = fold.lines
        """Lines folded so far, the fold's own included: line numbers in errors count from the journal's start."""
        self._failure: CorruptionError | None = None
        self._audit: WholeFileAudit | None = None

    def feed(self, chunk: bytes) -> None:
        if self._audit is not None:
            self._audit.feed(chunk)
            return
        first_lf = chunk.find(b"\n")
        if first_lf == -1:
            self._parts.append(chunk)
            return
        start = 0
        if self._parts:
            self._parts.append(chunk[: first_lf + 1])
            head = b"".join(self._parts)
            self._parts = []
            audit = self._fold_lines(head, 0)
            if audit is not None:
                audit.feed(chunk[first_lf + 1 :])
                return
            start = first_lf + 1
        if self._fold_lines(chunk, start) is None and start < len(chunk):
            tail_start = chunk.rfind(b"\n") + 1
            if tail_start < len(chunk):
                self._parts.append(chunk[tail_start:])

    def _fold_lines(self, data: bytes, start: int) -> WholeFileAudit | None:
        """Fold every complete line of ``data`` from ``start``; once one fails, the audit that takes over."""
        fold = self._fold
        find = data.find
        end = find(b"\n", start)
        while end != -1:
            line = data[start:end]
            self._lines += 1
            try:
                if self._lines == 1:
                    if not line:
                        raise CorruptionError("MISSING_HEADER", 1, None, "line 1 is empty")
                    fold.apply_header(line)
                else:
                    fold.apply_line(line)
            except CorruptionError as error:
                self._failure = error
                self._audit = WholeFileAudit(first_line=self._lines)
                self._audit.feed(data[start:])
                return self._audit
            start = end + 1
            end = find(b"\n", start)
        return None

    @property
    def failed(self) -> bool:
        """A line was refused: later bytes only go to the whole-file checks, and :meth:`finish` raises."""
        return self._failure is not None

    def finish(self) -> SessionState:
        if self._failure is not None:
            verdict = self._audit.verdict() if self._audit is not None else None
            raise verdict or self._failure
        if self._lines == 0:
            raise CorruptionError("MISSING_HEADER", 1, None, "no complete header line (the file has no LF)")
        return self._fold.state


class WholeFileAudit:
    """After a line failed: the checks that outrank it (session-v2 §2 steps 2-3), from ``first_line`` on."""

    def __init__(self, first_line: int) -> None:
        self._line = first_line
        self._pieces: list[bytes] = []
        """The bytes after the last LF so far (a long line's pieces, joined once its LF arrives)."""
        self._surrogate_line: int | None = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._utf8_ok = True

    def feed(self, chunk: bytes) -> None:
        last_lf = chunk.rfind(b"\n")
        if last_lf == -1:
            self._pieces.append(chunk)
            return
        committed = b"".join([*self._pieces, chunk[: last_lf + 1]]) if self._pieces else chunk[: last_lf + 1]
        tail = chunk[last_lf + 1 :]
        self._pieces = [tail] if tail else []
        if self._surrogate_line is None:
            offset = find_encoded_surrogate(committed, 0, len(committed))
            if offset != -1:
                self._surrogate_line = self._line + committed.count(b"\n", 0, offset)
        if self._utf8_ok:
            try:
                self._utf8.decode(committed)
            except UnicodeDecodeError:
                self._utf8_ok = False
        self._line += committed.count(b"\n")

    def verdict(self) -> CorruptionError | None:
        if self._surrogate_line is not None:
            return CorruptionError(
                "MALFORMED_JSON", self._surrogate_line, None, "an encoded UTF-16 surrogate (bytes ED A0..BF) in the line"
            )
        if not self._utf8_ok:
            return CorruptionError("INVALID_UTF8", 1, None, "the journal is not well-formed UTF-8")
        return None
