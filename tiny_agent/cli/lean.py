"""``main``, and the lean path: the commands that only look at sessions, started without typer.

typer 0.29 converts every parameter through pydantic, and importing typer,
click, pydantic and importlib.metadata costs several times what the rest of
``tiny-agent sessions`` does.  So :func:`main` parses the command line of
replay, sessions, verify, audit, normalize, providers, view and report
itself when it understands all of it (every word a known option or an
argument, a valid value wherever one belongs, no ``--help``) and calls the
command's body in :mod:`tiny_agent.cli.looking` directly.  Anything else
(help, completion, a misspelt or repeated option, a missing argument, a
value typer would refuse, any other command) goes to typer, which says
what is wrong exactly as it always did; errors the commands raise end the
same way on both paths (:func:`tiny_agent.cli.basics.exit_for`).

:data:`COMMANDS` declares each command's parameters as the typer
declarations (:mod:`tiny_agent.cli.inspecting`, :mod:`tiny_agent.cli.viewing`)
do; tests/test_lean_cli.py holds the two identical, option by option.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal, NoReturn

import msgspec

from tiny_agent.cli import looking
from tiny_agent.cli.basics import exit_for, quiet_stdout
from tiny_agent.errors import EXIT_INTERRUPTED, EXIT_OK

Value = str | int | bool | list[str] | None
Kind = Literal["flag", "text", "integer"]


class Option(msgspec.Struct, frozen=True):
    names: tuple[str, ...]
    parameter: str
    kind: Kind
    default: Value = None
    minimum: int | None = None
    """An integer option's lower bound (typer's ``min``)."""

    def convert(self, word: str) -> Value | Refused:
        """The value typer would pass for ``word``, or REFUSED where typer reports an error itself."""
        if self.kind == "text":
            return word
        try:
            number = int(word)
        except ValueError:
            return REFUSED
        if self.minimum is not None and number < self.minimum:
            return REFUSED
        return number


class Refused(msgspec.Struct, frozen=True):
    """A command line the lean path leaves to typer."""


REFUSED: Final = Refused()


class Command(msgspec.Struct, frozen=True):
    """A lean command's parameters; its body is the function of its name in :mod:`tiny_agent.cli.looking`."""

    arguments: tuple[str, ...] = ()
    """Required positional parameters, in order."""
    variadic: str | None = None
    """A parameter taking the remaining positional words (None when there are none, as typer passes it)."""
    options: tuple[Option, ...] = ()

    def option(self, name: str) -> Option | None:
        return next((option for option in self.options if name in option.names), None)


SESSIONS_DIR: Final = Option(("--sessions-dir",), "sessions_dir", "text")
STORE: Final = Option(("--store",), "store_url", "text")
JSON: Final = Option(("--json",), "as_json", "flag", False)
ALL: Final = Option(("--all",), "all_sessions", "flag", False)

COMMANDS: Final[Mapping[str, Command]] = {
    "replay": Command(
        ("session",),
        options=(
            JSON,
            Option(("--messages",), "messages", "flag", False),
            Option(("--full",), "full", "flag", False),
            SESSIONS_DIR,
            STORE,
        ),
    ),
    "normalize": Command(
        ("source",),
        options=(Option(("--provider",), "provider", "text"), Option(("--api",), "api", "text")),
    ),
    "audit": Command(("session",), options=(JSON, SESSIONS_DIR, STORE)),
    "verify": Command(variadic="sessions", options=(ALL, JSON, SESSIONS_DIR, STORE)),
    "sessions": Command(options=(JSON, Option(("--limit",), "limit", "integer", minimum=1), ALL, SESSIONS_DIR, STORE)),
    "providers": Command(options=(JSON,)),
    "view": Command(
        ("session",),
        options=(
            Option(("-o", "--output"), "output", "text"),
            Option(("--open",), "open_page", "flag", False),
            SESSIONS_DIR,
            STORE,
        ),
    ),
    "report": Command(
        options=(
            ALL,
            Option(("--since",), "since", "text"),
            Option(("--by",), "by", "text", "day"),
            JSON,
            Option(("--html",), "html", "text"),
            SESSIONS_DIR,
            STORE,
        ),
    ),
}
"""The lean commands, each parameter as its typer declaration has it (names, kind, default, bound)."""

BROKEN_PIPE_EXIT: Final = 1
"""click's exit code when the reader of a command's output went away."""

COMPLETION_ENV: Final = "_TINY_AGENT_COMPLETE"
"""Set by a shell asking click for completions: only typer answers that."""


class Invocation(msgspec.Struct, frozen=True):
    name: str
    values: dict[str, Value]

    def run(self) -> None:
        body: Callable[..., None] = getattr(looking, self.name)
        body(**self.values)


def parse(words: Sequence[str]) -> Invocation | None:
    """The command and its parameters' values, when the lean path understands all of ``words``; else None."""
    command = COMMANDS.get(words[0]) if words else None
    if command is None:
        return None
    values: dict[str, Value] = {option.parameter: option.default for option in command.options}
    given: set[str] = set()
    positional: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word == "-" or not word.startswith("-"):
            positional.append(word)
            continue
        name, has_value, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        option = command.option(name)
        if option is None or option.parameter in given:
            return None
        given.add(option.parameter)
        if option.kind == "flag":
            if has_value:
                return None
            values[option.parameter] = True
            continue
        value = attached if has_value else next(rest, None)
        if value is None or (value.startswith("-") and value != "-"):
            return None
        converted = option.convert(value)
        if isinstance(converted, Refused):
            return None
        values[option.parameter] = converted
    return _bound(words[0], command, values, positional)


def _bound(name: str, command: Command, values: dict[str, Value], positional: list[str]) -> Invocation | None:
    required = len(command.arguments)
    if len(positional) < required or (command.variadic is None and len(positional) > required):
        return None
    values.update(zip(command.arguments, positional, strict=False))
    if command.variadic is not None:
        values[command.variadic] = positional[required:] or None
    return Invocation(name, values)


def main(argv: list[str] | None = None) -> NoReturn:
    """The ``tiny-agent`` command: the lean path when it understands the command line, typer otherwise."""
    words = sys.argv[1:] if argv is None else argv
    invocation = None if os.environ.get(COMPLETION_ENV) else parse(words)
    if invocation is None:
        from tiny_agent.cli.app import main as typer_main

        typer_main(argv)
    try:
        invocation.run()
    except KeyboardInterrupt:
        # As on typer's path, where click turns Ctrl-C inside a command into exit 130, silently.
        sys.exit(EXIT_INTERRUPTED)
    except Exception as error:  # the last line of defence: never show a traceback
        if isinstance(error, OSError) and error.errno == errno.EPIPE:
            # As on typer's path, where click quiets the output of a reader that went away and exits 1.
            quiet_stdout()
            sys.exit(BROKEN_PIPE_EXIT)
        exit_for(error)
    sys.exit(EXIT_OK)
