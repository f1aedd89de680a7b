"""``verify``: is every byte of a journal accounted for?  The seal chain and the reducer, per session."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import msgspec

from tiny_agent.errors import CorruptionError
from tiny_agent.journal import holder_pid, is_locked, read_journal
from tiny_agent.state import SessionState

Status = Literal["ok", "corrupt", "open-tail", "unsealed", "unreadable"]


class Verdict(msgspec.Struct):
    path: str
    status: Status
    detail: str
    """One line for people: what was found and what it means."""
    session: str | None = None
    version: int | None = None
    facts: int = 0
    bytes: int = 0
    error: dict[str, object] | None = None
    writer_pid: int | None = None
    """The pid of the process writing the session right now, if one is."""


def verify(path: Path, known_length: int | None = None) -> Verdict:
    """Check one journal: every line through the reducer, every seal against the bytes before it.

    ``known_length``, when given, is a length this journal had before (from
    the sessions index): a journal that is now shorter was cut at a line
    boundary, which no seal can show on its own.
    """
    try:
        size = os.stat(path).st_size
        state = read_journal(path)
    except CorruptionError as error:
        return Verdict(path=str(path), status="corrupt", detail=str(error), error={**error.to_json(), "reason": error.reason})
    except OSError as error:
        return Verdict(path=str(path), status="unreadable", detail=f"{error.strerror or error}")
    verdict = Verdict(
        path=str(path), status="ok", detail="", session=state.header.id, version=state.version, facts=state.factCount, bytes=size
    )
    torn = size - state.repairedLength
    notes = [f"{torn} bytes of torn tail after the last newline"] if torn else []
    if known_length is not None and state.repairedLength < known_length:
        notes.append(f"shorter than the {known_length} bytes it had when last listed: lines were cut off")
        verdict.status = "corrupt"
        verdict.error = {"code": "TRUNCATED", "line": None, "reason": notes[-1]}
    if state.version < 3:
        verdict.status = "unsealed" if verdict.status == "ok" else verdict.status
        notes.insert(0, "v2 journal: valid, but it has no seal chain to prove its bytes unchanged")
    elif state.sealed:
        notes.insert(0, f"sealed: all {state.factCount} facts valid, every line covered by the seal chain")
    else:
        if verdict.status == "ok":
            verdict.status = "open-tail"
        verdict.writer_pid = holder_pid(path) if is_locked(path) else None
        if verdict.writer_pid is not None:
            live = f"open tail: valid so far, live (written by pid {verdict.writer_pid}); its last line is not sealed yet"
            notes.insert(0, live)
        else:
            notes.insert(0, "open tail: valid, but not closed cleanly (crashed?); the last line is not covered by a seal")
    notes.extend(_link_notes(path, state, verdict))
    verdict.detail = "; ".join(notes)
    return verdict


def _link_notes(path: Path, state: SessionState, verdict: Verdict) -> list[str]:
    """A fork's parent and an upgrade's v2 file, checked when present (a mismatch fails the verdict); a misnamed file."""
    from tiny_agent.interop import check_links
    from tiny_agent.store import session_id_of

    notes = []
    named = session_id_of(path)
    if named is not None and named != state.header.id:
        notes.append(f"misnamed: the file name says session {named}, the header {state.header.id} (writers refuse it)")
    for check in check_links(path, state):
        notes.append(check.note)
        if check.mismatch is not None and verdict.status != "corrupt":
            verdict.status = "corrupt"
            verdict.error = {"code": check.mismatch, "line": 1, "reason": check.note}
    return notes


def verify_many(paths: list[Path], progress: Callable[[int, int], None] | None = None) -> list[Verdict]:
    """Verify several journals, each against the length the sessions index last saw for it."""
    from tiny_agent.catalog import known_lengths

    lengths: dict[Path, dict[str, int]] = {}
    verdicts = []
    for position, path in enumerate(paths, start=1):
        if path.parent not in lengths:
            lengths[path.parent] = known_lengths(path.parent)
        verdicts.append(verify(path, lengths[path.parent].get(path.name)))
        if progress is not None:
            progress(position, len(paths))
    return verdicts


STATUS_LABELS: Final = {
    "ok": "OK",
    "corrupt": "CORRUPT",
    "open-tail": "OPEN TAIL",
    "unsealed": "UNSEALED",
    "unreadable": "UNREADABLE",
}


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    return [f"{STATUS_LABELS[verdict.status]:<10}  {verdict.path}  {verdict.detail}" for verdict in verdicts]
