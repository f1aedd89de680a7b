"""Commands that look at sessions and never talk to a provider: replay, normalize, audit, verify, sessions, providers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tiny_agent.cli.app import app
from tiny_agent.cli.common import (
    JsonOption,
    SessionArgument,
    SessionsDirOption,
    corrupt,
    input_name,
    print_json,
    progress,
    progress_bar,
    read_input,
    read_journal,
    resolve,
    store,
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
    from tiny_agent.facts import CompactionEntry, RawResponse
    from tiny_agent.state import SessionState


@app.command()
def replay(
    session: str = SessionArgument,
    as_json: bool = typer.Option(False, "--json", help="Print the reduced state in the conformance shape."),
    messages: bool = typer.Option(False, "--messages", help="Print the messages the model would be sent next."),
    full: bool = typer.Option(False, "--full", help="Show long tool results in full."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Rebuild a session from its journal and show the transcript (or the state, or the next messages)."""
    if as_json and messages:
        raise UsageError("--json and --messages are exclusive")
    path = resolve(session, sessions_dir)
    try:
        state = read_journal(path)
    except CorruptionError as error:
        corrupt(error, path, as_json)
    _warn_if_misnamed(path, state)
    if as_json:
        sys.stdout.buffer.write(b'{"ok":true,"state":' + state.to_json_bytes() + b"}\n")
        sys.stdout.flush()
    elif messages:
        print_json(state.activeContext)
    else:
        print_human(state, path, full=full)


def _warn_if_misnamed(path: Path, state: SessionState) -> None:
    """A file named for another session than its header's is read all the same, and said so (writers refuse it)."""
    from tiny_agent.store import session_id_of

    named = session_id_of(path)
    if named is not None and named != state.header.id:
        progress(
            f"warning: {path.name} is named for session {named} but its header is session {state.header.id}; "
            f"it is read as it is, and no writer opens it until its name ends in _{state.header.id}.jsonl"
        )


def print_human(state: SessionState, path: Path, *, full: bool = False) -> None:
    from tiny_agent.render import footer_lines, transcript_lines

    size = path.stat().st_size
    out = sys.stdout
    for line in transcript_lines(state, full=full, compactions=_compactions(state, path)):
        out.write(line + "\n")
    for line in footer_lines(state, size):
        out.write(line + "\n")


def _compactions(state: SessionState, path: Path) -> dict[str, CompactionEntry]:
    """The compaction entries of a session, read from its journal (only when it has any)."""
    from tiny_agent.facts import CompactionEntry, EntryFact
    from tiny_agent.journal import facts

    if all(entry.message is not None for entry in state.entries.values()):
        return {}
    found: dict[str, CompactionEntry] = {}
    for _, transaction in facts(path):
        for fact in transaction:
            if isinstance(fact, EntryFact) and isinstance(fact.entry, CompactionEntry):
                found[fact.id] = fact.entry
    return found


@app.command()
def normalize(
    source: str = typer.Argument(
        ..., metavar="FILE", help="A file holding one provider response body (or an event stream), or - for stdin."
    ),
    provider: str | None = typer.Option(None, "--provider", metavar="NAME", help="Run this provider's quirk adapters first."),
    api: str | None = typer.Option(
        None, "--api", metavar="API", help="The wire API of the body: chat (default), anthropic or responses."
    ),
) -> None:
    """Run a response through the seam (adapters and stream reassembly included) and show what the transcript keeps."""
    from tiny_agent.normalize import Accepted
    from tiny_agent.settlement import derive

    body = read_input(source)
    if not body.strip():
        raise EmptyInput(f"{input_name(source)} is empty (expected one response body)")
    derivation = derive(_as_raw(body), _adapter_identity_for(provider, api))
    outcome = derivation.outcome
    if isinstance(outcome, Accepted):
        shown: dict[str, object] = {
            "message": outcome.message,
            "stopReason": outcome.stop_reason,
            "usage": outcome.usage,
            "dropped": outcome.dropped,
        }
        if derivation.changes:
            shown["adapted"] = derivation.changes
        if derivation.stream is not None:
            shown["stream"] = derivation.stream
        print_json(shown)
        return
    if outcome.reason.startswith("response body is not JSON"):
        raise MalformedInput(f"{input_name(source)}: {outcome.reason}")
    print_json({"rejected": outcome.reason, "usage": outcome.usage})
    raise typer.Exit(EXIT_CORRUPT)


def _as_raw(body: bytes) -> RawResponse:
    from tiny_agent.provider import raw_response

    return raw_response(200, None, body)


