"""The typer application and ``main``: the one place where errors become a line and an exit code."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

from tiny_agent import __version__
from tiny_agent.cli.helptext import plain_help
from tiny_agent.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, TinyAgentError

plain_help()

app = typer.Typer(
    add_completion=True,
    no_args_is_help=False,
    invoke_without_command=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="An event-sourced session journal for LLM agents: run, replay, audit and resume sessions.",
)


def _show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"tiny-agent {__version__}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _commands(
    context: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """An event-sourced session journal for LLM agents: run, replay, audit and resume sessions."""
    if context.invoked_subcommand is None:
        sys.stdout.write(context.get_help() + "\n")
        raise typer.Exit(EXIT_OK)


def main(argv: list[str] | None = None) -> NoReturn:
    _register_commands()
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.TyperException as error:
        _die(f"USAGE: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except TinyAgentError as error:
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


def _register_commands() -> None:
    """Importing the command modules adds their commands to ``app`` (once)."""
    from tiny_agent.cli import chatting, driving, inspecting, lineage, viewing

    del chatting, driving, inspecting, lineage, viewing


def _die(message: str, exit_code: int) -> NoReturn:
    print(" ".join(message.split("\n")), file=sys.stderr)
    sys.exit(exit_code)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
