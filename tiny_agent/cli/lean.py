"""``main``, and the lean path: a read-only command (body in :mod:`~tiny_agent.cli.looking`) whose line it understands
completely runs without importing typer (which costs several times the rest of ``sessions``); anything else goes to
typer, which says what is wrong (docs/cli.md; tests/test_lean_cli.py checks both paths agree)."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Final, NoReturn

import msgspec

from tiny_agent.cli.basics import exit_for, quiet_stdout
from tiny_agent.cli.declarations import COMMANDS, LEAN, Command, Opt, Param, body_of, build, parameters
from tiny_agent.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError

BROKEN_PIPE_EXIT: Final = 1
"""click's exit code when the reader of a command's output went away."""

COMPLETION_ENV: Final = "_TINY_AGENT_COMPLETE"
"""Set by a shell asking click for completions: only typer answers that."""


def parse(words: Sequence[str]) -> Command | None:
    """The command with its parameters' values, when the lean path understands all of ``words``; else None."""
    command = COMMANDS.get(words[0]) if words else None
    if command is None or not command.body.startswith(LEAN):
        return None
    declared = list(parameters(command))
    options = {flag: parameter for parameter in declared for flag in parameter.flags}
    values = {parameter.name: parameter.default for parameter in declared if parameter.flags}
    given: set[str] = set()
    positional: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word == "-" or not word.startswith("-"):
            positional.append(word)
            continue
        name, has_value, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        option = options.get(name)
        if option is None or option.name in given or option.kind not in ("flag", "text", "integer"):
            return None
        given.add(option.name)
        if option.kind == "flag":
            if has_value:
                return None
            values[option.name] = True
            continue
        value = attached if has_value else next(rest, None)
        if value is None or (value.startswith("-") and value != "-"):
            return None
        converted = _converted(option, value)
        if converted is None:
            return None
        values[option.name] = converted
    if not _bind([parameter for parameter in declared if not parameter.flags], positional, values):
        return None
    return build(command, values)


def _converted(option: Param, word: str) -> str | int | None:
    """The value typer would pass for ``word``, or None where typer reports an error itself."""
    if option.kind == "text":
        return word
    try:
        number = int(word)
    except ValueError:
        return None
    minimum = option.spelt.minimum if isinstance(option.spelt, Opt) else None
    return None if minimum is not None and number < minimum else number


def _bind(arguments: list[Param], positional: list[str], values: dict[str, object]) -> bool:
    """The positional words onto the arguments as typer binds them; False where typer would refuse the line."""
    single = [argument.name for argument in arguments if argument.kind == "argument"]
    variadic = [argument.name for argument in arguments if argument.kind == "arguments"]
    if len(positional) < len(single) or (not variadic and len(positional) > len(single)):
        return False
    values.update(zip(single, positional, strict=False))
    values.update((name, positional[len(single) :] or None) for name in variadic)
    return all(value is not msgspec.NODEFAULT for value in values.values())


TOP_LEVEL: Final = ("--help", "-h", "--version", "--install-completion", "--show-completion")
"""The options of ``tiny-agent`` itself; any other first word that is not a command starts ``run``."""


def with_command(words: list[str]) -> list[str]:
    """``tiny-agent "PROMPT" [options]`` is ``tiny-agent run "PROMPT" [options]``; a command named after other words, or a
    misspelt one, is a usage error rather than a prompt sent to a model (docs/cli.md)."""
    if not words or words[0] in COMMANDS or words[0] in TOP_LEVEL:
        return words
    named = next((word for word in words if word in COMMANDS), None)
    if named is not None:
        raise UsageError(f"options go after the command (tiny-agent {named} [OPTIONS]); a prompt {named!r} needs run")
    first = words[0]
    if not first.startswith("-") and len(first.split()) == 1:
        from difflib import get_close_matches

        near = get_close_matches(first, COMMANDS, n=1, cutoff=0.8)
        if near:
            raise UsageError(f"no command {first!r}; did you mean {near[0]}? (to send it as a prompt: tiny-agent run {first})")
    return ["run", *words]


def main(argv: list[str] | None = None) -> NoReturn:
    """The ``tiny-agent`` command: the lean path when it understands the command line, typer otherwise."""
    from tiny_agent.journal.secrets import guarded_output
    from tiny_agent.providers.keys import environment_secrets

    with guarded_output(environment_secrets(os.environ)):  # every line out passes the redactor
        _main(argv)


def _main(argv: list[str] | None) -> NoReturn:
    words = sys.argv[1:] if argv is None else argv
    completing = bool(os.environ.get(COMPLETION_ENV))
    try:
        words = words if completing else with_command(words)
    except UsageError as error:
        exit_for(error)
    command = None if completing else parse(words)
    if command is None:
        from tiny_agent.cli.app import main as typer_main

        typer_main(argv if completing else words)
    try:
        body_of(type(command))(command)
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