def _adapter_identity_for(provider: str | None, api: str | None) -> str:
    """The adapterIdentity a response from this provider (or in this API) would be derived with."""
    from tiny_agent.adapters import adapter_identity
    from tiny_agent.profiles import api_named, profile_table
    from tiny_agent.userconfig import load_user_config

    if provider is None:
        return adapter_identity(api_named(api) if api else "chat", ())
    table = profile_table(load_user_config(os.environ))
    profile = table.get(provider)
    if profile is None:
        raise UsageError(f"--provider {provider!r} is not a provider; `tiny-agent providers` lists them")
    chosen_api = api_named(api) if api else profile.api
    return adapter_identity(chosen_api, profile.adapters if chosen_api == profile.api else ())


@app.command()
def audit(
    session: str = SessionArgument,
    as_json: bool = typer.Option(False, "--json", help="Print the whole audit as one JSON document."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Show what each provider response was, what the seam kept, what it cost, and any drift (exit 3)."""
    from tiny_agent.audit import audit as audit_session

    path = resolve(session, sessions_dir)
    try:
        report = audit_session(path)
    except CorruptionError as error:
        corrupt(error, path, as_json)
    except OSError as error:
        raise os_error(error, str(path)) from None
    if as_json:
        print_json(report)
    else:
        from tiny_agent.render import audit_lines

        for line in audit_lines(report):
            sys.stdout.write(line + "\n")
    if report.drift:
        numbers = ", ".join(str(attempt.number) for attempt in report.attempts if attempt.drift)
        raise DriftFound(f"attempt(s) {numbers} of {path}: the journal's canonical entries differ from today's seam")


@app.command()
def verify(
    sessions: list[str] = typer.Argument(
        None, metavar="SESSION", help="Handles, session ids or journal paths.", show_default=False
    ),
    all_sessions: bool = typer.Option(False, "--all", help="Verify every session in the store."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON verdict per session, as an array."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Check the seal chain and every reducer rule of one, several or all sessions (exit 65 if any is corrupt)."""
    from tiny_agent.store import list_journals
    from tiny_agent.verify import verdict_lines, verify_many

    directory = store(sessions_dir).directory
    if all_sessions and sessions:
        raise UsageError("give sessions or --all, not both")
    if not all_sessions and not sessions:
        raise UsageError("name at least one session, or pass --all")
    paths = list_journals(directory) if all_sessions else [resolve(reference, sessions_dir) for reference in sessions]
    if not paths:
        sys.stdout.write(f"no sessions in {directory}\n" if not as_json else "[]\n")
        return
    verdicts = verify_many(paths, progress_bar("verify") if len(paths) > 1 else None)
    if as_json:
        print_json(verdicts)
    else:
        for line in verdict_lines(verdicts):
            sys.stdout.write(line + "\n")
    bad = [verdict for verdict in verdicts if verdict.status == "corrupt"]
    if bad:
        raise VerificationFailed(f"{len(bad)} of {len(verdicts)} session(s) failed verification")


@app.command()
def sessions(
    as_json: bool = JsonOption,
    limit: int | None = typer.Option(None, "--limit", min=1, metavar="N", help="Show only the N newest sessions."),
    all_sessions: bool = typer.Option(False, "--all", help="List the sessions of every directory, not only this one's."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """List this directory's sessions, newest first: handle, created, model, status, runs, tokens, first prompt."""
    from tiny_agent.catalog import list_sessions
    from tiny_agent.render import sessions_table

    files = store(sessions_dir)
    here = None if all_sessions else os.path.realpath(Path.cwd())
    rows = list_sessions(files.directory, limit, progress=progress_bar("reading"), cwd=here)
    if as_json:
        print_json(rows)
        return
    if not rows:
        where = "" if all_sessions else f" made in {here} (--all lists every directory's)"
        sys.stdout.write(f"no sessions{where} in {files.label}\n")
        return
    for line in sessions_table(rows, show_cwd=all_sessions):
        sys.stdout.write(line + "\n")


@app.command()
def providers(as_json: bool = JsonOption) -> None:
    """List the provider profiles: API, base URL, key variable, and whether that key is set (never the key)."""
    from tiny_agent.profiles import list_profiles
    from tiny_agent.render import providers_table
    from tiny_agent.userconfig import load_user_config

    rows = list_profiles(os.environ, load_user_config(os.environ))
    if as_json:
        print_json(rows)
        return
    for line in providers_table(rows):
        sys.stdout.write(line + "\n")
