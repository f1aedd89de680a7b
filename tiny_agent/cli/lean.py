"""``main``, and the lean path: a command line it understands completely runs without importing typer (which, with
click and pydantic, costs several times the rest of ``sessions`` and a good part of a next turn's wait); anything else
goes to typer, which says what is wrong (docs/cli.md; tests/test_lean_cli.py checks both paths agree)."""

from __future__ import annotations

import errno
import math
import os
import sys
from collections.abc import Sequence
from typing import Final, NoReturn

import msgspec

from tiny_agent.cli.basics import die, exit_for, quiet_stdout
from tiny_agent.cli.declarations import COMMANDS, Command, Opt, Param, body_of, build, parameters
from tiny_agent.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError

BROKEN_PIPE_EXIT: Final = 1
"""click's exit code when the reader of a command's output went away."""

COMPLETION_ENV: Final = "_TINY_AGENT_COMPLETE"
"""Set by a shell asking click for completions: only typer answers that."""


def parse(words: Sequence[str]) -> Command | None:
    """The command with its parameters' values, when the lean path understands all of ``words``; else None."""
    command = COMMANDS.get(words[0]) if words else None
    if command is None:
        return None
    declared = list(parameters(command))
    options = {flag: (parameter, value) for parameter in declared for flag, value in _spellings(parameter)}
    values = {parameter.name: parameter.default for parameter in declared if parameter.flags}
    given: set[str] = set()
    positional: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word == "-" or not word.startswith("-"):
            positional.append(word)
            continue
        name, has_value, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        option, switched = options.get(name, (None, None))
        if option is None or (option.name in given and option.kind != "texts"):
            return None
        given.add(option.name)
        if switched is not None:
            if has_value:
                return None
            values[option.name] = switched
            continue
        value = attached if has_value else next(rest, None)
        if value is None or (value.startswith("-") and value != "-"):
            return None
        converted = _converted(option, value)
        if converted is None:
            return None
        values[option.name] = [*(values[option.name] or ()), converted] if option.kind == "texts" else converted
    if not _bind([parameter for parameter in declared if not parameter.flags], positional, values):
        return None
    return build(command, values)


def _spellings(parameter: Param) -> list[tuple[str, bool | None]]:
    """Each flag of an option with the value it sets on its own: a flag True, a switch's ``--on`` True and ``--off``
    False; None for an option that takes a value."""
    if parameter.kind == "switch":
        on, off = parameter.flags[0].split("/")
        return [(on, True), (off, False)]
    return [(flag, True if parameter.kind == "flag" else None) for flag in parameter.flags]


def _converted(option: Param, word: str) -> str | int | float | None:
    """The value typer would pass for ``word``, or None where typer reports an error itself."""
    if option.kind in ("text", "texts"):
        return word
    try:
        number: int | float = int(word) if option.kind == "integer" else float(word)
    except ValueError:
        return None
    if not math.isfinite(number):  # typer refuses nan against a bound and passes it on without one: it decides
        return None
    spelt = option.spelt
    low, high = (spelt.minimum, spelt.maximum) if isinstance(spelt, Opt) else (None, None)
    return None if (low is not None and number < low) or (high is not None and number > high) else number


def _bind(arguments: list[Param], positional: list[str], values: dict[str, object]) -> bool:
    """The positional words onto the arguments as typer binds them; False where typer would refuse the line."""
    single = [argument.name for argument in arguments if argument.kind == "argument"]
    variadic = [argument.name for argument in arguments if argument.kind == "arguments"]
    required = sum(1 for argument in arguments if argument.kind == "argument" and argument.required)
    if len(positional) < required or (not variadic and len(positional) > len(single)):
        return False
    values.update((argument.name, argument.default) for argument in arguments if argument.kind == "argument")
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
    except EOFError:
        # As on typer's path, where click takes an end of input that escapes a command for an interrupt.
        sys.stderr.write("\n")
        die("INTERRUPTED: stopped by the user", EXIT_INTERRUPTED)
    except Exception as error:  # the last line of defence: never show a traceback
        if isinstance(error, OSError) and error.errno == errno.EPIPE:
            # As on typer's path, where click quiets the output of a reader that went away and exits 1.
            quiet_stdout()
            sys.exit(BROKEN_PIPE_EXIT)
        exit_for(error)
    sys.exit(EXIT_OK)
