"""The commands that only look at sessions: replay, normalize, audit, verify, sessions, providers, view, report.

Each takes its command's declaration (:mod:`tiny_agent.cli.declarations`).
The lean path (:mod:`tiny_agent.cli.lean`) runs them without importing typer,
click or pydantic; so nothing here may import those.  Nothing here talks HTTP.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tiny_agent.cli.basics import (
    Found,
    Where,
    corrupt,
    failures_named,
    input_name,
    print_json,
    print_lines,
    progress,
    progress_bar,
    read_input,
)
from tiny_agent.errors import (
    EXIT_CORRUPT,
    CorruptionError,
    DriftFound,
    EmptyInput,
    MalformedInput,
    UsageError,
    VerificationFailed,
    os_error,
)

if TYPE_CHECKING:
    from tiny_agent.cli.declarations import Audit, Normalize, Providers, Replay, Report, Sessions, Verify, View
    from tiny_agent.journal.facts import CompactionEntry
    from tiny_agent.journal.state import SessionState

Grouping = Literal["day", "model", "session"]


def replay(args: Replay) -> None:
    as_json = args.as_json
    if as_json and args.messages:
        raise UsageError("--json and --messages are exclusive")
    found = Where(args.stored).find(args.session)
    path = found.path
    try:
        # Lean: the transcript before the active context stays in the checkpoint, and is streamed from it when printed.
        state = found.fold(lean=True).state
    except CorruptionError as error:
        corrupt(error, path, as_json)
    if found.session.path is not None:
        _warn_if_misnamed(path, state)
    if as_json:
        _write_state(state)
    elif args.messages:
        _write_messages(state)
    else:
        print_found(state, found, full=args.full)


def _write_state(state: SessionState) -> None:
    """``{"ok":true,"state":...}``, encoded straight from the state a batch of messages at a time.

    No buffer holds the whole output: for a long session that would be one
    more copy of every message's text.
    """
    out = sys.stdout.buffer
    out.write(b'{"ok":true,"state":')
    for piece in state.json_pieces():
        out.write(piece)
    out.write(b"}\n")
    out.flush()


def _write_messages(state: SessionState) -> None:
    """The active context as a JSON array, a batch of messages at a time (like :func:`_write_state`)."""
    from tiny_agent.journal.state import json_array_pieces

    out = sys.stdout.buffer
    for piece in json_array_pieces(state.activeContext, 256):
        out.write(piece)
    out.write(b"\n")
    out.flush()


def _warn_if_misnamed(path: Path, state: SessionState) -> None:
    """A file named for another session than its header's is read all the same, and said so (writers refuse it)."""
    from tiny_agent.stores.files.disk import session_id_of

    named = session_id_of(path)
    if named is not None and named != state.header.id:
        progress(
            f"warning: {path.name} is named for session {named} but its header is session {state.header.id}; "
            f"it is read as it is, and no writer opens it until its name ends in _{state.header.id}.jsonl"
        )


def print_human(state: SessionState, path: Path, *, full: bool = False) -> None:
    from tiny_agent.stores.base import Session
    from tiny_agent.stores.files.store import FileStore

    print_found(state, Found(FileStore(path.parent), Session(id=path.stem, name=str(path), path=path)), full=full)


def print_found(state: SessionState, session: Found, *, full: bool = False) -> None:
    from tiny_agent.oversight.render import footer_lines, transcript_lines

    size = session.size()
    print_lines(transcript_lines(state, full=full, compactions=_compactions(state, session)))
    print_lines(footer_lines(state, size, session.named))


def _compactions(state: SessionState, session: Found) -> dict[str, CompactionEntry]:
    """The compaction entries of a session, read from its journal (only when it has any)."""
    from tiny_agent.journal.facts import CompactionEntry, EntryFact
    from tiny_agent.stores.journal import facts_of

    if len(state.entries) == len(state.transcript):  # every entry is a message (counted, not read: a lean state stays so)
        return {}
    found: dict[str, CompactionEntry] = {}
    for _, transaction in facts_of(session.chunks(), b'"retainedTail"'):
        for fact in transaction:
            if isinstance(fact, EntryFact) and isinstance(fact.entry, CompactionEntry):
                found[fact.id] = fact.entry
    return found


