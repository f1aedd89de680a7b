"""Commands that make journals from journals: upgrade (v2 to v3), fork, export (exact, or as v2)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tiny_agent.cli.app import app
from tiny_agent.cli.common import JsonOption, SessionArgument, SessionsDirOption, corrupt, print_json, progress, resolve, store
from tiny_agent.cli.settings import DurabilityOption
from tiny_agent.errors import CorruptionError, UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.filestore import Durability
    from tiny_agent.interop import Made
    from tiny_agent.store import FileStore


@app.command()
def upgrade(
    journal: str = typer.Argument(..., metavar="JOURNAL", help="The v2 journal: a path, or a session's handle or id."),
    durability: str = DurabilityOption,
    sessions_dir: str | None = SessionsDirOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue a v2 journal in a new v3 session: its facts copied exactly (but for seq and seals), its origin in the header.

    The v2 file is only read.  Resume or run the new session; the v2 one cannot take a model call.
    """
    from tiny_agent.interop import upgrade as upgrade_journal

    path = resolve(journal, sessions_dir)
    files = store(sessions_dir)
    made = _made(path, lambda: upgrade_journal(files, path, _durability(durability)))
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
    as_json: bool = JsonOption,
) -> None:
    """Branch a session: a new v3 session starting with its facts through a point, its parent and place in the header.

    A point inside an open run or compaction is refused, naming the points that would do.
    """
    from tiny_agent.interop import fork as fork_session

    files = store(sessions_dir)
    parent = files.resolve(session)
    path = Path(parent.name)
    made = _made(path, lambda: fork_session(files, parent, at, _durability(durability)))
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
) -> None:
    """Write a session's journal out: its exact bytes, or (--v2) as a v2 journal, saying on stderr what v2 leaves out."""
    from tiny_agent.interop import export_v2, write_file, write_stream

    files = store(sessions_dir)
    found = files.resolve(session)
    path = Path(found.name)
    target = Path(output) if output is not None else None
    if target is not None and (target.exists() or target.is_symlink()):
        raise UsageError(f"{target} already exists; export never overwrites a file (remove it, or name another)")

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


def _durability(name: str) -> Durability:
    if name not in ("fsync", "process"):
        raise UsageError(f"--durability must be fsync or process, not {name!r}")
    return "fsync" if name == "fsync" else "process"


def _made(path: Path, make: Callable[[], Made]) -> Made:
    """Run ``make``, its failures named with ``path``."""
    try:
        return make()
    except CorruptionError as error:
        corrupt(error, path, as_json=False)
    except OSError as error:
        raise os_error(error, str(path)) from None


def _handle(files: FileStore, made: Made) -> str:
    return files.handles().get(made.session.id, made.session.id)
