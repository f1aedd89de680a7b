"""The ``tiny-agent`` command line: thin glue between typer and the modules that do the work.

Every failure a user can cause is a :class:`tiny_agent.errors.TinyAgentError`
raised where it is found; :func:`main` turns it into one line on stderr (its
label first) and the label's exit code, in one place.  No traceback ever
reaches a terminal.  Modules that talk HTTP are imported inside the commands
that need them, so that ``replay`` and friends start without loading httpx.

- :mod:`tiny_agent.cli.app` — the typer application and ``main``;
- :mod:`tiny_agent.cli.common` — what every command shares (naming sessions, output);
- :mod:`tiny_agent.cli.inspecting` — replay, normalize, audit, verify, sessions, providers;
- :mod:`tiny_agent.cli.driving` — run, demo, resume: the commands that drive a session.
"""

from __future__ import annotations

from tiny_agent.cli.app import app, main

__all__ = ["app", "main"]
