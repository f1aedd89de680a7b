"""The ``tiny-agent`` command line: thin glue between typer and the modules that do the work.

Every failure a user can cause ends here as one line on stderr and a documented
exit code (docs/cli.md); no traceback ever reaches a terminal.  Modules that
talk HTTP are imported inside the commands that need them, so that ``replay``
and friends start without loading httpx.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

EXIT_OK = 0
EXIT_FAILED = 1
"""A run or resume ended in a durable failure (provider error, rejected response)."""
EXIT_USAGE = 2
EXIT_DRIFT = 3
"""``audit`` found a stored response that today's seam normalizes differently."""
EXIT_INTERNAL = 70
EXIT_CORRUPT = 65
"""EX_DATAERR: a journal, provider body or input file is malformed."""
EXIT_NO_INPUT = 66
"""EX_NOINPUT: no such session or file."""
EXIT_TEMPFAIL = 75
"""EX_TEMPFAIL: another writer holds the session, or recovery is blocked."""
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A failure to report as one line on stderr with a specific exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="An event-sourced session journal for LLM agents: run, replay, audit and resume sessions.",
)


@app.callback()
def _commands() -> None:
    """An event-sourced session journal for LLM agents: run, replay, audit and resume sessions."""


def fail(message: str, exit_code: int) -> NoReturn:
    raise CliError(message, exit_code)


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.TyperException as error:
        _die(f"USAGE: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except CliError as error:
        _die(str(error), error.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _die("INTERRUPTED: stopped by the user", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing left to say to it.
        _quiet_stdout()
        sys.exit(EXIT_OK)
    except Exception as error:  # the last line of defence: never show a traceback
        if os.environ.get("TINY_AGENT_DEBUG"):
            raise
        _die(f"INTERNAL: {type(error).__name__}: {error} (a bug; set TINY_AGENT_DEBUG=1 for details)", EXIT_INTERNAL)
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def _die(message: str, exit_code: int) -> NoReturn:
    # One line, a label first (an error code, or NOT_FOUND, USAGE, ...), so
    # scripts can match on it.
    print(message.replace("\n", " "), file=sys.stderr)
    sys.exit(exit_code)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# --------------------------------------------------------------------------
# Shared option types and helpers
# --------------------------------------------------------------------------

SessionsDirOption = typer.Option(
    None,
    "--sessions-dir",
    help="Where sessions live (default: $TINY_AGENT_SESSIONS_DIR, else ./sessions).",
    show_default=False,
)


def _resolve(reference: str, sessions_dir: str | None):  # -> Path
    from tiny_agent.store import AmbiguousSession, SessionNotFound, resolve_session, sessions_dir as directory_of

    try:
        return resolve_session(reference, directory_of(sessions_dir))
    except SessionNotFound as error:
        fail(f"NOT_FOUND: {error}", EXIT_NO_INPUT)
    except AmbiguousSession as error:
        fail(f"USAGE: {error}", EXIT_USAGE)


def _print_json(value: object) -> None:
    import msgspec

    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")


# --------------------------------------------------------------------------
# replay
# --------------------------------------------------------------------------


@app.command()
def replay(
    session: str = typer.Argument(..., help="A journal path, a session id, or a unique prefix of one."),
    as_json: bool = typer.Option(False, "--json", help="Print the reduced state in the conformance shape."),
    messages: bool = typer.Option(False, "--messages", help="Print the Chat Completions messages the model sees next."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Rebuild a session from its journal and show the transcript (or the state, or the next messages)."""
    from tiny_agent.errors import CorruptionError
    from tiny_agent.journal import read_journal

    if as_json and messages:
        fail("USAGE: --json and --messages are exclusive", EXIT_USAGE)
    path = _resolve(session, sessions_dir)
    try:
        state = read_journal(path)
    except CorruptionError as error:
        if as_json:
            _print_json({"ok": False, "error": error.to_json()})
        fail(f"{error} [{path}]", EXIT_CORRUPT)
    except IsADirectoryError:
        fail(f"NOT_FOUND: {path} is a directory, not a journal", EXIT_NO_INPUT)
    except FileNotFoundError:
        fail(f"NOT_FOUND: {path}: no such file", EXIT_NO_INPUT)
    except OSError as error:
        fail(f"IO_ERROR: {path}: {error.strerror or error}", EXIT_NO_INPUT)
    if as_json:
        _print_json({"ok": True, "state": state.to_json()})
    elif messages:
        _print_json(state.activeContext)
    else:
        _print_human(state, path)


def _print_human(state, path) -> None:  # type: ignore[no-untyped-def]
    from tiny_agent.render import footer_lines, transcript_lines

    size = path.stat().st_size
    out = sys.stdout
    for line in transcript_lines(state):
        out.write(line + "\n")
    for line in footer_lines(state, size):
        out.write(line + "\n")


# --------------------------------------------------------------------------
# normalize
# --------------------------------------------------------------------------


@app.command()
def normalize(
    source: str = typer.Argument(..., help="A file holding one Chat Completions response body, or - for stdin."),
) -> None:
    """Run the normalization seam on one provider response and show what the transcript would keep."""
    from tiny_agent.normalize import Accepted, normalize_body

    body = _read_input(source)
    if not body.strip():
        fail(f"EMPTY: {_input_name(source)} is empty (expected one JSON response body)", EXIT_CORRUPT)
    outcome = normalize_body(body)
    if isinstance(outcome, Accepted):
        _print_json(
            {
                "message": outcome.message,
                "stopReason": outcome.stop_reason,
                "usage": outcome.usage,
                "dropped": outcome.dropped,
            }
        )
        return
    if outcome.reason.startswith("response body is not JSON"):
        fail(f"MALFORMED_JSON: {_input_name(source)}: {outcome.reason}", EXIT_CORRUPT)
    _print_json({"rejected": outcome.reason, "usage": outcome.usage})
    raise typer.Exit(EXIT_CORRUPT)


def _input_name(source: str) -> str:
    return "stdin" if source == "-" else source


def _read_input(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        with open(source, "rb") as file:
            return file.read()
    except FileNotFoundError:
        fail(f"NOT_FOUND: {source}: no such file", EXIT_NO_INPUT)
    except IsADirectoryError:
        fail(f"NOT_FOUND: {source}: is a directory", EXIT_NO_INPUT)
    except OSError as error:
        fail(f"IO_ERROR: {source}: {error.strerror or error}", EXIT_NO_INPUT)
