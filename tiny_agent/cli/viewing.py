"""The typer declarations of the commands that draw sessions for people: ``view`` (one session as a page) and ``report``.

Their bodies are in :mod:`tiny_agent.cli.looking` (no typer there), which
the lean path (:mod:`tiny_agent.cli.lean`) calls directly.
"""

from __future__ import annotations

import typer

from tiny_agent.cli import looking
from tiny_agent.cli.app import app
from tiny_agent.cli.common import SessionArgument, SessionsDirOption, StoreOption
from tiny_agent.cli.looking import default_view_path, write_page

__all__ = ["default_view_path", "report", "view", "write_page"]


@app.command()
def view(
    session: str = SessionArgument,
    output: str | None = typer.Option(
        None,
        "-o",
        "--output",
        metavar="FILE",
        help="Where to write the page ('-' for stdout; default: <data dir>/tiny-agent/views/<session id>.html).",
        show_default=False,
    ),
    open_page: bool = typer.Option(False, "--open", help="Open the page in the default browser once written."),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """Write one self-contained HTML page of a session: timeline, raw-vs-canonical panels, usage and cost charts."""
    looking.view(session, output, open_page, sessions_dir, store_url)


@app.command()
def report(
    all_sessions: bool = typer.Option(False, "--all", help="Every directory's sessions, not only this one's."),
    since: str | None = typer.Option(
        None, "--since", metavar="YYYY-MM-DD", help="Only usage from this UTC day on (YYYY-MM-DD).", show_default=False
    ),
    by: str = typer.Option("day", "--by", metavar="day|model|session", help="Rows per day, model or session."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as one JSON document."),
    html: str | None = typer.Option(
        None, "--html", metavar="FILE", help="Write the figures with charts to this HTML file.", show_default=False
    ),
    sessions_dir: str | None = SessionsDirOption,
    store_url: str | None = StoreOption,
) -> None:
    """Usage across sessions: tokens, cache hit rate, cost (where prices are known), runs by outcome."""
    looking.report(all_sessions, since, by, as_json, html, sessions_dir, store_url)
