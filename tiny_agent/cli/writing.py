"""Opening a session to write it, whatever the store: a new one, an idle one, the newest here, and naming it after.

Shared by run, chat, resume and compact (:mod:`tiny_agent.cli.driving`,
:mod:`tiny_agent.cli.chatting`).  A journal file is opened through its
checkpoint when one checks out; a database's session is folded from its rows
under the writer's lock (after its checkpoint row, when one checks out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tiny_agent.cli.basics import Found, Where, corrupt, handle_of, progress
from tiny_agent.errors import BlockedError, Busy, CorruptionError, Locked, UsageError, VerificationFailed, os_error

if TYPE_CHECKING:
    from tiny_agent.providers.endpoint import Endpoint
    from tiny_agent.stores.base import Store
    from tiny_agent.stores.journal import Durability, JournalWriter


def open_writer(found: Found, durability: Durability) -> JournalWriter:
    """The session's writer; a journal named for another session than its header's is refused (MISNAMED).

    A v2 journal's writer refuses to start a model attempt (BLOCKED): see :meth:`tiny_agent.stores.journal.JournalWriter.open`.
    """
    try:
        writer = found.store.open_writer(found.session, durability, progress)
    except CorruptionError as error:
        corrupt(error, found.path, as_json=False)
    except OSError as error:
        raise os_error(error, found.name) from None
    if writer.repaired_tail is not None:
        progress(f"cut a torn tail (an interrupted write) into {writer.repaired_tail.name}")
    if writer.tightened_mode is not None:
        progress(f"{found.path.name} was readable by others (mode {writer.tightened_mode:o}); it is 0600 again")
    return writer


def open_idle(found: Found, durability: Durability) -> JournalWriter:
    """An idle session to start something new in: a model call comes next, so a v2 journal is refused, nothing written."""
    from tiny_agent.journal.state import IdleOperation
    from tiny_agent.stores.journal import cannot_record_responses

    writer = open_writer(found, durability)
    path = found.path
    if writer.state.version < 3:
        writer.close(seal=False)
        raise BlockedError(cannot_record_responses(path, operation_open=type(writer.state.operation) is not IdleOperation))
    if type(writer.state.operation) is not IdleOperation:
        writer.close(seal=False)
        raise Busy(f"{path.name} has an unfinished operation; finish it with `tiny-agent resume {path}`")
    return writer


def newest_here(where: Where) -> Found:
    """``--continue``: the newest session made in this directory; a corrupt one is refused with its error, never skipped."""
    here = os.path.realpath(Path.cwd())
    rows = where.store.listing(cwd=here, limit=1)
    if not rows:
        raise UsageError(f"--continue: no session was made in {here} yet; run without it to start one")
    found = where.find(rows[0].path)
    if rows[0].status != "corrupt":
        return found
    remedy = "--continue takes the newest session made here and does not skip a corrupt one: name the session to continue"
    try:
        found.fold()
    except CorruptionError as error:
        raise CorruptionError(error.code, error.line, error.seq, f"{error.reason} [{found.path}]; {remedy}") from None
    raise VerificationFailed(f"{found.path}: {rows[0].error}; {remedy}")


def new_session(endpoint: Endpoint, where: Where, durability: Durability) -> JournalWriter:
    from tiny_agent.agent.runtime import environment_identity

    cwd = Path.cwd()
    files = where.store
    try:
        return files.create(
            cwd=os.path.realpath(cwd),
            provider=endpoint.name,
            model=endpoint.model,
            environment_identity=environment_identity(cwd),
            durability=durability,
        )
    except OSError as error:
        raise os_error(error, f"cannot create a session in {files.label}") from None


def writer_handle(writer: JournalWriter, store: Store) -> str:
    """The handle of the session a writer holds (a database's session has no journal file)."""
    return handle_of(store, writer.state.header.id, writer.path if writer.path.suffix == ".jsonl" else None)


def refuse_if_held(found: Found) -> None:
    """LOCKED if a writer holds the session now (``resume --dry-run`` plans nothing for a session being written)."""
    from tiny_agent.stores.files.disk import SessionLocked, holder_pid

    holder = found.store.holder(found.session)
    if holder is None:
        return
    if found.session.path is not None:
        raise SessionLocked(found.session.path, holder_pid(found.session.path))
    raise Locked(f"session {found.session.id} is being written by {holder}; only one writer may hold a session")
