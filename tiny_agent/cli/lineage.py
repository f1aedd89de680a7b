"""Commands that make journals from journals: upgrade (v2 to v3), fork, export (exact, or as v2)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from tiny_agent.cli.app import app
from tiny_agent.cli.basics import Where
from tiny_agent.cli.common import JsonOption, SessionArgument, SessionsDirOption, StoreOption, corrupt, print_json, progress
from tiny_agent.cli.settings import DurabilityOption, parse_durability
from tiny_agent.errors import CorruptionError, UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.oversight.interop import Made
    from tiny_agent.stores.base import Store

Done = TypeVar("Done")


@app.command()
def upgrade(
    journal: str = typer.Argument(..., metavar="JOURNAL", help="The v2 journal: a path, or a session's handle or id."),
    durability: str = DurabilityOption,
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue a v2 journal in a new v3 session: its facts copied exactly (but for seq and seals), its origin in the header.

    The v2 file is only read.  Resume or run the new session; the v2 one cannot take a model call.
    """
    from tiny_agent.oversight.interop import upgrade as upgrade_journal

    files = Where(sessions_dir, store_url).store
    source = files.resolve(journal)
    path = Path(source.name)
    made = _made(path, lambda: upgrade_journal(files, source, parse_durability(durability)))
    handle = _handle(files, made)
    if as_json:
        shown = {"session": made.session.id, "handle": handle, "path": made.session.name, "origin": made.origin}
        print_json({**shown, "already": made.already})
        return
    done = "was upgraded already, to" if made.already else "upgraded to"
    sys.stdout.write(f"{path} {done} session {handle} ({made.session.name})\n")
    progress(f"the v2 file is unchanged; go on with `tiny-agent resume {handle}` or `tiny-agent run PROMPT --session {handle}`")


@app.command()
def fork(
    session: str = SessionArgument,
    at: str = typer.Option(
        ...,
        "--at",
        metavar="ENTRY|SEQ",
        help="Where to branch: an entry id (or 4+ characters of it), or a seq (N or seq:N); that line is kept.",
    ),
    durability: str = DurabilityOption,
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
    as_json: bool = JsonOption,
) -> None:
    """Branch a session: a new v3 session starting with its facts through a point, its parent and place in the header.

    A point inside an open run or compaction is refused, naming the points that would do.
    """
    from tiny_agent.oversight.interop import fork as fork_session

    files = Where(sessions_dir, store_url).store
    parent = files.resolve(session)
    path = Path(parent.name)
    made = _made(path, lambda: fork_session(files, parent, at, parse_durability(durability)))
    handle = _handle(files, made)
    point = made.point
    if point is None:
        raise AssertionError("a fork always has its point")
    if as_json:
        print_json({"session": made.session.id, "handle": handle, "path": made.session.name, "parent": made.parent})
        return
    sys.stdout.write(f"forked {path.name} after line {point.line} ({point.named}) into session {handle} ({made.session.name})\n")


@app.command()
def export(
    session: str = SessionArgument,
    v2: bool = typer.Option(False, "--v2", help="Write a v2 journal the other ports read (same id; no raw or seal facts)."),
    output: str | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write to this new file (never overwritten), not stdout."
    ),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """Write a session's journal out: its exact bytes, or (--v2) as a v2 journal, saying on stderr what v2 leaves out."""
    from tiny_agent.oversight.interop import export_v2, write_file, write_stream

    files = Where(sessions_dir, store_url).store
    found = files.resolve(session)
    path = Path(found.name)
    target = Path(output) if output is not None else None
    if target is not None and (target.exists() or target.is_symlink()):
        raise UsageError(f"{target} already exists; export never overwrites a file (remove it, or name another)")
    if target is not None:
        _refuse_a_second_copy_in_the_store(files, target)

    def write(chunks: Iterable[bytes]) -> None:
        if target is None:
            write_stream(sys.stdout.buffer, chunks)
        else:
            write_file(target, chunks)

    try:
        if not v2:
            write(files.chunks(found))
            return
        exported = export_v2(lambda: files.chunks(found), path.name, write)
    except CorruptionError as error:
        corrupt(error, path, as_json=False)
    except OSError as error:
        raise os_error(error, str(target or path)) from None
    progress(exported.omitted.describe(exported.lineage))


def _refuse_a_second_copy_in_the_store(files: Store, target: Path) -> None:
    """An export keeps the session's id: inside the sessions directory it would be a second journal of one session."""
    from tiny_agent.stores.base import FileStore

    if not isinstance(files, FileStore):
        return
    if target.absolute().parent.resolve() != files.directory.absolute().resolve():
        return
    raise UsageError(
        f"{target} is in the sessions directory {files.directory}, where an export (same session id) would be a second "
        "copy of the session; write it elsewhere, or use fork for a new session"
    )


def _made(path: Path, make: Callable[[], Done]) -> Done:
    """Run ``make``, its failures named with ``path``."""
    try:
        return make()
    except CorruptionError as error:
        corrupt(error, path, as_json=False)
    except OSError as error:
        raise os_error(error, str(path)) from None


def _handle(files: Store, made: Made) -> str:
    return files.handle(made.session.id)


@app.command(name="import")
def import_(
    journal: str = typer.Argument(..., metavar="FILE", help="A journal file to store (- reads it from stdin)."),
    durability: str = DurabilityOption,
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
    as_json: bool = JsonOption,
) -> None:
    """Store a journal file as a session, byte for byte, once it verifies (a corrupt one is refused, exit 65).

    The way back from `export`: a backup restored, or a session moved between stores.
    """
    from tiny_agent.oversight.interop import import_journal

    files = Where(sessions_dir, store_url).store
    path = Path(journal)
    imported = _made(path, lambda: import_journal(files, path, parse_durability(durability)))
    handle = files.handle(imported.session.id)
    if as_json:
        print_json({"session": imported.session.id, "handle": handle, "path": imported.session.name, "already": imported.already})
        return
    done = "was already in" if imported.already else "stored in"
    sys.stdout.write(f"{path} {done} {files.label} as session {handle} ({imported.session.id})\n")
    if imported.dropped:
        progress(f"its torn tail ({imported.dropped} bytes after the last newline, an interrupted write) was not stored")
