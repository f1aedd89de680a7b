"""The ``tiny-agent`` command line: thin glue between typer and the modules that do the work.

Every failure a user can cause is a :class:`tiny_agent.errors.TinyAgentError`
raised where it is found; :func:`main` turns it into one line on stderr (its
label first) and the label's exit code, in one place.  No traceback ever
reaches a terminal.  Modules that talk HTTP are imported inside the commands
that need them, so that ``replay`` and friends start without loading httpx;
the commands that only look at sessions start without typer too (the lean
path), so without click, pydantic and importlib.metadata.

- :mod:`tiny_agent.cli.lean` — ``main``: the lean path, else typer;
- :mod:`tiny_agent.cli.app` — the typer application;
- :mod:`tiny_agent.cli.basics` — what every command shares (naming sessions, reading, output, exits), without typer;
- :mod:`tiny_agent.cli.common` — the typer options commands declare alike;
- :mod:`tiny_agent.cli.looking` — the bodies of replay, normalize, audit, verify, sessions, providers, view, report;
- :mod:`tiny_agent.cli.inspecting`, :mod:`tiny_agent.cli.viewing` — their typer declarations;
- :mod:`tiny_agent.cli.driving` — run, demo, resume: the commands that drive a session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiny_agent.cli.lean import main

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> typer.Typer:
    """``app`` on first use: importing typer is what the lean path avoids."""
    if name == "app":
        from tiny_agent.cli.app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
