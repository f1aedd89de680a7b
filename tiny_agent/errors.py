"""The error model: a label per failure, an exit code per label (docs/cli.md, "Labels and exit codes").  Pure."""

from __future__ import annotations

import errno
from typing import ClassVar, Final, Literal, get_args

CORRUPTION_LABEL: Final = "<CODE>"
"""The row that stands for every session-v2 error code (``INVALID_FACT at line 7 (seq 12): ...``)."""

LABELS: Final[dict[str, int]] = {
    "FAILED": 1,
    "STEP_LIMIT": 1,
    "USAGE": 2,
    "CONFIG": 2,
    "EMPTY": 65,
    "REFUSED": 4,
    "DRIFT": 3,
    CORRUPTION_LABEL: 65,
    "CORRUPT": 65,
    "MALFORMED_JSON": 65,
    "MISNAMED": 65,
    "NOT_FOUND": 66,
    "UNAVAILABLE": 69,
    "MCP": 69,
    "IO_ERROR": 74,
    "PERMISSION": 77,
    "LOCKED": 75,
    "BLOCKED": 75,
    "BUSY": 75,
    "INTERRUPTED": 130,
    "TERMINATED": 143,
    "INTERNAL": 70,
}
"""Each label's exit code; what each means is docs/cli.md's table, which tests/test_cli_docs.py checks against this one."""

EXIT_OK: Final = 0
EXIT_USAGE: Final = LABELS["USAGE"]
EXIT_CORRUPT: Final = LABELS[CORRUPTION_LABEL]
EXIT_INTERNAL: Final = LABELS["INTERNAL"]
EXIT_TEMPFAIL: Final = LABELS["LOCKED"]
EXIT_INTERRUPTED: Final = LABELS["INTERRUPTED"]


class TinyAgentError(Exception):
    """A failure to report as one line, ``LABEL: message``, with the label's exit code."""

    label: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def exit_code(self) -> int:
        return LABELS[self.label]

    def __str__(self) -> str:
        return f"{self.label}: {self.message}"


class UsageError(TinyAgentError):
    label = "USAGE"


class ConfigError(TinyAgentError):
    label = "CONFIG"


class EmptyInput(TinyAgentError):
    label = "EMPTY"


class NotFound(TinyAgentError):
    label = "NOT_FOUND"


class Misnamed(TinyAgentError):
    label = "MISNAMED"


class StorageError(TinyAgentError):
    label = "IO_ERROR"


class McpUnavailable(TinyAgentError):
    label = "MCP"


class PermissionDenied(TinyAgentError):
    label = "PERMISSION"


class Locked(TinyAgentError):
    label = "LOCKED"


class BlockedError(TinyAgentError):
    label = "BLOCKED"


class Busy(TinyAgentError):
    label = "BUSY"


class RunFailed(TinyAgentError):
    label = "FAILED"


class Refused(TinyAgentError):
    label = "REFUSED"


class StepLimitReached(TinyAgentError):
    label = "STEP_LIMIT"


class Interrupted(TinyAgentError):
    label = "INTERRUPTED"


class Terminated(TinyAgentError):
    label = "TERMINATED"


class DriftFound(TinyAgentError):
    label = "DRIFT"


class MalformedInput(TinyAgentError):
    label = "MALFORMED_JSON"


class VerificationFailed(TinyAgentError):
    label = "CORRUPT"


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

ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(ErrorCode))


class CorruptionError(TinyAgentError):
    """A journal that the reducer refuses: its error code, line, and seq (None where the contract gives none)."""

    label = CORRUPTION_LABEL

    def __init__(self, code: ErrorCode, line: int, seq: int | None, reason: str) -> None:
        super().__init__(reason)
        self.args = (code, line, seq, reason)
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


_LABELLED_ERRNOS: Final[dict[int | None, type[TinyAgentError]]] = {
    errno.ENOENT: NotFound, errno.ENOTDIR: NotFound, errno.EACCES: PermissionDenied, errno.EPERM: PermissionDenied
}
"""The OSErrors with a label of their own; any other is a StorageError."""


def os_error(error: OSError, what: str) -> TinyAgentError:
    """The labelled error for an OSError met while touching ``what`` (a path): never "a bug"."""
    if error.errno == errno.EISDIR:
        return NotFound(f"{what}: is a directory, not a file")
    return _LABELLED_ERRNOS.get(error.errno, StorageError)(f"{what}: {error.strerror or str(error)}")
