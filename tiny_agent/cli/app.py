"""The typer application, made from :mod:`tiny_agent.cli.declarations`, and the one place where its errors become a line.

Each command builds its declaration's Struct from what typer parsed and calls the body it names (found by name: the
app imports no command module).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, NoReturn

import typer
import typer.core

from tiny_agent import __version__
from tiny_agent.cli.basics import die, exit_for
from tiny_agent.cli.declarations import COMMANDS, Arg, Command, Param, body_of, build, parameters
from tiny_agent.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

HELP = (
    "An event-sourced session journal for LLM agents: run, replay, audit and resume sessions.\n\n"
    '`tiny-agent "PROMPT" [OPTIONS]` is `tiny-agent run "PROMPT" [OPTIONS]`.'
)


def _plain_help() -> None:
    """Help text people expect: ``SESSION``, not typer 0.29's ``{SESSION}`` in the usage line and ``SESSION <str>``.

    Arguments have no plain-metavar switch, so their two display methods are replaced (tests/test_cli_docs.py checks).
    """

    def usage_name(self: Any) -> str:
        name = str(self.display_name_raw)
        shown = name if self.required else f"[{name}]"
        return shown + "..." if self.nargs != 1 and not name.endswith("...") else shown

    argument = getattr(typer.core, "TyperArgument", None)
    if argument is not None and hasattr(argument, "_usage_display_name"):
        argument._usage_display_name = usage_name
    if argument is not None and hasattr(argument, "display_type_rich"):
        argument.display_type_rich = lambda self, ctx: None


def _show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"tiny-agent {__version__}\n")
        raise typer.Exit(EXIT_OK)


def _commands(
    context: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
) -> None:
    if context.invoked_subcommand is None:
        sys.stdout.write(context.get_help() + "\n")
        raise typer.Exit(EXIT_OK)


def _typer_parameter(parameter: Param) -> Any:
    spelt = parameter.spelt
    default = ... if parameter.required else parameter.default
    if isinstance(spelt, Arg):
        return typer.Argument(default, metavar=spelt.metavar, help=spelt.help, show_default=False)
    return typer.Option(default, *parameter.flags, metavar=spelt.metavar, help=spelt.help, min=spelt.minimum, max=spelt.maximum)


def _add(app: typer.Typer, name: str, command: type[Command]) -> None:
    declared = list(parameters(command))

    def run(**values: object) -> object:
        return body_of(command)(build(command, values))

    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(parameter.name, inspect.Parameter.KEYWORD_ONLY, default=_typer_parameter(parameter))
            for parameter in declared
        ]
    )
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in declared}
    help_text = inspect.cleandoc(command.__doc__ or "")
    app.command(name, help=help_text, short_help=help_text.split("\n\n")[0])(run)


def make_app() -> typer.Typer:
    _plain_help()
    app = typer.Typer(
        add_completion=True,
        no_args_is_help=False,
        invoke_without_command=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        help=HELP,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_commands)
    for name, command in COMMANDS.items():
        _add(app, name, command)
    return app


app = make_app()


def main(argv: list[str] | None = None) -> NoReturn:
    """The command line through typer (the lean path, :func:`tiny_agent.cli.lean.main`, hands over what it leaves)."""
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.TyperException as error:
        die(f"USAGE: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except (KeyboardInterrupt, typer.Abort):
        die("INTERRUPTED: stopped by the user", EXIT_INTERRUPTED)
    except Exception as error:  # the last line of defence: never show a traceback
        exit_for(error)
    sys.exit(result if isinstance(result, int) else EXIT_OK)
