"""The single way a journal can be wrong: a corruption error with a code, a line and a reason."""

from __future__ import annotations

from typing import Final, Literal

ErrorCode = Literal[
    "MISSING_HEADER",
    "INVALID_UTF8",
    "MALFORMED_JSON",
    "BLANK_LINE",
    "CRLF_NOT_ALLOWED",
    "INVALID_HEADER",
    "UNSUPPORTED_VERSION",
    "EMPTY_TRANSACTION",
    "INVALID_FACT",
    "SEQ_MISMATCH",
    "DUPLICATE_ID",
    "INVALID_REFERENCE",
    "INVALID_TRANSITION",
    "INVALID_TRANSCRIPT",
    "SEAL_MISMATCH",
]

ERROR_CODES: Final = frozenset(ErrorCode.__args__)  # type: ignore[attr-defined]


class CorruptionError(Exception):
    """A journal that the reducer refuses, located precisely.

    ``seq`` is None for errors the contract reports without one (framing, header,
    JSON profile, an envelope whose ``seq`` is itself unusable).
    """

    def __init__(self, code: ErrorCode, line: int, seq: int | None, reason: str) -> None:
        super().__init__(code, line, seq, reason)
        self.code = code
        self.line = line
        self.seq = seq
        self.reason = reason

    def __str__(self) -> str:
        where = f"line {self.line}" if self.seq is None else f"line {self.line} (seq {self.seq})"
        return f"{self.code} at {where}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        """The conformance shape: ``{"code", "line", "seq"?}``."""
        error: dict[str, object] = {"code": self.code, "line": self.line}
        if self.seq is not None:
            error["seq"] = self.seq
        return error
