"""Commands that make journals from journals: upgrade (v2 to v3), fork, export (exact, or as v2)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tiny_agent.cli.basics import Where, corrupt, failures_named, in_store, print_json, progress
from tiny_agent.cli.settings import parse_durability
from tiny_agent.errors import CorruptionError, UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.cli.declarations import Export, Fork, Import, Upgrade
    from tiny_agent.stores.base import Store


def upgrade(args: Upgrade) -> None:
    from tiny_agent.oversight.interop import upgrade as upgrade_journal

    files = Where(args.stored).store
    source = files.resolve(args.journal)
    path = Path(source.name)
    made = failures_named(path, lambda: upgrade_journal(files, source, parse_durability(args.durability)))
    handle = files.handle(made.session.id)
    if args.as_json:
        shown = {"session": made.session.id, "handle": handle, "path": made.session.name, "origin": made.origin}
        print_json({**shown, "already": made.already})
        return
    done = "was upgraded already, to" if made.already else "upgraded to"
    sys.stdout.write(f"{path} {done} session {handle} ({made.session.name})\n")
    progress(f"the v2 file is unchanged; go on with `tiny-agent resume {handle}` or `tiny-agent run PROMPT --session {handle}`")


def fork(args: Fork) -> None:
    from tiny_agent.oversight.interop import fork as fork_session

    files = Where(args.stored).store
    parent = files.resolve(args.session)
    path = Path(parent.name)
    made = failures_named(path, lambda: fork_session(files, parent, args.at, parse_durability(args.durability)))
    handle = files.handle(made.session.id)
    point = made.point
    if point is None:
        raise AssertionError("a fork always has its point")
    if args.as_json:
        print_json({"session": made.session.id, "handle": handle, "path": made.session.name, "parent": made.parent})
        return
    sys.stdout.write(f"forked {path.name} after line {point.line} ({point.named}) into session {handle} ({made.session.name})\n")


def export(args: Export) -> None:
    from tiny_agent.oversight.interop import export_v2, write_file, write_stream

    files = Where(args.stored).store
    found = files.resolve(args.session)
    path = Path(found.name)
    target = Path(args.output) if args.output is not None else None
    if target is not None:
        _refuse_target(files, target)

    def write(chunks: Iterable[bytes]) -> None:
        if target is None:
            write_stream(sys.stdout.buffer, chunks)
        else:
            write_file(target, chunks)

    try:
        if not args.v2:
            write(files.chunks(found))
            return
        exported = export_v2(lambda: files.chunks(found), path.name, write, found.path)
    except CorruptionError as error:
        corrupt(error, path, as_json=False)
    except OSError as error:
        raise os_error(error, str(target or path)) from None
    progress(exported.omitted.describe(exported.lineage))


def _refuse_target(files: Store, target: Path) -> None:
    """An export never overwrites a file, and keeps the session's id: in the sessions directory it would be a second
    journal of one session."""
    if target.exists() or target.is_symlink():
        raise UsageError(f"{target} already exists; export never overwrites a file (remove it, or name another)")
    if in_store(files, target):
        raise UsageError(
            f"{target} is in the sessions directory {files.directory}, where an export (same session id) would be a second "
            "copy of the session; write it elsewhere, or use fork for a new session"
        )


def import_(args: Import) -> None:
    from tiny_agent.oversight.interop import import_journal

    files = Where(args.stored).store
    path = Path(args.journal)
    imported = failures_named(path, lambda: import_journal(files, path, parse_durability(args.durability)))
    handle = files.handle(imported.session.id)
    if args.as_json:
        print_json({"session": imported.session.id, "handle": handle, "path": imported.session.name, "already": imported.already})
        return
    done = "was already in" if imported.already else "stored in"
    sys.stdout.write(f"{path} {done} {files.label} as session {handle} ({imported.session.id})\n")
    if imported.dropped:
        progress(f"its torn tail ({imported.dropped} bytes after the last newline, an interrupted write) was not stored")
