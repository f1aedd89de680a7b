"""Commands that draw sessions for people: ``view`` (one session as a page) and ``report`` (usage across sessions)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from tiny_agent.cli.app import app
from tiny_agent.cli.common import SessionArgument, SessionsDirOption, corrupt, print_json, progress_bar, resolve, store
from tiny_agent.errors import CorruptionError, UsageError, os_error

if TYPE_CHECKING:
    from tiny_agent.store import FileStore

Grouping = Literal["day", "model", "session"]


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
) -> None:
    """Write one self-contained HTML page of a session: timeline, raw-vs-canonical panels, usage and cost charts."""
    from tiny_agent.userconfig import load_user_config
    from tiny_agent.view.model import build_view
    from tiny_agent.view.session_page import session_page

    files = store(sessions_dir)
    path = resolve(session, sessions_dir)
    prices = load_user_config(os.environ).models
    try:
        built = build_view(path, handle=_handle(files, path), prices=prices)
    except CorruptionError as error:
        corrupt(error, path, False)
    except OSError as error:
        raise os_error(error, str(path)) from None
    page = session_page(built).encode("utf-8", "replace")
    if output == "-":
        sys.stdout.buffer.write(page)
        sys.stdout.flush()
        return
    target = Path(output) if output else default_view_path(built.header.id)
    write_page(target, page, make_directory=output is None)
    attempts = len(built.attempts)
    sys.stdout.write(f"wrote {target} ({len(page):,} bytes; {attempts:,} attempts, {len(built.operations):,} operations)\n")
    if open_page:
        _open_in_browser(target)


def _handle(files: FileStore, path: Path) -> str:
    """The session's handle when it lives in the store (handles are unique only among the store's sessions)."""
    from tiny_agent.store import list_journals, session_id_of, shortest_handles

    if path.parent.resolve() != files.directory.resolve():
        return ""
    handles = shortest_handles([session_id_of(journal) or "" for journal in list_journals(files.directory)])
    return handles.get(session_id_of(path) or "", "")


def default_view_path(session_id: str) -> Path:
    """``$XDG_DATA_HOME/tiny-agent/views/<id>.html`` (``~/.local/share/...``): beside nothing of the user's."""
    from tiny_agent.store import default_sessions_dir

    return default_sessions_dir().parent / "views" / f"{session_id}.html"


def write_page(target: Path, page: bytes, *, make_directory: bool = False) -> None:
    """Write a page 0600 (it holds session contents) through a staging file; the default directory is made 0700."""
    from tiny_agent.store import ensure_private_directory

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


def _open_in_browser(target: Path) -> None:
    import webbrowser

    if not webbrowser.open(target.resolve().as_uri()):
        sys.stderr.write(f"· no browser could be started; open {target} yourself\n")


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
) -> None:
    """Usage across sessions: tokens, cache hit rate, cost (where prices are known), runs by outcome."""
    from tiny_agent.catalog import report_entries
    from tiny_agent.report import build_report, parse_day, report_lines
    from tiny_agent.userconfig import load_user_config

    if as_json and html:
        raise UsageError("--json and --html are exclusive")
    if by not in ("day", "model", "session"):
        raise UsageError(f"--by {by!r}: choose day, model or session")
    grouping: Grouping = "day" if by == "day" else "model" if by == "model" else "session"
    first_day = parse_day(since) if since else None
    files = store(sessions_dir)
    here = None if all_sessions else os.path.realpath(Path.cwd())
    entries = report_entries(files.directory, cwd=here, progress=progress_bar("reading"))
    prices = load_user_config(os.environ).models
    figures = build_report(entries, by=grouping, since=first_day, prices=prices, cwd=here)
    if as_json:
        print_json(figures)
        return
    if html:
        from tiny_agent.view.report_page import report_page

        page = report_page(figures).encode("utf-8", "replace")
        write_page(Path(html), page)
        sys.stdout.write(f"wrote {html} ({len(page):,} bytes; {len(figures.rows):,} rows)\n")
        return
    for line in report_lines(figures, files.label):
        sys.stdout.write(line + "\n")
