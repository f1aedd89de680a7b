"""The typer application and ``main``: the one place where errors become a line and an exit code."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer

from tiny_agent import __version__
from tiny_agent.cli.basics import die, exit_for, interrupted
from tiny_agent.cli.helptext import plain_help
from tiny_agent.errors import EXIT_OK, EXIT_USAGE

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
    """The command line through typer (the lean path, :func:`tiny_agent.cli.lean.main`, hands over what it leaves)."""
    _register_commands()
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.TyperException as error:
        die(f"USAGE: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except (KeyboardInterrupt, typer.Abort):
        interrupted()
    except Exception as error:  # the last line of defence: never show a traceback
        exit_for(error)
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def _register_commands() -> None:
    """Importing the command modules adds their commands to ``app`` (once)."""
    from tiny_agent.cli import chatting, driving, inspecting, lineage, viewing

    del chatting, driving, inspecting, lineage, viewing
