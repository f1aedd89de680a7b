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


def fail(message: str, exit_code: int) -> NoReturn:
    raise CliError(message, exit_code)


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.TyperException as error:
        _die(f"usage: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except CliError as error:
        _die(str(error), error.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _die("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing left to say to it.
        _quiet_stdout()
        sys.exit(EXIT_OK)
    except Exception as error:  # the last line of defence: never show a traceback
        if os.environ.get("TINY_AGENT_DEBUG"):
            raise
        _die(f"internal error: {type(error).__name__}: {error} (set TINY_AGENT_DEBUG=1 for details)", EXIT_INTERNAL)
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def _die(message: str, exit_code: int) -> NoReturn:
    print(f"tiny-agent: {message}", file=sys.stderr)
    sys.exit(exit_code)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
