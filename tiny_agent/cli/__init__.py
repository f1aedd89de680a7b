"""The ``tiny-agent`` command line: thin glue between the command declarations and the modules that do the work.

Every failure a user can cause is a :class:`tiny_agent.errors.TinyAgentError`
raised where it is found; ``main`` turns it into one line on stderr (its
label first) and the label's exit code.  No traceback ever reaches a
terminal.  Modules that talk HTTP are imported inside the commands that need
them; the commands that only look at sessions start without typer too.

- :mod:`~tiny_agent.cli.declarations` — every command and option, declared once (no typer);
- :mod:`~tiny_agent.cli.lean` — ``main``: the lean parser over those declarations, else typer;
- :mod:`~tiny_agent.cli.app` — the typer application made from them;
- :mod:`~tiny_agent.cli.basics` — what every command shares (naming sessions, output, exits);
- :mod:`~tiny_agent.cli.looking` — replay, normalize, audit, verify, sessions, providers, view, report;
- :mod:`~tiny_agent.cli.driving`, :mod:`~tiny_agent.cli.chatting` — run, demo, resume, compact; chat;
  :mod:`~tiny_agent.cli.settings` and :mod:`~tiny_agent.cli.writing` — what their options resolve to, opening sessions;
- :mod:`~tiny_agent.cli.lineage` — upgrade, fork, export, import.
"""

from tiny_agent.cli.lean import main

__all__ = ["main"]
