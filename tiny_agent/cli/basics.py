"""What every command shares, without typer (the lean path imports it): naming sessions, reading journals, output, and
how errors end a command."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn, TypeGuard, TypeVar

from tiny_agent.errors import EXIT_INTERNAL, EXIT_OK, CorruptionError, TinyAgentError, os_error

if TYPE_CHECKING:
    from tiny_agent.cli.declarations import Stored
    from tiny_agent.fold.fold import Fold
    from tiny_agent.stores.base import Session, Store
    from tiny_agent.stores.files.store import FileStore


class Where:
    """Where sessions live, as the command line says it: ``--sessions-dir``, ``--store``, else the environment.

    The store is made once per command (a database store keeps one reading connection).
    """

    def __init__(self, stored: Stored) -> None:
        self.stored = stored

    @cached_property
    def store(self) -> Store:
        from tiny_agent.stores.base import choose_store

        return choose_store(self.stored.sessions_dir, self.stored.store_url)

    def find(self, reference: str) -> Found:
        return Found(self.store, self.store.resolve(reference))


class Found(NamedTuple):
    """A session and the store that holds it (a journal path is a file whatever the store)."""

    store: Store
    session: Session

    @property
    def name(self) -> str:
        return self.session.name

    @property
    def path(self) -> Path:
        """The journal file, or the session's id as a path-like name for messages (a database's session)."""
        return self.session.path if self.session.path is not None else Path(self.session.name)

    def chunks(self) -> Iterator[bytes]:
        return self.store.chunks(self.session)

    def fold(self, *, lean: bool = False) -> Fold:
        """The session folded, from its checkpoint when one checks out (``lean``: see :meth:`Store.fold`)."""
        try:
            return self.store.fold(self.session, progress, lean=lean)
        except OSError as error:
            raise os_error(error, self.name) from None

    @property
    def handle(self) -> str:
        return handle_of(self.store, self.session.id, self.session.path)

    @property
    def named(self) -> str:
        """How a command line names this session: its handle in its store, else its journal's path."""
        path = self.session.path
        return self.handle if path is None or in_store(self.store, path) else str(path)

    def size(self) -> int:
        try:
            return self.store.size(self.session)
        except OSError as error:
            raise os_error(error, self.name) from None


def in_store(store: Store, path: Path) -> TypeGuard[FileStore]:
    from tiny_agent.stores.files.store import FileStore

    return isinstance(store, FileStore) and path.parent.resolve() == store.directory.resolve()


def handle_of(store: Store, session_id: str, path: Path | None) -> str:
    """A session's handle: the shortest unique prefix (4 to 8 hex digits) of its id's last group among the
    sessions of its store, or, for a journal file outside the store, among the journals of its directory."""
    from tiny_agent.stores.base import shortest_handles
    from tiny_agent.stores.files.disk import list_journals, session_id_of

    if path is None or in_store(store, path):
        return store.handle(session_id)
    try:
        ids = {session_id_of(journal) for journal in list_journals(path.parent)} | {session_id}
    except OSError:
        ids = {session_id}
    return shortest_handles(sorted(known for known in ids if known))[session_id]


def print_json(value: object) -> None:
    import msgspec

    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")
    sys.stdout.flush()


def print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")


def corrupt(error: CorruptionError, path: Path, as_json: bool) -> NoReturn:
    """A refused journal: the one-line error on stderr, and with --json also the error object on stdout."""
    if as_json:
        print_json({"ok": False, "error": error.to_json()})
    raise CorruptionError(error.code, error.line, error.seq, f"{error.reason} [{path}]") from None


Done = TypeVar("Done")


def failures_named(path: Path, make: Callable[[], Done]) -> Done:
    """Run ``make``, its failures named with ``path`` (a refused journal as :func:`corrupt` says it)."""
    try:
        return make()
    except CorruptionError as error:
        corrupt(error, path, as_json=False)
    except OSError as error:
        raise os_error(error, str(path)) from None


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


# -- how a command ends when it fails ------------------------------------------------------------


def exit_for(error: Exception) -> NoReturn:
    """The one line on stderr and the exit code for an error a command raised (the last line of defence included)."""
    if isinstance(error, TinyAgentError):
        die(str(error), error.exit_code)
    if isinstance(error, BrokenPipeError):
        # The reader went away (e.g. `| head`); nothing left to say to it.
        quiet_stdout()
        sys.exit(EXIT_OK)
    if os.environ.get("TINY_AGENT_DEBUG"):
        raise error
    die(f"INTERNAL: {type(error).__name__}: {error} (a bug; set TINY_AGENT_DEBUG=1 for details)", EXIT_INTERNAL)


def die(message: str, exit_code: int) -> NoReturn:
    print(" ".join(message.split("\n")), file=sys.stderr)
    sys.exit(exit_code)


def quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