def normalize(args: Normalize) -> None:
    from tiny_agent.providers.http import raw_response
    from tiny_agent.wire.registry import derive
    from tiny_agent.wire.seam import Accepted

    source = args.source
    body = read_input(source)
    if not body.strip():
        raise EmptyInput(f"{input_name(source)} is empty (expected one response body)")
    derivation = derive(raw_response(200, None, body), _adapter_identity_for(args.provider, args.api))
    outcome = derivation.outcome
    if isinstance(outcome, Accepted):
        shown: dict[str, object] = {
            "message": outcome.message,
            "stopReason": outcome.stop_reason,
            "usage": outcome.usage,
            "dropped": outcome.dropped,
        }
        if outcome.hosted:
            shown["hosted"] = outcome.hosted
        if derivation.changes:
            shown["adapted"] = derivation.changes
        if derivation.stream is not None:
            shown["stream"] = derivation.stream
        print_json(shown)
        return
    if outcome.reason.startswith("response body is not JSON"):
        raise MalformedInput(f"{input_name(source)}: {outcome.reason}")
    print_json({"rejected": outcome.reason, "usage": outcome.usage})
    raise SystemExit(EXIT_CORRUPT)


def _adapter_identity_for(provider: str | None, api: str | None) -> str:
    """The adapterIdentity a response from this provider (or in this API) would be derived with."""
    from tiny_agent.providers.profiles import api_named
    from tiny_agent.providers.selection import profile_table
    from tiny_agent.providers.userconfig import load_user_config
    from tiny_agent.wire.registry import adapter_identity

    if provider is None:
        return adapter_identity(api_named(api) if api else "chat", ())
    table = profile_table(load_user_config(os.environ))
    profile = table.get(provider)
    if profile is None:
        raise UsageError(f"--provider {provider!r} is not a provider; `tiny-agent providers` lists them")
    chosen_api = api_named(api) if api else profile.api
    return adapter_identity(chosen_api, profile.adapters if chosen_api == profile.api else ())


def audit(args: Audit) -> None:
    from tiny_agent.oversight.audit import audit_chunks

    as_json = args.as_json
    found = Where(args.stored).find(args.session)
    path = found.path
    try:
        report = audit_chunks(found.chunks(), found.name, found.store.resumed(found.session, progress), found.session.path)
    except CorruptionError as error:
        corrupt(error, path, as_json)
    except OSError as error:
        raise os_error(error, str(path)) from None
    if as_json:
        print_json(report)
    else:
        from tiny_agent.oversight.render import audit_lines

        print_lines(audit_lines(report))
    if report.drift:
        numbers = ", ".join(str(attempt.number) for attempt in report.attempts if attempt.drift)
        raise DriftFound(f"attempt(s) {numbers} of {path}: the journal's canonical entries differ from today's seam")


def verify(args: Verify) -> None:
    from tiny_agent.oversight.verify import verdict_lines, verify_sessions

    where, all_sessions, as_json = Where(args.stored), args.all_sessions, args.as_json
    references = args.sessions or []
    if all_sessions and references:
        raise UsageError("give sessions or --all, not both")
    if not all_sessions and not references:
        raise UsageError("name at least one session, or pass --all")
    chosen = where.store.sessions() if all_sessions else [where.store.resolve(reference) for reference in references]
    if not chosen:
        sys.stdout.write(f"no sessions in {where.store.label}\n" if not as_json else "[]\n")
        return
    verdicts = verify_sessions(where.store, chosen, progress_bar("verify") if len(chosen) > 1 else None)
    if as_json:
        print_json(verdicts)
    else:
        print_lines(verdict_lines(verdicts))
    bad = [verdict for verdict in verdicts if verdict.status == "corrupt"]
    if bad:
        raise VerificationFailed(f"{len(bad)} of {len(verdicts)} session(s) failed verification")


