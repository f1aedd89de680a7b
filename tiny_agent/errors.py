"""One error model: every failure a user can meet has a label and an exit code.

``TinyAgentError`` is the base.  Each subclass fixes a label (the word that
starts the one-line message on stderr, so scripts can match on it); the
label fixes the exit code through :data:`LABELS`, the one table that
docs/cli.md is checked against.  ``cli.main`` maps any ``TinyAgentError`` to
``<message>`` on stderr and ``exit_code``; nothing else picks exit codes.

A journal the reducer refuses is a :class:`CorruptionError`, whose label is
its session-v2 error code (``INVALID_FACT``, ``SEAL_MISMATCH``, ...) and whose
exit code is 65.

Pure: no I/O.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal, get_args

import msgspec

# -- exit codes and labels ------------------------------------------------------

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_DRIFT: Final = 3
EXIT_CORRUPT: Final = 65
"""EX_DATAERR: a journal, provider body or input file is malformed."""
EXIT_NO_INPUT: Final = 66
"""EX_NOINPUT: no such session or file."""
EXIT_UNAVAILABLE: Final = 69
"""EX_UNAVAILABLE: the session store (a database server) cannot be reached."""
EXIT_INTERNAL: Final = 70
"""EX_SOFTWARE: a bug."""
EXIT_IO: Final = 74
"""EX_IOERR: the disk is full, read-only, or failed."""
EXIT_TEMPFAIL: Final = 75
"""EX_TEMPFAIL: another writer holds the session, recovery is blocked, a run is open."""
EXIT_NO_PERMISSION: Final = 77
"""EX_NOPERM: the operating system refused access."""
EXIT_INTERRUPTED: Final = 130
"""128 + SIGINT."""
EXIT_TERMINATED: Final = 143
"""128 + SIGTERM."""


class Label(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One row of the label table: the word on stderr, its exit code, and what it means."""

    name: str
    exit_code: int
    meaning: str


CORRUPTION_LABEL: Final = "<CODE>"
"""The row that stands for every session-v2 error code (``INVALID_FACT at line 7 (seq 12): ...``)."""

LABELS: Final[tuple[Label, ...]] = (
    Label("FAILED", EXIT_FAILED, "a run ended in a durable failure (provider error, rejected response); the journal records it"),
    Label("STEP_LIMIT", EXIT_FAILED, "a run stopped at --max-steps; the journal records it and the transcript stays valid"),
    Label("USAGE", EXIT_USAGE, "bad usage: unknown flag, missing argument, exclusive flags, an ambiguous session name"),
    Label("CONFIG", EXIT_USAGE, "bad configuration: no model, no provider, no key for the host, a bad base URL or config file"),
    Label("EMPTY", EXIT_CORRUPT, "an input file that should hold something is empty"),
    Label("DRIFT", EXIT_DRIFT, "audit: a stored response normalizes today differently from what the journal kept"),
    Label(CORRUPTION_LABEL, EXIT_CORRUPT, "a journal the reducer refuses, named by its error code, line and seq"),
    Label("CORRUPT", EXIT_CORRUPT, "verify: one or more sessions failed verification (each is listed with its error)"),
    Label("MALFORMED_JSON", EXIT_CORRUPT, "an input that is not JSON (a journal line, or a provider body given to normalize)"),
    Label("MISNAMED", EXIT_CORRUPT, "a journal whose header names another session than its file name; writers refuse to open it"),
    Label("NOT_FOUND", EXIT_NO_INPUT, "no such session or file"),
    Label(
        "UNAVAILABLE",
        EXIT_UNAVAILABLE,
        "the session store (a PostgreSQL server) cannot be reached, or failed a statement; nothing was half-written",
    ),
    Label("MCP", EXIT_UNAVAILABLE, "an MCP server did not start, could not be reached, or did not finish its handshake in time"),
    Label("IO_ERROR", EXIT_IO, "the disk is full or read-only, or a read or write failed; nothing was half-written"),
    Label("PERMISSION", EXIT_NO_PERMISSION, "the operating system refused access to a file or directory"),
    Label("LOCKED", EXIT_TEMPFAIL, "another process is writing the session (its pid is named)"),
    Label("BLOCKED", EXIT_TEMPFAIL, "recovery cannot go on safely: the reason, what differs, and the remedy are on the line"),
    Label("BUSY", EXIT_TEMPFAIL, "the session has an unfinished operation; finish it with resume"),
    Label("INTERRUPTED", EXIT_INTERRUPTED, "stopped by Ctrl-C; the abort is recorded first"),
    Label("TERMINATED", EXIT_TERMINATED, "stopped by SIGTERM; the abort is recorded first"),
    Label("INTERNAL", EXIT_INTERNAL, "a bug: please report it (TINY_AGENT_DEBUG=1 shows the traceback)"),
)

EXIT_CODES: Final[dict[str, int]] = {label.name: label.exit_code for label in LABELS}


class TinyAgentError(Exception):
    """A failure to report as one line, ``LABEL: message``, with the label's exit code."""

    label: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.label]

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
    """A journal file named for one session whose header is another's (session-v2 §16: a store checks the id on open)."""

    label = "MISNAMED"


class StorageError(TinyAgentError):
    """ENOSPC, EROFS, EIO and the like: the store cannot take bytes now."""

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


# -- journal corruption ------------------------------------------------------------

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
    """A journal that the reducer refuses, located precisely.

    ``seq`` is None for errors the contract reports without one (framing, header,
    JSON profile, an envelope whose ``seq`` is itself unusable).  The label is
    the error code; the exit code is always 65.
    """

    label = CORRUPTION_LABEL

    def __init__(self, code: ErrorCode, line: int, seq: int | None, reason: str) -> None:
        super().__init__(reason)
        self.args = (code, line, seq, reason)
        self.code = code
        self.line = line
        self.seq = seq
        self.reason = reason

    @property
    def exit_code(self) -> int:
        return EXIT_CORRUPT

    def __str__(self) -> str:
        where = f"line {self.line}" if self.seq is None else f"line {self.line} (seq {self.seq})"
        return f"{self.code} at {where}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        """The conformance shape: ``{"code", "line", "seq"?}``."""
        error: dict[str, object] = {"code": self.code, "line": self.line}
        if self.seq is not None:
            error["seq"] = self.seq
        return error


def os_error(error: OSError, what: str) -> TinyAgentError:
    """The labelled error for an OSError met while touching ``what`` (a path, named in the message).

    One place decides: a missing file is NOT_FOUND; a refusal is PERMISSION;
    a full, read-only or failing disk is IO_ERROR.  Never "a bug".
    """
    import errno

    reason = error.strerror or str(error)
    number = error.errno
    if number in (errno.ENOENT, errno.ENOTDIR):
        return NotFound(f"{what}: {reason}")
    if number in (errno.EACCES, errno.EPERM):
        return PermissionDenied(f"{what}: {reason}")
    if number == errno.EISDIR:
        return NotFound(f"{what}: is a directory, not a file")
    return StorageError(f"{what}: {reason}")
