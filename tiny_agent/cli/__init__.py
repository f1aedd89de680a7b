"""The ``tiny-agent`` command line (docs/cli.md): ``declarations`` (every command and option, once), ``lean`` (``main``,
and the parser of the read-only commands), ``app`` (typer's), ``basics`` (shared: sessions, output, exits), and the
commands: ``looking``, ``driving`` (with ``settings``), ``chatting``, ``lineage``.  A user's failure is a
:class:`~tiny_agent.errors.TinyAgentError`, ended as one line and its exit code; never a traceback."""

from tiny_agent.cli.lean import main

__all__ = ["main"]
