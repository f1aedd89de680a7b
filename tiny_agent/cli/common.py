"""What every command shares: naming sessions, reading journals, writing output, common options."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from tiny_agent.errors import CorruptionError, UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.state import SessionState
    from tiny_agent.store import FileStore

SessionArgument = typer.Argument(
    ..., metavar="SESSION", help="A handle, a session id or a unique prefix of one, or a journal path."
)
SessionsDirOption = typer.Option(
    None,
    "--sessions-dir",
    metavar="DIR",
    help="Where sessions live (default: $TINY_AGENT_SESSIONS_DIR, else ~/.local/share/tiny-agent/sessions).",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Machine-readable output.")


def store(sessions_dir: str | None) -> FileStore:
    from tiny_agent.store import open_store

    return open_store(sessions_dir)


def resolve(reference: str, sessions_dir: str | None) -> Path:
    session = store(sessions_dir).resolve(reference)
    if session.path is None:
        raise UsageError(f"{session.name} is not a journal file")
    return session.path


def print_json(value: object) -> None:
    import msgspec

    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")
    sys.stdout.flush()


def read_journal(path: Path) -> SessionState:
    from tiny_agent.journal import read_journal as read

    try:
        return read(path)
    except OSError as error:
        raise os_error(error, str(path)) from None


def corrupt(error: CorruptionError, path: Path, as_json: bool) -> NoReturn:
    """A refused journal: the one-line error on stderr, and with --json also the error object on stdout."""
    if as_json:
        print_json({"ok": False, "error": error.to_json()})
    raise CorruptionError(error.code, error.line, error.seq, f"{error.reason} [{path}]") from None


def progress(line: str) -> None:
    sys.stderr.write(f"· {line}\n")
    sys.stderr.flush()


def progress_bar(label: str) -> Callable[[int, int], None] | None:
    """A one-line counter on stderr when it is a terminal; silent otherwise."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r{label} {done}/{total}{end}")
        sys.stderr.flush()

    return show


def read_input(source: str) -> bytes:
    """A file's bytes, or stdin's for ``-``."""
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        with open(source, "rb") as file:
            return file.read()
    except OSError as error:
        raise os_error(error, source) from None


def input_name(source: str) -> str:
    return "stdin" if source == "-" else source
