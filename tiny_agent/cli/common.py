"""What every command shares: the typer options they declare alike, and (from :mod:`tiny_agent.cli.basics`) the rest."""

from __future__ import annotations

import typer

from tiny_agent.cli.basics import (
    checkpointed,
    checkpoints_for,
    corrupt,
    fold_session,
    input_name,
    print_json,
    progress,
    progress_bar,
    read_input,
    read_journal,
    read_session,
    resolve,
    store,
)

__all__ = [
    "JsonOption",
    "SessionArgument",
    "SessionsDirOption",
    "StoreOption",
    "checkpointed",
    "checkpoints_for",
    "corrupt",
    "fold_session",
    "input_name",
    "print_json",
    "progress",
    "progress_bar",
    "read_input",
    "read_journal",
    "read_session",
    "resolve",
    "store",
]

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
StoreOption = typer.Option(
    None,
    "--store",
    metavar="URL",
    help="Where sessions live: a postgresql:// URL or a directory (default: $TINY_AGENT_STORE, else the sessions directory).",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Machine-readable output.")
