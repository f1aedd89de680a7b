"""The typer declarations of the commands that look at sessions: replay, normalize, audit, verify, sessions, providers.

Their bodies are in :mod:`tiny_agent.cli.looking` (no typer there), which
the lean path (:mod:`tiny_agent.cli.lean`) calls directly; each option
declared here has its twin in the lean path's table, and
tests/test_lean_cli.py keeps the two identical.
"""

from __future__ import annotations

import typer

from tiny_agent.cli import looking
from tiny_agent.cli.app import app
from tiny_agent.cli.common import JsonOption, SessionArgument, SessionsDirOption, StoreOption
from tiny_agent.cli.looking import print_human

__all__ = ["audit", "normalize", "print_human", "providers", "replay", "sessions", "verify"]


@app.command()
def replay(
    session: str = SessionArgument,
    as_json: bool = typer.Option(False, "--json", help="Print the reduced state in the conformance shape."),
    messages: bool = typer.Option(False, "--messages", help="Print the messages the model would be sent next."),
    full: bool = typer.Option(False, "--full", help="Show long tool results in full."),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """Rebuild a session from its journal and show the transcript (or the state, or the next messages)."""
    looking.replay(session, as_json, messages, full, sessions_dir, store_url)


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
    looking.normalize(source, provider, api)


@app.command()
def audit(
    session: str = SessionArgument,
    as_json: bool = typer.Option(False, "--json", help="Print the whole audit as one JSON document."),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """Show what each provider response was, what the seam kept, what it cost, and any drift (exit 3)."""
    looking.audit(session, as_json, sessions_dir, store_url)


@app.command()
def verify(
    sessions: list[str] = typer.Argument(
        None, metavar="SESSION", help="Handles, session ids or journal paths.", show_default=False
    ),
    all_sessions: bool = typer.Option(False, "--all", help="Verify every session in the store."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON verdict per session, as an array."),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """Check the seal chain and every reducer rule of one, several or all sessions (exit 65 if any is corrupt)."""
    looking.verify(sessions, all_sessions, as_json, sessions_dir, store_url)


@app.command()
def sessions(
    as_json: bool = JsonOption,
    limit: int | None = typer.Option(None, "--limit", min=1, metavar="N", help="Show only the N newest sessions."),
    all_sessions: bool = typer.Option(False, "--all", help="List the sessions of every directory, not only this one's."),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """List this directory's sessions, newest first: handle, created, model, status, runs, tokens, first prompt."""
    looking.sessions(as_json, limit, all_sessions, sessions_dir, store_url)


@app.command()
def providers(as_json: bool = JsonOption) -> None:
    """List the provider profiles: API, base URL, key variable, and whether that key is set (never the key)."""
    looking.providers(as_json)