def sessions(args: Sessions) -> None:
    from tiny_agent.oversight.render import sessions_table

    all_sessions = args.all_sessions
    files = Where(args.stored).store
    here = None if all_sessions else os.path.realpath(Path.cwd())
    rows = files.listing(cwd=here, limit=args.limit, progress=progress_bar("reading"))
    if args.as_json:
        print_json(rows)
        return
    if not rows:
        where = "" if all_sessions else f" made in {here} (--all lists every directory's)"
        sys.stdout.write(f"no sessions{where} in {files.label}\n")
        return
    print_lines(sessions_table(rows, show_cwd=all_sessions))


def providers(args: Providers) -> None:
    from tiny_agent.oversight.render import providers_table
    from tiny_agent.providers.selection import list_profiles
    from tiny_agent.providers.userconfig import load_user_config

    rows = list_profiles(os.environ, load_user_config(os.environ))
    if args.as_json:
        print_json(rows)
        return
    print_lines(providers_table(rows))


def view(args: View) -> None:
    from tiny_agent.oversight.render import counted
    from tiny_agent.providers.userconfig import load_user_config
    from tiny_agent.view.model import build_view_of
    from tiny_agent.view.session_page import session_page

    output = args.output
    found = Where(args.stored).find(args.session)
    path = found.path
    prices = load_user_config(os.environ).models
    built = failures_named(path, lambda: build_view_of(found.store, found.session, handle=found.handle, prices=prices))
    page = session_page(built).encode("utf-8", "replace")
    if output == "-":
        sys.stdout.buffer.write(page)
        sys.stdout.flush()
        return
    target = Path(output) if output else default_view_path(built.header.id)
    shown = f"{counted(len(built.attempts), 'attempt')}, {counted(len(built.operations), 'operation')}"
    write_page(str(target), page, shown, make_directory=output is None)
    if args.open_page:
        import webbrowser

        if not webbrowser.open(target.resolve().as_uri()):
            progress(f"no browser could be started; open {target} yourself")


def default_view_path(session_id: str) -> Path:
    """``$XDG_DATA_HOME/tiny-agent/views/<id>.html`` (``~/.local/share/...``): beside nothing of the user's."""
    from tiny_agent.stores.files.store import default_sessions_dir

    return default_sessions_dir().parent / "views" / f"{session_id}.html"


def write_page(name: str, page: bytes, shown: str, *, make_directory: bool = False) -> None:
    """Write a page 0600 (it holds session contents) through a staging file, the default directory 0700; then say so."""
    from tiny_agent.stores.files.store import ensure_private_directory

    target = Path(name)
    try:
        if make_directory:
            ensure_private_directory(target.parent)
        staging = target.with_name(f".{target.name}.{os.getpid()}.new")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(page)
            os.replace(staging, target)
        except OSError:
            staging.unlink(missing_ok=True)
            raise
    except OSError as error:
        raise os_error(error, str(target)) from None
    sys.stdout.write(f"wrote {name} ({len(page):,} bytes; {shown})\n")


def report(args: Report) -> None:
    from tiny_agent.oversight.render import counted
    from tiny_agent.oversight.report import build_report, parse_day, report_lines
    from tiny_agent.providers.userconfig import load_user_config

    by, as_json, html = args.by, args.as_json, args.html
    if as_json and html:
        raise UsageError("--json and --html are exclusive")
    if by not in ("day", "model", "session"):
        raise UsageError(f"--by {by!r}: choose day, model or session")
    grouping: Grouping = "day" if by == "day" else "model" if by == "model" else "session"
    first_day = parse_day(args.since) if args.since else None
    files = Where(args.stored).store
    here = None if args.all_sessions else os.path.realpath(Path.cwd())
    entries = files.report_entries(cwd=here, progress=progress_bar("reading"))
    prices = load_user_config(os.environ).models
    figures = build_report(entries, by=grouping, since=first_day, prices=prices, cwd=here)
    if as_json:
        print_json(figures)
        return
    if html:
        from tiny_agent.view.report_page import report_page

        page = report_page(figures).encode("utf-8", "replace")
        write_page(html, page, counted(len(figures.rows), "row"))
        return
    print_lines(report_lines(figures, files.label))
